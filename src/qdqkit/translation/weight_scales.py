"""Weight scales TensorRT will not use: implicit INT8 recomputes them as max|w|/127 per channel.

A Q/DQ model whose weight scales differ (a histogram or percentile calibrator, a clipped weight)
loses that choice in translation when it changes the weight values TensorRT computes with;
``weight_scale_mismatches`` names each such weight with its largest change, so the user knows
before building. A scale that differs but requantizes to the same values is not reported.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from qdqkit.core.lazy_proto import release_mapped
from qdqkit.core.qdq import QdqView, QuantParams, node_label
from qdqkit.core.qdq_math import fake_quantize, implicit_weight_scales, trt_requantize_weight
from qdqkit.core.weights import output_channel_axis
from qdqkit.passes.fold_weight_path import evaluate_constant
from qdqkit.passes.strip_qdq import dequantized_array


@dataclass
class WeightScaleMismatch:
    """A weight TensorRT's requantization changes: ``max_relative_difference`` is the largest change
    of one weight value, relative to its channel's max|w| (one int8 step is about 0.8%)."""

    node: str
    weight: str
    max_relative_difference: float


@dataclass
class WeightScan:
    """``mismatches``: weights TensorRT would compute with other values than the Q/DQ model;
    ``on_grid``: float weights (behind a Q) whose Q/DQ values are already on TensorRT's grid though
    their scales are not max|w|/127 (a float16-rounded scale): stored as the Q/DQ pair computes
    them, they requantize to themselves, so they are not mismatches."""

    mismatches: list[WeightScaleMismatch]
    on_grid: set[ir.Value]


def weight_scale_mismatches(view: QdqView, tolerance: float = 1e-6) -> list[WeightScaleMismatch]:
    """Weights whose values TensorRT's per-channel max|w|/127 requantization would change."""
    return scan_weight_scales(view, tolerance).mismatches


def scan_weight_scales(view: QdqView, tolerance: float = 1e-6) -> WeightScan:
    """Every quantized weight compared with what TensorRT's requantization makes of it."""
    scan = WeightScan([], set())
    for node in view.weighted_nodes:
        index = view.weight_index(node)
        ref = view.weight_ref(node, index) if index is not None else None
        if index is None or ref is None or ref.params is None or ref.path or ref.dequantize is None:
            continue
        if ref.quantize is not None:
            # The float weight, possibly behind Reshape/Transpose of a constant (TF, onnxruntime).
            w = evaluate_constant(ref.source)
            fake_quantized = ref.params  # the model computes with fake_quantize(w)
        else:
            w = dequantized_array(view, ref.dequantize, np.dtype(np.float32))
            fake_quantized = None  # the model computes with w itself
        if w is None or w.ndim == 0:
            continue
        _compare(scan, node, index, ref.source, np.asarray(w, np.float32), fake_quantized,
                 ref.params.scale, tolerance)
        del w
        release_mapped(ref.source)
    return scan


def _compare(
    scan: WeightScan, node: ir.Node, index: int, source: ir.Value | None,
    w: np.ndarray, fake_quantized: QuantParams | None, scales: np.ndarray, tolerance: float,
) -> None:
    """Note the weight if TensorRT computes with other values than the Q/DQ model does.

    Scales equal to max|w|/127 up to float rounding are TensorRT's own (a value exactly between two
    steps may round the other way; that is not a different quantization). Otherwise the weight is
    requantized as TensorRT does and compared with the values the Q/DQ model uses: a scale 127x
    too large on a weight whose integers are all -1, 0, 1 still gives the same values. A float
    weight whose Q/DQ values requantize to themselves (each channel's largest integer 127) is
    on TensorRT's grid: the translation stores those values (``StripQdqPairs``).
    """
    axis = output_channel_axis(node, index, w.ndim)
    expected = implicit_weight_scales(w, axis)
    given = scales.astype(np.float64).reshape(-1)
    if given.size in (1, expected.size):
        live = expected > 0
        # One scale per channel needs no broadcast (numpy's Python-level helper costs more than
        # the comparison on a small weight); a per-tensor one is spread over the channels.
        per_channel = (given if given.size == expected.size
                       else np.broadcast_to(given, expected.shape))[live]
        wanted = expected[live]
        if (np.abs(per_channel - wanted) <= tolerance * wanted).all():
            return
    # The values the Q/DQ model computes with, needed only now that the scales differ.
    used = w if fake_quantized is None else fake_quantize(w, fake_quantized)
    if fake_quantized is not None and source is not None \
            and not trt_requantize_weight(used, axis)[1].any():
        scan.on_grid.add(source)
        return
    requantized, _ = trt_requantize_weight(w, axis)
    moved = np.moveaxis(np.abs(requantized.astype(np.float64) - used), axis, 0)
    rows = moved.reshape(moved.shape[0], -1)
    amax = np.abs(np.moveaxis(used, axis, 0).reshape(rows.shape[0], -1)).max(axis=1)
    change = rows.max(axis=1) / np.where(amax > 0, amax, 1.0)
    # Differences at the level of float rounding are not a change of the integer weights.
    worst = float(change.max()) if change.size else 0.0
    if worst > 4 * float(np.finfo(np.float32).eps):
        name = source.name if source is not None and source.name else ""
        scan.mismatches.append(WeightScaleMismatch(node_label(node), name, worst))
