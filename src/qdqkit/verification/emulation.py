"""The emulation model: the translated model computing what TensorRT's implicit INT8 computes.

Rules:
1. Every tensor the calibration cache gives a scale is fake-quantized there (Q -> DQ, int8,
   symmetric, round half to even), except a scale of exactly 1.0, the DLA unary marker, which the
   DLA compiler reads as "no requantization".
2. The weight of every INT8 layer (Conv, ConvTranspose, Gemm, MatMul whose activation input has a
   scale) is replaced by its fake-quantized value: per output channel, scale max|w|/127, as
   TensorRT recomputes it.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx_ir as ir

from qdqkit.core.qdq_math import implicit_weight_scales
from qdqkit.core.weights import output_channel_axis, weight_index
from qdqkit.passes.insert_qdq import ActivationQdq, InsertQdq

_WEIGHTED = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})


def fake_quantize_weight(w: np.ndarray, axis: int) -> np.ndarray:
    """TensorRT's implicit weight quantization: per output channel, scale max|w|/127."""
    scale = implicit_weight_scales(w, axis)
    # An all-zero channel quantizes to zeros under any scale; 1/127 keeps the division defined.
    scale = np.where(scale > 0, scale, 1.0 / 127.0)
    moved = np.moveaxis(w.astype(np.float64), axis, 0)
    shape = (-1,) + (1,) * (moved.ndim - 1)
    q = np.clip(np.rint(moved / scale.reshape(shape)), -127, 127)
    return np.moveaxis(q * scale.reshape(shape), 0, axis).astype(w.dtype)


def quantize_weights(graph: ir.Graph, scaled: set[str]) -> int:
    """Fake-quantize the weights of weighted ops whose activation has a scale; returns how many."""
    done: set[ir.Value] = set()
    for node in graph:
        if node.op_type not in _WEIGHTED:
            continue
        index = weight_index(node, lambda i: _is_initializer(node.inputs[i]))  # noqa: B023
        if index is None:
            continue
        x, w = node.inputs[1 - index], node.inputs[index]
        if x is None or x.name not in scaled or w is None or w.const_value is None or w in done:
            continue
        array = w.const_value.numpy()
        if array.ndim == 0 or not np.issubdtype(array.dtype, np.floating):
            continue
        axis = output_channel_axis(node, index, array.ndim)
        w.const_value = ir.Tensor(fake_quantize_weight(array, axis % array.ndim), name=w.name)
        done.add(w)
    return len(done)


def _is_initializer(value: ir.Value | None) -> bool:
    return value is not None and value.const_value is not None


def insert_fake_quant(model: ir.Model, scales: Mapping[str, float]) -> list[str]:
    """Q -> DQ (int8, zero point 0) after every tensor named in ``scales``; returns names not found."""
    graph = model.graph
    by_name: dict[str, ir.Value] = {v.name: v for v in graph.inputs if v.name}
    for node in graph:
        for out in node.outputs:
            if out.name:
                by_name[out.name] = out
    missing = [name for name in scales if name not in by_name]
    InsertQdq([ActivationQdq(by_name[name], scale) for name, scale in scales.items()
               if name in by_name])(model)
    return missing
