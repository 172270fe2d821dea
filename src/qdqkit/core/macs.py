"""Multiply-accumulate counts of weighted ops, from inferred shapes.

Symbolic dimensions (a dynamic batch) count as 1, so the figures are per sample; what matters for
"share of MACs in INT8" is the ratio, which does not depend on the batch. A dimension ONNX
inference made up (``unk__N``: the size a Reshape to a run-time shape gives, for one) names
nothing the model declares: first, it is taken for a batch like any symbolic one; anywhere else
(a channel or spatial size), the layer is left unsized rather than counted as 1.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import onnx_ir as ir

from qdqkit.core.errors import QdqkitError

ShapeOf = Callable[[ir.Value], "ir.Shape | None"]
_INFERENCE_PLACEHOLDER = "unk__"  # how ONNX shape inference names a dimension it cannot know


def _stored_shape(value: ir.Value) -> ir.Shape | None:
    return value.shape


def _dims(value: ir.Value | None, shape_of: ShapeOf = _stored_shape) -> list[int] | None:
    shape = shape_of(value) if value is not None else None
    if shape is None:
        return None
    if any(not isinstance(d, int) and str(d).startswith(_INFERENCE_PLACEHOLDER)
           for d in list(shape)[1:]):
        return None
    return [d if isinstance(d, int) and d > 0 else 1 for d in shape]


def _prod(values: list[int]) -> int:
    return math.prod(values) if values else 1


def macs_of(
    node: ir.Node, weight_shape: tuple[int, ...] | None = None, *,
    shape_of: ShapeOf = _stored_shape,
) -> int | None:
    """MACs of one Conv/ConvTranspose/Gemm/MatMul or recurrent layer (LSTM, GRU, RNN: every
    step multiplies the input by W and the hidden state by R, for each gate and direction), or
    None when shapes are unknown.

    ``shape_of`` reads a value's shape (default: the shape stored on the value), so a caller can
    supply inferred shapes without writing them into the model.
    """
    try:
        if node.op_type == "Conv":
            out = _dims(node.outputs[0], shape_of)
            w = list(weight_shape) if weight_shape else _dims(node.inputs[1], shape_of)
            return _prod(out) * _prod(w[1:]) if out and w else None
        if node.op_type == "ConvTranspose":
            x = _dims(node.inputs[0], shape_of)
            w = list(weight_shape) if weight_shape else _dims(node.inputs[1], shape_of)
            return _prod(x) * _prod(w[1:]) if x and w else None
        if node.op_type in ("Gemm", "MatMul"):
            out = _dims(node.outputs[0], shape_of)
            a = _dims(node.inputs[0], shape_of)
            if not out or not a:
                return None
            trans_a = (
                node.op_type == "Gemm"
                and node.attributes.get("transA") is not None
                and (node.attributes["transA"].as_int() == 1)
            )
            k = a[0] if trans_a and len(a) == 2 else a[-1]
            return _prod(out) * k
        if node.op_type in ("LSTM", "GRU", "RNN"):
            return _recurrent_macs(node, shape_of)
    except (IndexError, TypeError) as exc:
        raise QdqkitError(f"cannot count MACs of node '{node.name}': {exc}") from None
    return None


def _recurrent_macs(node: ir.Node, shape_of: ShapeOf) -> int | None:
    """steps x batch x directions x (gates x hidden) x (input + hidden): W [dirs, gates*hidden,
    input] and R [dirs, gates*hidden, hidden] applied at every step. X is [steps, batch, input],
    or [batch, steps, input] with ``layout`` 1: the product is the same either way."""
    x = _dims(node.inputs[0], shape_of)
    w = _dims(node.inputs[1], shape_of) if len(node.inputs) > 1 else None
    r = _dims(node.inputs[2], shape_of) if len(node.inputs) > 2 else None
    if not x or not w or not r or len(x) != 3 or len(w) != 3 or len(r) != 3:
        return None
    return x[0] * x[1] * w[0] * w[1] * (w[2] + r[2])
