"""float_copy: a Q/DQ model's float graph, copied without its Q/DQ instead of cloned and stripped.

``StripQdqPairs`` on a clone gives the same graph (up to the values of quantized constants that
reach no weighted op, which it keeps as the Q/DQ gives them and placement does not read), but
clones every Q/DQ node only to remove it again (each removal unlinks its uses), which costs as
much as the rest of planning. Here each node is visited once, in order:
1. ``x -> Q -> DQ(s)``: the Q is not copied and every DQ output maps to the copy of ``x``.
2. A DQ of a constant becomes a float initializer ``(q - zp) * scale`` named as the DQ output; a
   DQ of a network input maps to the input, made float.
3. Everything else is copied (attributes and weights shared, not duplicated); an initializer is
   copied when a copied node reads it.
Cases ``StripQdqPairs`` handles with more than a re-link (a Q read by other ops too, a Q/DQ output
that is a network output, a DQ of a computed tensor, a pair that also converts float32 to float16,
a DQ breaking the spec) return None: the
caller falls back to clone and strip, which also words the errors.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx_ir as ir
from onnx_ir._cloner import Cloner

from qdqkit.core.constants import constant_source
from qdqkit.core.qdq import QdqView, is_dequantize, is_quantize
from qdqkit.core.value_types import set_dtype
from qdqkit.passes.strip_qdq import _float_dtype, _scale_type, dequantized_array


def float_copy(model: ir.Model, view: QdqView) -> ir.Model | None:
    """``model`` without its Q/DQ (see the module docstring); ``view`` is ``model``'s."""
    graph = model.graph
    for q in view.quantize_nodes:
        out = q.outputs[0]
        if out.is_graph_output() or any(not is_dequantize(u.node) for u in out.uses()):
            return None
    mapping: dict[ir.Value, ir.Value | None] = {}
    initializers: dict[ir.Value, None] = {}

    def copy_of(value: ir.Value) -> ir.Value:
        found = mapping.get(value)
        if found is not None:
            return found
        shape = value.shape.copy() if value.shape is not None else None
        copied = ir.Value(name=value.name, type=value.type, shape=shape,
                          const_value=value.const_value)
        if value.is_initializer():
            initializers[copied] = None
        mapping[value] = copied
        return copied

    inputs = [copy_of(v) for v in graph.inputs]
    cloner = Cloner(attr_map={}, value_map=mapping, metadata_props={})
    nodes: list[ir.Node] = []
    for node in graph:
        if is_quantize(node):
            continue
        if is_dequantize(node):
            mapped = _dequantized(node, view, copy_of)
            if mapped is None:
                return None
            if mapped.const_value is not None and mapped.producer() is None \
                    and not mapped.is_graph_input() and mapped not in initializers:
                initializers[mapped] = None
            mapping[node.outputs[0]] = mapped
            continue
        for value in node.inputs:
            if value is not None and value not in mapping:
                copy_of(value)
        try:
            nodes.append(cloner.clone_node(node))
        except (RuntimeError, ValueError):  # a subgraph reading what the copy does not have
            return None
    outputs = [mapping.get(v) for v in graph.outputs]
    if any(v is None for v in outputs):
        return None
    copied = ir.Graph(inputs, [v for v in outputs if v is not None], nodes=nodes,
                      initializers=list(initializers), opset_imports=dict(graph.opset_imports),
                      name=graph.name)
    return ir.Model(copied, ir_version=model.ir_version, producer_name=model.producer_name,
                    producer_version=model.producer_version, domain=model.domain,
                    model_version=model.model_version,
                    functions=[f.clone() for f in model.functions.values()])


def _dequantized(node: ir.Node, view: QdqView, copy_of: Callable[[ir.Value], ir.Value]
                 ) -> ir.Value | None:
    """What a DQ's output becomes in the copy (rules 1, 2), or None to fall back."""
    out = node.outputs[0]
    x = node.inputs[0]
    if x is None or out.is_graph_output():
        return None
    q = view.quantize_of(node)
    if q is not None:
        source = q.inputs[0]
        if source is None:
            return None
        have, want = source.dtype or _scale_type(view, q), out.dtype or _scale_type(view, node)
        if None not in (have, want) and have != want:
            return None  # a pair that also converts: stripping inserts a Cast
        return copy_of(source)
    if constant_source(x) is not None:
        try:
            array = dequantized_array(view, node, _float_dtype(view, node))
        except ValueError:
            return None
        return ir.Value(name=out.name, const_value=ir.Tensor(array))
    if x.is_graph_input():
        copied = copy_of(x)
        set_dtype(copied, ir.DataType.from_numpy(_float_dtype(view, node)))
        return copied
    return None
