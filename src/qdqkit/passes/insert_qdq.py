"""InsertQdq: quantize chosen activations and weights by inserting QuantizeLinear/DequantizeLinear.

Rules:
1. An activation ``x`` with scale ``s`` becomes ``x -> Q(s, int8 zero point 0) -> DQ -> readers``
   for all of its readers (or the chosen ones); a graph output ``x`` is taken over by the DQ output,
   name included. A float16 tensor at opset 19 or later (where Q/DQ take and give float16) gets a
   float16 scale, rounded to nearest, so the pair reads and writes float16 as TensorRT's strongly
   typed build wants it. Any other tensor that is not float32 is cast to float32 around the pair,
   so the scale is float32 at every opset; in a strongly typed build those Casts are layers.
2. A weighted op's constant float weight ``W`` is quantized per output channel (``core.weights``)
   with TensorRT's scales max|W|/127 (``core.qdq_math.implicit_weight_scales``; an all-zero channel
   gets 1/127): as an int8 initializer ``round(W / s)`` read by a DQ (the default), or, with
   ``keep_float``, as ``W -> Q -> DQ`` with int8 zero points 0. ``per_tensor`` uses one scale,
   max|W|/127 over the whole weight, instead.
3. New tensors and nodes are named after the quantized tensor (``<x>_scale``, ``<x>_zp``,
   ``<x>_Q`` -> ``<x>_q``, ``<x>_DQ`` -> ``<x>_dq``, ``<W>_quantized``), suffixed to stay unique;
   node names drop the commas a tensor name may hold (``core.names.layer_safe``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np
import onnx_ir as ir

from qdqkit.core.names import layer_safe
from qdqkit.core.qdq_math import implicit_weight_scales
from qdqkit.core.weights import output_channel_axis, weight_index

_INT8_MAX = 127


@dataclass(frozen=True)
class ActivationQdq:
    """Quantize ``value`` per tensor with ``scale``; ``readers`` None means every reader."""

    value: ir.Value
    scale: float
    readers: tuple[ir.Node, ...] | None = None


@dataclass(frozen=True)
class WeightQdq:
    """Quantize the constant weight of the weighted op ``node`` per output channel."""

    node: ir.Node
    keep_float: bool = False
    per_tensor: bool = False


class _Names:
    """Names not yet taken in the graph, built once so every look-up is a set probe."""

    def __init__(self, graph: ir.Graph) -> None:
        self.taken: set[str] = {v.name for v in graph.inputs if v.name}
        self.taken.update(graph.initializers)
        for node in graph:
            if node.name:
                self.taken.add(node.name)
            self.taken.update(out.name for out in node.outputs if out.name)

    def new(self, wanted: str) -> str:
        name, n = wanted, 1
        while name in self.taken:
            name = f"{wanted}_{n}"
            n += 1
        self.taken.add(name)
        return name


class InsertQdq(ir.passes.InPlacePass):
    """Insert Q/DQ for ``activations`` and ``weights`` (see the module docstring for the rules)."""

    def __init__(
        self, activations: Sequence[ActivationQdq] = (), weights: Sequence[WeightQdq] = ()
    ) -> None:
        super().__init__()
        self.activations = list(activations)
        self.weights = list(weights)
        self.quantized_activations = 0
        self.quantized_weights = 0

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        names = _Names(graph)
        native = native_qdq_types(model)
        for activation in self.activations:
            self._quantize_activation(graph, names, activation, native)
        done: dict[tuple[ir.Value, bool, bool], ir.Value] = {}
        for weight in self.weights:
            self._quantize_weight(graph, names, weight, done)
        modified = bool(self.quantized_activations or self.quantized_weights)
        return ir.passes.PassResult(model, modified=modified)

    # ------------------------------------------------------------------ activations
    def _quantize_activation(self, graph: ir.Graph, names: _Names, spec: ActivationQdq,
                             native: set[ir.DataType]) -> None:
        value = spec.value
        base = value.name or "tensor"
        readers = set(spec.readers) if spec.readers is not None else None
        uses = [u for u in value.uses() if readers is None or u.node in readers]
        takes_output = readers is None and value.is_graph_output()
        if not uses and not takes_output:
            return
        half = value.dtype == ir.DataType.FLOAT16 and value.dtype in native
        scale = _initializer(graph, names.new(f"{base}_scale"),
                             _float16_scale(spec.scale) if half else np.array(spec.scale, np.float32))
        zero = _initializer(graph, names.new(f"{base}_zp"), np.array(0, np.int8))
        nodes: list[ir.Node] = []
        x = value
        cast_back = value.dtype is not None and value.dtype not in native
        if cast_back:
            cast = ir.Node("", "Cast", [x], attributes=[ir.AttrInt64("to", ir.DataType.FLOAT)],
                           name=names.new(layer_safe(f"{base}_to_float")))
            nodes.append(cast)
            x = cast.outputs[0]
        q = _node("QuantizeLinear", [x, scale, zero], names, base, "Q", "q")
        dq = _node("DequantizeLinear", [q.outputs[0], scale, zero], names, base, "DQ", "dq")
        nodes += [q, dq]
        result = dq.outputs[0]
        if cast_back:
            assert value.dtype is not None
            back = ir.Node("", "Cast", [result], attributes=[ir.AttrInt64("to", value.dtype)],
                           name=names.new(layer_safe(f"{base}_from_float")))
            nodes.append(back)
            result = back.outputs[0]
        result.type, result.shape = _own_type(value), value.shape
        for use in uses:
            use.node.replace_input_with(use.idx, result)
        producer = value.producer()
        if producer is not None:
            graph.insert_after(producer, nodes)
        else:
            graph.insert_before(graph.node(0), nodes)
        if takes_output:
            _take_graph_output(graph, names, value, result)
        self.quantized_activations += 1

    # ------------------------------------------------------------------ weights
    def _quantize_weight(
        self, graph: ir.Graph, names: _Names, spec: WeightQdq,
        done: dict[tuple[ir.Value, bool, bool], ir.Value],
    ) -> None:
        node = spec.node
        index = weight_index(node, lambda i: _float_constant(node.inputs[i]) is not None)
        weight = node.inputs[index] if index is not None else None
        array = _float_constant(weight)
        if index is None or weight is None or array is None or array.ndim == 0:
            return
        key = (weight, spec.keep_float, spec.per_tensor)
        if key in done:
            node.replace_input_with(index, done[key])
            self.quantized_weights += 1
            return
        axis = output_channel_axis(node, index, array.ndim)
        if spec.per_tensor:
            amax = float(np.abs(array).max()) if array.size else 0.0
            scales = np.array(amax / _INT8_MAX if amax > 0 else 1.0 / _INT8_MAX, np.float32)
        else:
            scales = implicit_weight_scales(array, axis)
            scales = np.where(scales > 0, scales, 1.0 / _INT8_MAX).astype(np.float32)
        base = weight.name or "weight"
        scale = _initializer(graph, names.new(f"{base}_scale"), scales)
        axis_attr = [] if spec.per_tensor else [ir.AttrInt64("axis", axis)]
        nodes: list[ir.Node]
        if spec.keep_float:
            zero = _initializer(graph, names.new(f"{base}_zp"),
                                np.zeros(scales.shape, np.int8))
            q = _node("QuantizeLinear", [weight, scale, zero], names, base, "Q", "q", axis_attr)
            dq = _node("DequantizeLinear", [q.outputs[0], scale, zero], names, base, "DQ", "dq",
                       axis_attr)
            nodes = [q, dq]
        else:
            shape = [1] * array.ndim
            shape[axis] = -1 if not spec.per_tensor else 1
            integers = np.clip(np.rint(array / scales.reshape(shape)), -_INT8_MAX, _INT8_MAX)
            quantized = _initializer(graph, names.new(f"{base}_quantized"),
                                     integers.astype(np.int8))
            dq = _node("DequantizeLinear", [quantized, scale], names, base, "DQ", "dq", axis_attr)
            nodes = [dq]
        result = dq.outputs[0]
        result.type = _own_type(weight)
        result.shape = weight.shape
        node.replace_input_with(index, result)
        graph.insert_before(node, nodes)
        done[key] = result
        if not spec.keep_float and not weight.uses() and not weight.is_graph_output():
            # The int8 copy replaces the float weight, which nothing reads any more.
            graph.initializers.pop(weight.name or "", None)
        self.quantized_weights += 1


def native_qdq_types(model: ir.Model) -> set[ir.DataType]:
    """The float types a Q/DQ pair reads and writes without Casts at the model's opset."""
    opset = model.opset_imports.get("", model.opset_imports.get("ai.onnx", 0))
    return {ir.DataType.FLOAT, ir.DataType.FLOAT16} if opset >= 19 else {ir.DataType.FLOAT}


def _float16_scale(scale: float) -> np.ndarray:
    """``scale`` rounded to float16, kept within its positive range (a scale of 0 is invalid)."""
    half = np.finfo(np.float16)
    return np.array(min(max(scale, float(half.smallest_subnormal)), float(half.max)), np.float16)


def _own_type(value: ir.Value) -> ir.TypeProtocol | None:
    """A copy of ``value``'s type: a shared type object would change with the other value's."""
    return ir.TensorType(value.dtype) if value.dtype is not None else None


def _float_constant(value: ir.Value | None) -> np.ndarray | None:
    if value is None or value.const_value is None or value.is_graph_input():
        return None
    array = value.const_value.numpy()
    return array if np.issubdtype(array.dtype, np.floating) else None


def _initializer(graph: ir.Graph, name: str, array: np.ndarray) -> ir.Value:
    value = ir.Value(name=name, const_value=ir.Tensor(array, name=name))
    graph.register_initializer(value)
    return value


def _node(
    op: str, inputs: Iterable[ir.Value], names: _Names, base: str, node_tag: str, out_tag: str,
    attributes: Sequence[ir.Attr] = (),
) -> ir.Node:
    node = ir.Node("", op, list(inputs), attributes=list(attributes),
                   name=names.new(layer_safe(f"{base}_{node_tag}")))
    node.outputs[0].name = names.new(f"{base}_{out_tag}")
    return node


def _take_graph_output(graph: ir.Graph, names: _Names, value: ir.Value, result: ir.Value) -> None:
    """``result`` replaces ``value`` among the graph outputs, under ``value``'s name."""
    outputs = graph.outputs
    name = value.name
    value.name = names.new(f"{name}_before_qdq")
    result.name = name
    for position, output in enumerate(list(outputs)):
        if output is value:
            outputs[position] = result
