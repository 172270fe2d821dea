"""Shape arithmetic folded to constants once the shapes it reads are known.

Exporters compute shapes inside the graph: traced PyTorch slices a position-id buffer to the
input's length (Shape -> Gather -> Unsqueeze -> Slice) and builds each attention Reshape's target
from Shape/Gather/Concat. ONNX shape inference carries such values only part of the way (a Slice
whose ends are computed leaves its output unsized, and so everything after it), so a BERT encoder
judged at concrete input shapes kept layers of unknown size, which the cost model counts as 1.

1. A value is known when it is a constant (an initializer or Constant node of at most
   ``_READ_ELEMENTS`` elements), the Shape or Size of a value whose shape is fully known, or the
   output of an op below whose inputs are all known. Nothing computed from a graph input's data
   is ever known.
2. Only ops whose numpy form is exact are evaluated (index and integer arithmetic, comparisons,
   selection, data movement, Cast), and only small results are kept (``_KEPT_ELEMENTS``).
3. ``core.shapes`` writes the known values into its inference model as constants and infers
   again, until a round learns nothing a sizeless value needs (a few rounds, each linear).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence

import numpy as np
import onnx_ir as ir

from qdqkit.core.constants import constant_array

_READ_ELEMENTS = 1 << 16  # constants read (a position-id buffer, a mask template)
_KEPT_ELEMENTS = 4096  # results kept (shape vectors, index ranges)

Arrays = Sequence[np.ndarray | None]


def _attr_ints(node: ir.Node, name: str) -> list[int] | None:
    attr = node.attributes.get(name)
    return list(attr.as_ints()) if attr is not None else None


def _attr_int(node: ir.Node, name: str, default: int) -> int:
    attr = node.attributes.get(name)
    return attr.as_int() if attr is not None else default


def _gather(node: ir.Node, xs: Arrays) -> np.ndarray:
    data, indices = _need(xs, 2)
    return np.take(data, indices.astype(np.int64), axis=_attr_int(node, "axis", 0))


def _axes(node: ir.Node, xs: Arrays, index: int) -> list[int] | None:
    axes = _attr_ints(node, "axes")
    if axes is None and len(xs) > index and xs[index] is not None:
        axes = [int(a) for a in np.asarray(xs[index]).reshape(-1)]
    return axes


def _unsqueeze(node: ir.Node, xs: Arrays) -> np.ndarray:
    data = _need(xs, 1)[0]
    axes = _axes(node, xs, 1)
    if axes is None:
        raise _Unknown
    rank = data.ndim + len(axes)
    for axis in sorted(a % rank for a in axes):
        data = np.expand_dims(data, axis)
    return data


def _squeeze(node: ir.Node, xs: Arrays) -> np.ndarray:
    data = _need(xs, 1)[0]
    axes = _axes(node, xs, 1)
    return np.squeeze(data, axis=None if axes is None else tuple(a % data.ndim for a in axes))


def _slice(node: ir.Node, xs: Arrays) -> np.ndarray:
    data = _need(xs, 1)[0]
    starts, ends = _attr_ints(node, "starts"), _attr_ints(node, "ends")  # before opset 10
    axes, steps = _attr_ints(node, "axes"), None
    if starts is None or ends is None:
        starts, ends = (_ints(xs, 1), _ints(xs, 2))
        axes, steps = _ints(xs, 3, optional=True), _ints(xs, 4, optional=True)
    assert starts is not None and ends is not None
    axes = axes if axes is not None else list(range(len(starts)))
    steps = steps if steps is not None else [1] * len(starts)
    index: list[slice] = [slice(None)] * data.ndim
    for start, end, axis, step in zip(starts, ends, axes, steps, strict=True):
        size = data.shape[axis % data.ndim]
        # Python slices clamp like ONNX, given ends within what an int can say of the axis.
        index[axis % data.ndim] = slice(start, max(min(end, size), -size - 1), step)
    return data[tuple(index)]


def _ints(xs: Arrays, index: int, optional: bool = False) -> list[int] | None:
    if len(xs) <= index or xs[index] is None:
        if optional:
            return None
        raise _Unknown
    return [int(v) for v in np.asarray(xs[index]).reshape(-1)]


def _cast(node: ir.Node, xs: Arrays) -> np.ndarray:
    data = _need(xs, 1)[0]
    return data.astype(ir.DataType(_attr_int(node, "to", 1)).numpy())


def _div(node: ir.Node, xs: Arrays) -> np.ndarray:
    a, b = _need(xs, 2)
    if np.issubdtype(a.dtype, np.integer):
        if np.any(b == 0):
            raise _Unknown
        return (np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(a.dtype)
    return np.asarray(a / b, dtype=a.dtype)


def _range(node: ir.Node, xs: Arrays) -> np.ndarray:
    start, limit, delta = (np.asarray(x).reshape(()) for x in _need(xs, 3))
    if delta == 0:
        raise _Unknown
    return np.arange(start.item(), limit.item(), delta.item(), dtype=start.dtype)


def _constant_of_shape(node: ir.Node, xs: Arrays) -> np.ndarray:
    shape = [int(d) for d in _need(xs, 1)[0].reshape(-1)]
    attr = node.attributes.get("value")
    fill = np.asarray(attr.as_tensor().numpy()).reshape(-1) if attr is not None else np.zeros(
        1, np.float32)
    if math.prod(shape) > _KEPT_ELEMENTS:
        raise _Unknown
    return np.full(shape, fill[0], dtype=fill.dtype)


def _expand(node: ir.Node, xs: Arrays) -> np.ndarray:
    data, shape = _need(xs, 2)
    target = np.broadcast_shapes(data.shape, tuple(int(d) for d in shape.reshape(-1)))
    if math.prod(target) > _KEPT_ELEMENTS:
        raise _Unknown
    return np.broadcast_to(data, target).copy()


def _reshape(node: ir.Node, xs: Arrays) -> np.ndarray:
    data, shape = _need(xs, 2)
    dims = [int(d) for d in shape.reshape(-1)]
    if not _attr_int(node, "allowzero", 0):
        dims = [data.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    return data.reshape(dims)


def _concat(node: ir.Node, xs: Arrays) -> np.ndarray:
    return np.concatenate(_need(xs, len(xs)), axis=_attr_int(node, "axis", 0))


def _transpose(node: ir.Node, xs: Arrays) -> np.ndarray:
    return np.transpose(_need(xs, 1)[0], _attr_ints(node, "perm"))


def _where(node: ir.Node, xs: Arrays) -> np.ndarray:
    condition, a, b = _need(xs, 3)
    return np.where(condition, a, b)


def _mod(node: ir.Node, xs: Arrays) -> np.ndarray:
    a, b = _need(xs, 2)
    if np.issubdtype(b.dtype, np.integer) and np.any(b == 0):
        raise _Unknown
    # fmod=1 is C's remainder (the dividend's sign); 0 is Python's (the divisor's), ints only.
    result = np.fmod(a, b) if _attr_int(node, "fmod", 0) else np.mod(a, b)
    return np.asarray(result, dtype=a.dtype)


def _reduce_prod(node: ir.Node, xs: Arrays) -> np.ndarray:
    data = _need(xs, 1)[0]
    if not np.issubdtype(data.dtype, np.integer):
        raise _Unknown  # a float product's rounding is the runtime's own
    axes = _axes(node, xs, 1)
    keep = bool(_attr_int(node, "keepdims", 1))
    if axes is None or not axes:
        if axes is not None and _attr_int(node, "noop_with_empty_axes", 0):
            return data
        axes = list(range(data.ndim))
    return np.prod(data, axis=tuple(a % data.ndim for a in axes), keepdims=keep,
                   dtype=data.dtype)


def _elementwise(function: Callable[..., np.ndarray]) -> Callable[[ir.Node, Arrays], np.ndarray]:
    def evaluate(node: ir.Node, xs: Arrays) -> np.ndarray:
        inputs = _need(xs, len(xs))
        result = np.asarray(function(*inputs))
        if result.dtype != np.bool_ and inputs[0].dtype != result.dtype:
            result = result.astype(inputs[0].dtype)
        return result
    return evaluate


def _variadic(function: Callable[..., np.ndarray]) -> Callable[[ir.Node, Arrays], np.ndarray]:
    def evaluate(node: ir.Node, xs: Arrays) -> np.ndarray:
        inputs = _need(xs, len(xs))
        result = inputs[0]
        for other in inputs[1:]:
            result = function(result, other)
        return np.asarray(result, dtype=inputs[0].dtype)
    return evaluate


class _Unknown(Exception):
    """An input is missing or the op cannot be evaluated exactly: the output stays unknown."""


def _need(xs: Arrays, count: int) -> list[np.ndarray]:
    if len(xs) < count or any(x is None for x in xs[:count]):
        raise _Unknown
    return [np.asarray(x) for x in xs[:count]]


_EVALUATORS: dict[str, Callable[[ir.Node, Arrays], np.ndarray]] = {
    "Gather": _gather, "Unsqueeze": _unsqueeze, "Squeeze": _squeeze, "Slice": _slice,
    "Cast": _cast, "Div": _div, "Range": _range, "ConstantOfShape": _constant_of_shape,
    "Expand": _expand, "Reshape": _reshape, "Concat": _concat, "Transpose": _transpose,
    "Where": _where, "Identity": lambda node, xs: _need(xs, 1)[0],
    "Add": _elementwise(np.add), "Sub": _elementwise(np.subtract),
    "Mul": _elementwise(np.multiply), "Neg": _elementwise(np.negative),
    "Abs": _elementwise(np.abs), "Equal": _elementwise(np.equal),
    "Less": _elementwise(np.less), "Greater": _elementwise(np.greater),
    "LessOrEqual": _elementwise(np.less_equal), "GreaterOrEqual": _elementwise(np.greater_equal),
    "Not": _elementwise(np.logical_not), "And": _elementwise(np.logical_and),
    "Or": _elementwise(np.logical_or), "Max": _variadic(np.maximum),
    "Min": _variadic(np.minimum), "Mod": _mod, "ReduceProd": _reduce_prod,
    "Floor": _elementwise(np.floor), "Ceil": _elementwise(np.ceil),
}


def _constant(value: ir.Value) -> np.ndarray | None:
    """``value``'s array when it is a small constant (rule 1)."""
    tensor = value.const_value
    if tensor is not None:
        size = math.prod(d if isinstance(d, int) else 0 for d in tensor.shape)
        return constant_array(value) if size <= _READ_ELEMENTS else None
    producer = value.producer()
    if producer is not None and producer.op_type == "Constant" and not producer.domain:
        array = constant_array(value)
        return array if array is not None and array.size <= _READ_ELEMENTS else None
    return None


def fold_shape_values(
    graph: ir.Graph, static_dims: Callable[[ir.Value], list[int] | None],
    known: Mapping[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """The node outputs of ``graph`` rule 1 can compute that ``known`` does not hold yet, by
    name; ``static_dims`` gives a value's shape when every dimension of it is known."""
    values: dict[ir.Value, np.ndarray] = {}
    found: dict[str, np.ndarray] = {}

    def array_of(value: ir.Value | None) -> np.ndarray | None:
        if value is None:
            return None
        if value in values:
            return values[value]
        if value.name in known:
            return known[value.name or ""]
        return _constant(value)

    for node in graph:
        if node.domain not in ("", "ai.onnx") or len(node.outputs) != 1:
            continue
        out = node.outputs[0]
        if not out.name or out.is_graph_output() or out.name in known:
            continue
        result: np.ndarray | None = None
        if node.op_type in ("Shape", "Size"):
            dims = static_dims(node.inputs[0]) if node.inputs and node.inputs[0] else None
            if dims is None:
                continue
            if node.op_type == "Size":
                result = np.array(math.prod(dims), np.int64)
            else:
                start, end = _attr_int(node, "start", 0), _attr_int(node, "end", len(dims))
                result = np.array(dims[start:end], np.int64)
        elif node.op_type in _EVALUATORS:
            inputs = [array_of(v) for v in node.inputs]
            if any(x is None for x, v in zip(inputs, node.inputs, strict=True) if v is not None):
                continue
            try:
                result = np.asarray(_EVALUATORS[node.op_type](node, inputs))
            except (_Unknown, ValueError, IndexError, TypeError, OverflowError):
                continue
        if result is None or result.size > _KEPT_ELEMENTS or result.dtype == np.object_:
            continue
        values[out] = result
        found[out.name] = result
    return found
