"""A model read through its Q/DQ: a copy whose readers of ``Q -> DQ`` read the Q's float input.

What the FP16 baseline of a latency comparison is built from (``linting.latency``). Unlike
``passes.float_copy`` (the float graph ``fix`` places on), weights stay as stored, a DQ of an INT8
weight included: only the engine's shape and its float layers are asked of it.

Rules:
1. A DequantizeLinear whose input a QuantizeLinear writes, and whose output is not a graph output,
   is read through: its readers read the Q's input (resolved through earlier pairs in graph order,
   so ``Q -> DQ -> Q -> DQ`` reads the first float tensor).
2. A Q or DQ is left out when nothing that stays reads its outputs and none is a graph output; a
   DQ of a stored INT8 weight (no Q before it) stays, as does every other node, in its order.
3. Every Q/DQ spelling is accepted, per-channel activations included: no scale is read.

``read_through_qdq`` builds only the nodes that stay, sharing the original's attributes and tensors,
instead of cloning every node and removing the pairs afterwards: a clone also gives every node and
value a metadata store and makes the pairs only to unlink them, about half of a lint's extra work.
A model with subgraphs or local functions takes the clone-and-remove path (``remove_qdq_pairs``).
"""

from __future__ import annotations

import onnx_ir as ir

from qdqkit.core.qdq import is_dequantize, is_quantize

_SUBGRAPH_ATTRIBUTES = (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS)


def read_through_qdq(model: ir.Model) -> ir.Model:
    """A new model: ``model`` with its Q -> DQ pairs read through (rules 1-2); ``model`` is not
    changed and shares its attributes and tensors with the copy."""
    graph = model.graph
    if model.functions or any(
        attr.type in _SUBGRAPH_ATTRIBUTES for node in graph for attr in node.attributes.values()
    ):
        copied = model.clone()
        remove_qdq_pairs(copied.graph)
        return copied
    nodes = list(graph)
    through = _read_through(nodes)
    staying = _staying(nodes, through, frozenset(graph.outputs))
    copies: dict[ir.Value, ir.Value] = {}
    inputs = [_copy_value(value, copies) for value in graph.inputs]
    initializers = [_copy_value(value, copies) for value in graph.initializers.values()]
    new_nodes = [_copy_node(node, through, copies) for node in nodes if node in staying]
    new_graph = ir.Graph(
        inputs,
        [copies[value] for value in graph.outputs],  # never read through (rule 1)
        nodes=new_nodes,
        initializers=initializers,
        doc_string=graph.doc_string,
        opset_imports=dict(graph.opset_imports),
        name=graph.name,
    )
    new_graph.metadata_props.update(graph.metadata_props)
    return ir.Model(
        new_graph,
        ir_version=model.ir_version,
        producer_name=model.producer_name,
        producer_version=model.producer_version,
        domain=model.domain,
        model_version=model.model_version,
        doc_string=model.doc_string,
        metadata_props=dict(model.metadata_props),
    )


def remove_qdq_pairs(graph: ir.Graph) -> None:
    """Rules 1-2 in place: reroute the readers of each pair, then drop the Q/DQ left unread."""
    for dq in [node for node in graph if is_dequantize(node)]:
        q = dq.inputs[0].producer() if dq.inputs and dq.inputs[0] is not None else None
        out = dq.outputs[0]
        if q is None or not is_quantize(q) or q.inputs[0] is None or out.is_graph_output():
            continue
        ir.convenience.replace_all_uses_with(out, q.inputs[0])
    for node in reversed(list(graph)):
        if (is_dequantize(node) or is_quantize(node)) and not any(
            o.uses() or o.is_graph_output() for o in node.outputs
        ):
            graph.remove(node, safe=True)


def _read_through(nodes: list[ir.Node]) -> dict[ir.Value, ir.Value]:
    """Rule 1: each read-through DQ output -> the float value its readers read instead."""
    through: dict[ir.Value, ir.Value] = {}
    for dq in nodes:
        if not is_dequantize(dq) or not dq.inputs or dq.inputs[0] is None:
            continue
        q = dq.inputs[0].producer()
        out = dq.outputs[0]
        if q is None or not is_quantize(q) or out.is_graph_output():
            continue
        x = q.inputs[0] if q.inputs else None
        x = through.get(x, x) if x is not None else None
        if x is not None:
            through[out] = x
    return through


def _staying(nodes: list[ir.Node], through: dict[ir.Value, ir.Value],
             graph_outputs: frozenset[ir.Value]) -> set[ir.Node]:
    """Rule 2, latest node first: a Q/DQ stays when a staying node reads one of its outputs
    after rerouting, or one is a graph output."""
    read: set[ir.Value] = set()  # values a staying node reads, rerouted
    staying: set[ir.Node] = set()
    for node in reversed(nodes):
        if (is_dequantize(node) or is_quantize(node)) and not any(
            out in read or out in graph_outputs for out in node.outputs
        ):
            continue
        staying.add(node)
        for value in node.inputs:
            if value is not None:
                read.add(through.get(value, value))
    return staying


def _copy_value(value: ir.Value, copies: dict[ir.Value, ir.Value]) -> ir.Value:
    new = ir.Value(
        name=value.name,
        type=value.type,
        shape=value.shape.copy() if value.shape is not None else None,
        doc_string=value.doc_string,
        const_value=value.const_value,
    )
    if value.metadata_props:
        new.metadata_props.update(value.metadata_props)
    copies[value] = new
    return new


def _copy_of(value: ir.Value, copies: dict[ir.Value, ir.Value]) -> ir.Value:
    # A value no node, input or initializer of the graph gives (a broken model) is copied
    # unattached, as a clone copies it.
    found = copies.get(value)
    return found if found is not None else _copy_value(value, copies)


def _copy_node(node: ir.Node, through: dict[ir.Value, ir.Value],
               copies: dict[ir.Value, ir.Value]) -> ir.Node:
    new = ir.Node(
        node.domain,
        node.op_type,
        [None if value is None else _copy_of(through.get(value, value), copies)
         for value in node.inputs],
        node.attributes.values(),
        overload=node.overload,
        num_outputs=len(node.outputs),
        version=node.version,
        name=node.name,
        doc_string=node.doc_string,
        metadata_props=dict(node.metadata_props) if node.metadata_props else None,
    )
    for output, copy in zip(node.outputs, new.outputs, strict=True):
        copies[output] = copy
        copy.name = output.name
        copy.shape = output.shape.copy() if output.shape is not None else None
        copy.type = output.type
        copy.const_value = output.const_value
        copy.doc_string = output.doc_string
        if output.metadata_props:
            copy.metadata_props.update(output.metadata_props)
    return new
