"""SmoothQuant for MatMul models: per-channel factors from one pass over the data.

1. Candidates: a tensor X read only by quantized MatMuls (X on input A, a constant 2-D weight B)
   or Gemms (no transposes), produced by a LayerNormalization with constant scale/bias, by the
   ``x * gamma + beta`` end of a decomposed one, or by a Linear (MatMul with a constant weight,
   optionally plus a constant bias).
2. One streaming pass records max|X_j| per channel j (the last axis). With the largest |W_j,:|
   over the readers' weight rows, ``s_j = max|X_j|^alpha / max|W_j|^(1 - alpha)`` (SmoothQuant,
   alpha 0.5 by default): outlier channels shrink, their weight rows grow.
3. ``passes.smooth_rescale`` applies the factors exactly; calibration then runs on the result.
4. A tensor the quantized MatMuls read but rule 1 cannot rescale at its source (other nodes
   read it too, as a post-LayerNorm transformer's residual Add reads each LayerNorm output, or
   its producer is nonlinear, as GELU before the feed-forward output) gets the factors as a
   ``Mul(X, 1/s)`` in front of those MatMuls only (``passes.depthwise_equalize``, rule 1), each
   ``s_j`` rounded to a power of two (2^-10 to 2^10) so the float model computes the same
   values. The Mul is one more pointwise layer where it cannot fuse into X's producer; the cost
   model then judges the INT8 regions with it (``quantization.settle``). ``explicit`` in the
   report.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np
import onnx
import onnx_ir as ir

from qdqkit.core.activations import ActivationRunner
from qdqkit.core.qdq import node_label
from qdqkit.passes.depthwise_equalize import DepthwiseEqualize, Equalization
from qdqkit.passes.smooth_rescale import Smoothing, SmoothRescale

_EXPONENT_LIMIT = 10  # rule 4: explicit factors within 2^-10 .. 2^10


def _smoothable_reader(node: ir.Node, value: ir.Value) -> bool:
    if node.op_type not in ("MatMul", "Gemm") or node.inputs[0] is not value:
        return False
    weight = node.inputs[1]
    if weight is None or weight.const_value is None or len(weight.const_value.shape) != 2:
        return False
    if node.op_type == "Gemm":
        return all(node.attributes.get(a) is None or node.attributes[a].as_int() == 0
                   for a in ("transA", "transB"))
    return True


def _source(value: ir.Value) -> ir.Node | None:
    producer = value.producer()
    if producer is None:
        return None
    if producer.op_type == "LayerNormalization":
        constant = all(v is not None and v.const_value is not None for v in producer.inputs[1:3])
        return producer if constant and len(producer.inputs) >= 2 else None
    matmul = producer
    if producer.op_type == "Add":
        data = [v for v in producer.inputs if v is not None and v.const_value is None]
        consts = [v for v in producer.inputs if v is not None and v.const_value is not None]
        if len(data) != 1 or len(consts) != 1 or len(consts[0].const_value.shape) > 1:  # type: ignore[union-attr]
            return None
        matmul = data[0].producer()  # type: ignore[assignment]
        if matmul is None or len(list(data[0].uses())) != 1:
            return None
        if matmul.op_type == "Mul" and _channel_scale(matmul):
            return producer  # x * gamma + beta: a decomposed LayerNorm's affine end
    if matmul.op_type != "MatMul" or matmul.inputs[1] is None:
        return None
    weight = matmul.inputs[1]
    if weight.const_value is None or len(weight.const_value.shape) != 2:
        return None
    return producer


def _channel_scale(mul: ir.Node) -> bool:
    """``Mul(x, gamma)`` with one computed input and a constant 1-D (per-channel) gamma."""
    consts = [v for v in mul.inputs if v is not None and v.const_value is not None]
    data = [v for v in mul.inputs if v is not None and v.const_value is None]
    return len(consts) == 1 and len(data) == 1 and len(consts[0].const_value.shape) == 1  # type: ignore[union-attr]


def smoothing_candidates(model: ir.Model, quantized: set[ir.Node]
                         ) -> list[tuple[ir.Value, ir.Node, tuple[ir.Node, ...]]]:
    """(X, its source, its readers) for every tensor rule 1 allows, in graph order."""
    found = []
    for node in model.graph:
        for value in node.outputs:
            readers = tuple(dict.fromkeys(use.node for use in value.uses()))
            if not readers or value.is_graph_output():
                continue
            if not all(r in quantized and _smoothable_reader(r, value) for r in readers):
                continue
            source = _source(value)
            if source is not None:
                found.append((value, source, readers))
    return found


def explicit_candidates(model: ir.Model, quantized: set[ir.Node], exact: set[ir.Value]
                        ) -> list[tuple[ir.Value, tuple[ir.Node, ...]]]:
    """Rule 4: (X, the quantized MatMuls reading it) for each tensor rule 1 left out."""
    found = []
    for node in model.graph:
        for value in node.outputs:
            if value in exact or value.is_graph_output():
                continue
            readers = tuple(dict.fromkeys(
                use.node for use in value.uses()
                if use.node in quantized and _smoothable_reader(use.node, value)))
            if readers:
                found.append((value, readers))
    return found


def why_nothing_smoothed(model: ir.Model, quantized: set[ir.Node]) -> str:
    """Why rules 1 and 4 rescaled nothing, for the warning that says so."""
    read = any(node in quantized and node.inputs and node.inputs[0] is not None
               and _smoothable_reader(node, node.inputs[0]) for node in model.graph)
    if not read:
        return "no quantized MatMul or Gemm reads an activation with a constant 2-D weight"
    return "every channel's factor rounded to 1 (the channels are already even)"


def smooth(
    model: ir.Model, proto: onnx.ModelProto, quantized: set[ir.Node],
    batches: Iterable[Mapping[str, np.ndarray]], alpha: float,
) -> list[dict[str, object]]:
    """Apply SmoothQuant to ``model`` in place (rules 1-4); returns what was smoothed, for the
    report."""
    candidates = smoothing_candidates(model, quantized)
    explicit = explicit_candidates(model, quantized, {value for value, _, _ in candidates})
    if not candidates and not explicit:
        return []
    names = [value.name or "" for value, _, _ in candidates]
    names += [value.name or "" for value, _ in explicit]
    runner = ActivationRunner(proto, names)
    channel_max: dict[str, np.ndarray] = {}
    for tensors in runner.run(batches):
        for name, array in tensors.items():
            peak = np.abs(array.reshape(-1, array.shape[-1])).max(axis=0)
            channel_max[name] = np.maximum(channel_max.get(name, peak), peak)
    smoothings: list[Smoothing] = []
    report: list[dict[str, object]] = []
    for value, source, readers in candidates:
        x_max = channel_max.get(value.name or "")
        if x_max is None:
            continue
        factors = _factors(x_max, readers, alpha)
        smoothings.append(Smoothing(source, readers, factors.astype(np.float32)))
        report.append({"tensor": value.name, "source": node_label(source),
                       "readers": [node_label(r) for r in readers],
                       "largest_factor": float(factors.max()),
                       "smallest_factor": float(factors.min()), "explicit": False})
    rescales: list[Equalization] = []
    for value, readers in explicit:
        x_max = channel_max.get(value.name or "")
        if x_max is None:
            continue
        exponents = np.clip(np.round(np.log2(_factors(x_max, readers, alpha))),
                            -_EXPONENT_LIMIT, _EXPONENT_LIMIT)
        if not np.any(exponents):
            continue
        factors = np.exp2(exponents)
        # Rule 4: X / s in front of the readers, their weight rows times s (divided by 1 / s).
        rescales.append(Equalization(value, readers, (1.0 / factors).astype(np.float32),
                                     f"{value.name}_smoothed"))
        producer = value.producer()
        report.append({"tensor": value.name,
                       "source": node_label(producer) if producer is not None else value.name,
                       "readers": [node_label(r) for r in readers],
                       "largest_factor": float(factors.max()),
                       "smallest_factor": float(factors.min()), "explicit": True})
    SmoothRescale(smoothings)(model)
    DepthwiseEqualize(rescales)(model)
    return report


def _factors(x_max: np.ndarray, readers: tuple[ir.Node, ...], alpha: float) -> np.ndarray:
    """Rule 2's ``s_j`` for one tensor (1 where it is not finite and positive)."""
    w_max = np.max([np.abs(r.inputs[1].const_value.numpy()).max(axis=1)  # type: ignore[union-attr]
                    for r in readers], axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        factors = np.power(x_max, alpha) / np.power(w_max, 1.0 - alpha)
    return np.where(np.isfinite(factors) & (factors > 0), factors, 1.0)
