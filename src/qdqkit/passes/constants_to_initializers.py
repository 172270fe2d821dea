"""ConstantsToInitializers: constant tensors become initializers, and only initializers.

Rules:
1. A ``Constant`` node holding a tensor (``value``, ``value_float(s)``, ``value_int(s)``) becomes an
   initializer under its output's name; its readers read the initializer. Exporters such as
   paddle2onnx store every weight this way, and a weight must be an initializer to be quantized
   per channel in place.
2. A graph input that is also an initializer (IR version 3 listed them as inputs) stops being an
   input: nobody feeds it, and TensorRT treats an input as run-time data, not a weight. The model
   then declares IR version 4 at least, the first that lets an initializer be no input
   (onnxruntime refuses an IR 3 model whose initializer is not an input).
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

_VALUE_ATTRS = {"value_float": np.float32, "value_floats": np.float32, "value_int": np.int64,
                "value_ints": np.int64}


class ConstantsToInitializers(ir.passes.InPlacePass):
    """Move constant tensors into initializers (see the module docstring for the rules)."""

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        graph = model.graph
        changed = False
        for node in list(graph):
            if node.op_type == "Constant" and node.domain in ("", "ai.onnx"):
                changed = constant_to_initializer(graph, node) is not None or changed
        inputs = [v for v in graph.inputs if v.name not in graph.initializers]
        if len(inputs) != len(graph.inputs):
            graph.inputs.clear()
            graph.inputs.extend(inputs)
            model.ir_version = max(model.ir_version or 0, 4)
            changed = True
        return ir.passes.PassResult(model, modified=changed)


def constant_to_initializer(graph: ir.Graph, node: ir.Node) -> ir.Value | None:
    """Rule 1 for one Constant node of ``graph``: the initializer now read in its place, or None
    when it stays (no tensor value, or its output is a graph output or has no name)."""
    array = _constant_value(node)
    out = node.outputs[0]
    if array is None or out.is_graph_output() or not out.name:
        return None
    name = out.name
    out.name = f"{name}__constant_node"
    value = ir.Value(name=name, const_value=ir.Tensor(array, name=name))
    value.shape = ir.Shape(array.shape)
    value.dtype = ir.DataType.from_numpy(array.dtype)
    graph.register_initializer(value)
    for use in list(out.uses()):
        use.node.replace_input_with(use.idx, value)
    graph.remove(node, safe=True)
    return value


def _constant_value(node: ir.Node) -> np.ndarray | None:
    attr = node.attributes.get("value")
    if attr is not None and attr.type == ir.AttributeType.TENSOR:
        return np.asarray(attr.as_tensor().numpy())
    for name, dtype in _VALUE_ATTRS.items():
        attr = node.attributes.get(name)
        if attr is not None:
            return np.asarray(attr.value, dtype=dtype)
    return None
