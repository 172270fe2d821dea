"""Weight scales TensorRT will not use: implicit INT8 recomputes them as max|w|/127 per channel.

A Q/DQ model whose weight scales differ (a histogram or percentile calibrator, a clipped weight)
loses that choice in translation; ``weight_scale_mismatches`` names each such weight with its
largest relative difference, so the user knows before building.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from qdqkit.core.lazy_proto import release_mapped
from qdqkit.core.qdq import QdqView, node_label
from qdqkit.core.qdq_math import implicit_weight_scales
from qdqkit.core.weights import output_channel_axis
from qdqkit.passes.fold_weight_path import evaluate_constant
from qdqkit.passes.strip_qdq import dequantized_array


@dataclass
class WeightScaleMismatch:
    node: str
    weight: str
    max_relative_difference: float


def weight_scale_mismatches(view: QdqView, tolerance: float = 2e-3) -> list[WeightScaleMismatch]:
    """Weights whose Q/DQ scales are not TensorRT's per-channel max|w|/127 (it recomputes them)."""
    found: list[WeightScaleMismatch] = []
    for node in view.weighted_nodes:
        index = view.weight_index(node)
        ref = view.weight_ref(node, index) if index is not None else None
        if index is None or ref is None or ref.params is None or ref.path or ref.dequantize is None:
            continue
        if ref.quantize is not None:
            # The float weight, possibly behind Reshape/Transpose of a constant (TF, onnxruntime).
            w = evaluate_constant(ref.source)
        else:
            w = dequantized_array(view, ref.dequantize, np.dtype(np.float64))
        if w is None or w.ndim == 0:
            continue
        _compare(found, node, index, ref.source, w, ref.params.scale, tolerance)
        del w
        release_mapped(ref.source)
    return found


def _compare(
    found: list[WeightScaleMismatch], node: ir.Node, index: int, source: ir.Value | None,
    w: np.ndarray, scales: np.ndarray, tolerance: float,
) -> None:
    w = np.asarray(w, dtype=np.float64)
    if w.ndim == 0:
        return
    expected = implicit_weight_scales(w, output_channel_axis(node, index, w.ndim))
    given = scales.astype(np.float64).reshape(-1)
    if given.size not in (1, expected.size):
        rel = float("inf")
    else:
        per_channel = np.broadcast_to(given, expected.shape)
        live = expected > 0
        diff = np.abs(per_channel[live] - expected[live]) / expected[live]
        rel = float(np.max(diff)) if live.any() else 0.0
    if rel > tolerance:
        name = source.name if source is not None and source.name else ""
        found.append(WeightScaleMismatch(node_label(node), name, rel))
