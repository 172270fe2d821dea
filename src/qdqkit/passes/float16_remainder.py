"""Float16Remainder: what Q/DQ leaves float runs FP16, except what FP16 cannot hold (A9).

TensorRT 11 builds strongly typed: every layer runs in its tensors' own type, so an FP32 remainder
stays FP32. Rules (the model must be at opset 19 or later, where Q/DQ take and give float16):
1. Every float32 node, constant and value becomes float16 (Q/DQ scales included, so each DQ writes
   float16), except nodes kept FP32: normalizations and sums of squares (LayerNormalization,
   Group/InstanceNormalization, Pow, ReduceSumSquare/L2/LogSumExp, a ReduceMean or ReduceSum of
   a Pow or a square), nodes whose calibrated inputs or outputs reach beyond 65504 or whose
   constants do, nodes with subgraphs, custom-domain (plugin) nodes, and nodes whose type
   constraints in the ONNX operator schema exclude float16 (Range, for one). ``kept_fp32``
   lists them with the reason.
2. Where an FP16 and an FP32 node meet, one Cast per tensor and direction joins them. Network
   inputs and outputs keep float32 (a Cast after each input, before each output; output names
   unchanged), so callers feed and read what they did before.
3. Resize/Upsample ``roi``/``scales`` stay float32, as the spec requires and exact output sizes
   need (C14).
4. A BatchNormalization whose constant scale, bias, mean or variance is beyond FP16 runs FP16
   with those four kept float32 (their own type since opset 15): TensorRT folds them into the
   conv before it, so only they, not the activations, need the range.
5. Q/DQ take the type of the float side they touch, so no Cast stands between a layer and its
   Q/DQ (TensorRT fuses Q/DQ into a layer, not through a Cast): a Q reading a network input (its
   own Reformat, B8) or a node kept FP32 stays float32, its DQ writing float16 for FP16 readers;
   a DQ read by nodes kept FP32 writes float32 (a float32 twin serves them when it has FP16
   readers too), so a weighted op kept FP32 for its range still reads its DQs and runs INT8.
6. Before anything is converted, every constant float32 Q/DQ scale becomes a value float16 holds
   exactly (rounded to nearest, and at least float16's smallest positive value, since a scale of
   0 is invalid): a Q that stays float32 (rule 5) and its float16 DQ then carry one
   scale, as a Q/DQ pair must, and a tiny scale does not vanish. An int8 weight is re-rounded to
   its DQ's new scale, so it still holds the weight's nearest integers.
7. A weight's scale rounds down instead, so each channel's largest integer stays 127 (clipped
   there): the weight stays on the max|w|/127 grid TensorRT's implicit INT8 derives, and
   ``translate`` of the model keeps its integers. Only scales below float16's normal range
   (weights under about 0.008) move by enough to matter; rounded up, such a channel's largest
   integer fell to 125 and an implicit build requantized it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import onnx.defs
import onnx_ir as ir

from qdqkit.core.names import layer_safe, taken_names, unique_name
from qdqkit.core.qdq import is_dequantize, is_qdq, is_quantize, node_label
from qdqkit.core.shapes import fill_value_types

FP16_MAX = 65504.0
_F16, _F32 = ir.DataType.FLOAT16, ir.DataType.FLOAT
_NORMALIZATIONS = frozenset({
    "LayerNormalization", "GroupNormalization", "InstanceNormalization", "Pow",
    "ReduceSumSquare", "ReduceL2", "ReduceLogSumExp", "LpNormalization",
})
_SUMS = frozenset({"ReduceMean", "ReduceSum"})
_FLOAT32_ONLY_INPUTS = {"Resize": (1, 2), "Upsample": (1,)}


class Float16Remainder(ir.passes.InPlacePass):
    """Convert the float remainder to float16 (see the module docstring for the rules)."""

    def __init__(self, ranges: Mapping[str, tuple[float, float]] | None = None) -> None:
        super().__init__()
        self.ranges = dict(ranges or {})
        self.kept_fp32: dict[str, str] = {}

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        fill_value_types(model)  # every value's type must be known to decide its casts
        taken = taken_names(graph)
        _fp16_exact_scales(graph, taken)
        opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 1))
        keep = {node: why for node in graph
                if (why := fp32_reason(node, self.ranges) or _no_float16_kernel(node, opset)) is not None}
        self.kept_fp32 = {node_label(n): why for n, why in keep.items()}
        float32_qdq = _float32_qdq(graph, taken, keep)
        casts: dict[tuple[ir.Value, ir.DataType], ir.Value] = {}
        constants: dict[tuple[ir.Value, ir.DataType], ir.Value] = {}
        for node in list(graph):
            stays = node in keep or node in float32_qdq
            target = _F32 if stays else _F16
            fixed = _FLOAT32_ONLY_INPUTS.get(node.op_type, ()) or _wide_statistics(node)
            for index, value in enumerate(node.inputs):
                dtype = _dtype(value)
                if value is None or dtype not in (_F16, _F32):
                    continue
                wanted = _F32 if index in fixed else target
                if dtype == wanted:
                    continue
                if value.const_value is not None and not value.is_graph_input():
                    replacement = _constant_as(graph, taken, value, wanted, constants)
                else:
                    replacement = _cast(graph, taken, node, value, wanted, casts)
                node.replace_input_with(index, replacement)
            if stays:
                continue
            _retype_node(node)
        for position, value in enumerate(list(graph.outputs)):
            if value.dtype == _F16:
                graph.outputs[position] = _cast_output(graph, taken, value)
        for name, value in list(graph.initializers.items()):
            if not value.uses() and not value.is_graph_output():
                graph.initializers.pop(name)
        return ir.passes.PassResult(model, modified=True)

def fp32_reason(node: ir.Node, ranges: Mapping[str, tuple[float, float]]) -> str | None:
    """Why rule 1 keeps ``node`` FP32 (its op, its constants or its calibrated ``ranges``),
    or None; the ONNX schema's type constraints are ``_no_float16_kernel``'s business."""
    if node.domain not in ("", "ai.onnx"):
        return "a custom-domain (plugin) node keeps its own types"
    if any(attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)
           for attr in node.attributes.values()):
        return "it holds subgraphs"
    if node.op_type in _NORMALIZATIONS:
        return f"{node.op_type}: sums of squares and normalizations overflow or lose FP16"
    if node.op_type in _SUMS and node.inputs and node.inputs[0] is not None:
        producer = node.inputs[0].producer()
        if producer is not None and (producer.op_type == "Pow" or (
                producer.op_type == "Mul" and producer.inputs[0] is producer.inputs[1])):
            return f"{node.op_type} of squares (a LayerNorm variance) overflows FP16"
    statistics = _wide_statistics(node)
    for index, value in enumerate([*node.inputs, *node.outputs]):
        if value is None:
            continue
        if index in statistics:
            continue  # rule 4: stays float32 while the node runs FP16
        if (value.const_value is not None and _dtype(value) == _F32
                and beyond_float16(value.const_value.numpy())):
            return f"constant '{value.name}' exceeds the FP16 range (65504)"
        low, high = ranges.get(value.name or "", (0.0, 0.0))
        if max(-low, high) > FP16_MAX:
            return (f"tensor '{value.name}' reaches {max(-low, high):.6g} in calibration, "
                    "beyond FP16's 65504")
    return None


def beyond_float16(array: np.ndarray) -> bool:
    """Whether a finite value of ``array`` is beyond FP16's 65504. An infinity is not: FP16
    holds it as it is (a causal mask of -inf means the same in FP16), where a finite 1e9 or
    float32's lowest, a mask spelled finite, would become one."""
    if array.dtype.kind != "f" or not array.size:
        return False
    magnitudes = np.abs(array)
    return bool(np.any((magnitudes > FP16_MAX) & np.isfinite(magnitudes)))


def _no_float16_kernel(node: ir.Node, opset: int) -> str | None:
    """Why ``node`` cannot be float16 per its ONNX schema at ``opset`` (rule 1), or None."""
    if node.domain not in ("", "ai.onnx"):
        return None
    constraints = _float16_constraints(node.op_type, opset)
    if constraints is None:
        return None
    for values, formal in ((node.inputs, constraints[0]), (node.outputs, constraints[1])):
        for index, value in enumerate(values):
            if value is None or _dtype(value) != _F32 or not formal:
                continue
            allowed = formal[min(index, len(formal) - 1)]
            if not allowed:
                return (f"{node.op_type}: its ONNX schema (opset {opset}) does not allow "
                        "float16 there")
    return None


@functools.cache
def _float16_constraints(op_type: str, opset: int
                         ) -> tuple[tuple[bool, ...], tuple[bool, ...]] | None:
    """Per formal input and output of the op's schema: whether its type constraint admits
    float16 (a fixed type, such as Resize's float32 scales, is rule 3's business)."""
    try:
        schema = onnx.defs.get_schema(op_type, opset, "")
    except onnx.defs.SchemaError:
        return None
    allowed = {c.type_param_str: "tensor(float16)" in c.allowed_type_strs
               for c in schema.type_constraints}

    def formal(params: Sequence[onnx.defs.OpSchema.FormalParameter]) -> tuple[bool, ...]:
        return tuple(allowed.get(p.type_str, True) for p in params)

    return formal(schema.inputs), formal(schema.outputs)


def _fp16_exact_scales(graph: ir.Graph, taken: set[str]) -> None:
    """Make every constant float32 Q/DQ scale exact in float16 (rule 6)."""
    smallest = float(np.finfo(np.float16).smallest_subnormal)
    largest = float(np.finfo(np.float16).max)
    # Per scale met: the value Q/DQ read from now on and the scale it held before (None: exact).
    done: dict[ir.Value, tuple[ir.Value, np.ndarray | None]] = {}
    for node in list(graph):
        if not is_qdq(node) or len(node.inputs) < 2:
            continue
        scale = node.inputs[1]
        if scale is None or scale.const_value is None or scale.is_graph_input() \
                or _dtype(scale) != _F32:
            continue
        if scale not in done:
            old = np.asarray(scale.const_value.numpy(), np.float32)
            # np.array, not astype: np.clip makes a 0-d (per-tensor) scale a scalar, which the
            # masked rounding below could not assign into.
            half = np.array(np.clip(old, smallest, largest), dtype=np.float16)
            if _weight_scale(scale):  # rule 7
                above = half.astype(np.float32) > old
                half[above] = np.nextafter(half[above], np.float16(0))
                half = np.maximum(half, np.float16(smallest))
            new = half.astype(np.float32)
            exact = (scale, None) if np.array_equal(old, new) else (
                _exact_scale(graph, taken, scale, new), old)
            done[scale] = exact
        exact_value, before = done[scale]
        if before is None:
            continue
        if is_dequantize(node):
            _requantize_weight(graph, taken, node, before, exact_value)
        if exact_value is not scale:
            node.replace_input_with(1, exact_value)


def _weight_scale(scale: ir.Value) -> bool:
    """Whether ``scale`` is read only as the scale of DQs of constant int8 weights."""
    uses = scale.uses()
    return bool(uses) and all(
        is_dequantize(use.node) and use.idx == 1 and (data := use.node.inputs[0]) is not None
        and data.const_value is not None and _dtype(data) == ir.DataType.INT8
        for use in uses)


def _exact_scale(graph: ir.Graph, taken: set[str], scale: ir.Value, array: np.ndarray
                 ) -> ir.Value:
    """``scale`` holding ``array``: in place when only Q/DQ scale slots read it, else a copy."""
    if all(is_qdq(use.node) and use.idx == 1 for use in scale.uses()) \
            and not scale.is_graph_output():
        scale.const_value = ir.Tensor(array, name=scale.name)
        return scale
    return _new_initializer(graph, taken, f"{scale.name}_fp16_exact", array, _F32)


def _new_initializer(graph: ir.Graph, taken: set[str], wanted: str, array: np.ndarray,
                     dtype: ir.DataType) -> ir.Value:
    name = unique_name(taken, wanted)
    value = ir.Value(name=name, const_value=ir.Tensor(array, name=name))
    value.shape = ir.Shape(array.shape)
    _set_dtype(value, dtype)
    graph.register_initializer(value)
    return value


def _requantize_weight(graph: ir.Graph, taken: set[str], dq: ir.Node, before: np.ndarray,
                       scale: ir.Value) -> None:
    """Re-round the constant int8 input of ``dq`` from scale ``before`` to ``scale``'s value."""
    data = dq.inputs[0]
    if data is None or data.const_value is None or data.is_graph_input() \
            or _dtype(data) != ir.DataType.INT8 or scale.const_value is None:
        return
    zero = dq.inputs[2] if len(dq.inputs) > 2 else None
    if zero is not None and (zero.const_value is None or np.any(zero.const_value.numpy() != 0)):
        return  # an asymmetric weight: not one TensorRT takes; leave it as it is
    old_s = before.astype(np.float64)
    new_s = np.asarray(scale.const_value.numpy(), np.float64)
    if np.all(np.abs(old_s / new_s - 1.0) * 127 < 0.5):
        return  # |q| <= 127 moves by under half a step: every integer stays as it is
    ints = np.asarray(data.const_value.numpy())
    if old_s.ndim == 1 and ints.ndim:
        axis = dq.attributes["axis"].as_int() if "axis" in dq.attributes else 1
        shape = [1] * ints.ndim
        shape[axis % ints.ndim] = -1
        old_s, new_s = old_s.reshape(shape), new_s.reshape(shape)
    values = np.clip(np.rint(ints * old_s / new_s), -127, 127).astype(np.int8)
    if np.array_equal(values, ints):
        return
    if len(data.uses()) == 1 and not data.is_graph_output():
        data.const_value = ir.Tensor(values, name=data.name)
    else:
        dq.replace_input_with(0, _new_initializer(
            graph, taken, f"{data.name}_fp16_exact", values, ir.DataType.INT8))


def _wide_statistics(node: ir.Node) -> tuple[int, ...]:
    """A BatchNormalization's scale, bias, mean and variance when one is beyond FP16 (rule 4)."""
    if node.op_type != "BatchNormalization" or len(node.inputs) != 5:
        return ()
    for value in node.inputs[1:]:
        if value is None or value.const_value is None or _dtype(value) != _F32:
            return ()
    if any(float(np.max(np.abs(v.const_value.numpy()), initial=0.0)) > FP16_MAX
           for v in node.inputs[1:] if v is not None and v.const_value is not None):
        return (1, 2, 3, 4)
    return ()


def _float32_qdq(graph: ir.Graph, taken: set[str], keep: Mapping[ir.Node, str]) -> set[ir.Node]:
    """The Q/DQ that stay float32 beside float32 neighbours (rule 5); adds the DQ twins."""
    stay: set[ir.Node] = set()
    for node in list(graph):
        if node in keep:
            continue
        if is_quantize(node):
            x = node.inputs[0]
            if x is not None and (x.is_graph_input() or x.producer() in keep):
                stay.add(node)
            continue
        if not is_dequantize(node):
            continue
        out = node.outputs[0]
        readers = {use.node for use in out.uses()}
        kept = {reader for reader in readers if reader in keep}
        if not kept:
            continue
        if kept == readers and not out.is_graph_output():
            stay.add(node)
            continue
        twin = ir.Node("", "DequantizeLinear", list(node.inputs),
                       attributes=[ir.Attr(a.name, a.type, a.value)
                                   for a in node.attributes.values()],
                       name=unique_name(taken, layer_safe(f"{node.name or out.name}_fp32")))
        twin.outputs[0].name = unique_name(taken, f"{out.name}_fp32")
        twin.outputs[0].shape = out.shape
        _set_dtype(twin.outputs[0], _F32)
        graph.insert_after(node, twin)
        for use in list(out.uses()):
            if use.node in kept:
                use.node.replace_input_with(use.idx, twin.outputs[0])
        stay.add(twin)
    return stay


def _retype_node(node: ir.Node) -> None:
    to = node.attributes.get("to")
    if node.op_type == "Cast" and to is not None and to.as_int() == _F32:
        node.attributes["to"] = ir.AttrInt64("to", _F16)
    for name in ("value", "value_float"):
        attr = node.attributes.get(name)
        if attr is not None and attr.type == ir.AttributeType.TENSOR and attr.value.dtype == _F32:
            node.attributes[name] = ir.AttrTensor(name, _narrowed(attr.value))
    if node.op_type == "QuantizeLinear":
        return  # its output is integer
    for value in node.outputs:
        if value.dtype == _F32:
            _set_dtype(value, _F16)


def _dtype(value: ir.Value | None) -> ir.DataType | None:
    if value is None:
        return None
    if value.dtype is None and value.const_value is not None:
        return value.const_value.dtype
    return value.dtype


def _set_dtype(value: ir.Value, dtype: ir.DataType) -> None:
    # A fresh type: values may share one TensorType object, and setting ``dtype`` mutates it.
    value.type = ir.TensorType(dtype)


def _narrowed(tensor: ir.TensorProtocol) -> ir.Tensor:
    return ir.Tensor(np.asarray(tensor.numpy()).astype(np.float16), name=tensor.name)


def _constant_as(
    graph: ir.Graph, taken: set[str], value: ir.Value, dtype: ir.DataType,
    done: dict[tuple[ir.Value, ir.DataType], ir.Value],
) -> ir.Value:
    key = (value, dtype)
    if key not in done:
        assert value.const_value is not None
        array = np.asarray(value.const_value.numpy()).astype(dtype.numpy())
        name = unique_name(taken, f"{value.name}_{'fp16' if dtype == _F16 else 'fp32'}")
        copy = ir.Value(name=name, const_value=ir.Tensor(array, name=name))
        copy.shape = value.shape
        _set_dtype(copy, dtype)
        graph.register_initializer(copy)
        done[key] = copy
    return done[key]


def _cast(
    graph: ir.Graph, taken: set[str], reader: ir.Node, value: ir.Value, dtype: ir.DataType,
    done: dict[tuple[ir.Value, ir.DataType], ir.Value],
) -> ir.Value:
    key = (value, dtype)
    if key not in done:
        tag = "fp16" if dtype == _F16 else "fp32"
        node = ir.Node("", "Cast", [value], attributes=[ir.AttrInt64("to", dtype)],
                       name=unique_name(taken, layer_safe(f"{value.name}_to_{tag}")))
        node.outputs[0].name = unique_name(taken, f"{value.name}_{tag}")
        _set_dtype(node.outputs[0], dtype)
        node.outputs[0].shape = value.shape
        producer = value.producer()
        if producer is not None:
            graph.insert_after(producer, node)
        else:
            graph.insert_before(reader, node)
        done[key] = node.outputs[0]
    return done[key]


def _cast_output(graph: ir.Graph, taken: set[str], value: ir.Value) -> ir.Value:
    """A float32 Cast of ``value`` that takes over its place and name among the outputs."""
    name = value.name or "output"
    value.name = unique_name(taken, f"{name}_fp16")
    node = ir.Node("", "Cast", [value], attributes=[ir.AttrInt64("to", _F32)],
                   name=unique_name(taken, layer_safe(f"{name}_to_fp32")))
    out = node.outputs[0]
    out.name = name
    _set_dtype(out, _F32)
    out.shape = value.shape
    graph.append(node)
    return out
