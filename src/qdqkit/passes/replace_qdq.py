"""ReplaceQdq: make the Q/DQ around some tensors and weighted ops what the target placement says.

Rules:
1. For each tensor in scope (with every tensor of its scale group), the activation Q/DQ reading it
   are compared with the target's (``qdq_target``): which readers read it through which scales,
   which readers share one Q, int8 with zero point 0 and one scale. When they differ, every Q/DQ
   chain on the tensor is removed (its readers read the tensor again; a network output keeps its
   name) and the target's pairs are inserted with ``InsertQdq``: a tensor quantized per channel,
   or uint8 from zero where it cannot be negative, gets one int8 per-tensor pair covering its
   range. A tensor that already matches is left alone, and so is one with any other asymmetric Q
   (it clamps, which a symmetric pair would not do).
2. A weighted op in scope that the target quantizes gets its float weight quantized per output
   channel (a weight stored in a Constant node read by it alone becomes an initializer first),
   and so does a float weight quantized per tensor (2b, from its float values); one the target
   keeps float reads its weight dequantized to float.
3. The work is proportional to the scope: names are looked up in an index built once per
   ``RepairSession`` (one per round of ``fix``), never by scanning the graph.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np
import onnx_ir as ir

from qdqkit.core.constants import constant_array, new_constant
from qdqkit.core.qdq import WEIGHTED_OPS, is_dequantize, is_quantize, node_label, read_params
from qdqkit.core.qdq_math import dequantize
from qdqkit.core.shapes import ValueTypes, infer_value_types
from qdqkit.core.weights import output_channel_axis, weight_index
from qdqkit.passes.constants_to_initializers import constant_to_initializer
from qdqkit.passes.input_cast_qdq import quantize_before_input_cast
from qdqkit.passes.insert_qdq import (
    ActivationQdq,
    InsertQdq,
    WeightQdq,
    _Names,
    native_qdq_types,
)
from qdqkit.passes.qdq_target import QdqTarget, activation_scale, plan_target
from qdqkit.trt.predict.wanted import is_commuting

SESSION_KEY = "qdqkit.fix.session"
_HALF_QDQ_OPSET = 19  # Q/DQ take float16 scales and tensors from opset 19 on
_CARRIED = 4  # copies walked back from a finding's tensor to where its Q/DQ sits
# What a tensor's Q/DQ look like: (reader, scales along its chain) pairs, readers sharing one Q.
Signature = tuple[frozenset[tuple[str, tuple[float, ...]]], frozenset[frozenset[str]], bool]


@dataclass
class RepairSession:
    """The target and a name index for one round of repairs on one model."""

    model: ir.Model
    target: QdqTarget
    values: dict[str, ir.Value] = field(default_factory=dict)
    nodes: dict[str, ir.Node] = field(default_factory=dict)
    names: _Names | None = None
    log: list[str] = field(default_factory=list)  # every change, in order
    types: ValueTypes | None = None  # inferred on first need: most models store their types
    has_half: bool = False
    # Tensors and weighted ops already made to match the target this session: the target does
    # not change within a session, so a second finding naming them has nothing left to do.
    settled: set[ir.Value | ir.Node] = field(default_factory=set)
    # Tensors left as they are on purpose -> why (what ``fix`` says of a finding left there).
    notes: dict[str, str] = field(default_factory=dict)

    def dtype_of(self, value: ir.Value) -> ir.DataType | None:
        if value.dtype is None and not self.has_half:
            return None  # no float16 anywhere: InsertQdq's float32 default is right
        if value.dtype is None and self.types is None:
            self.types = infer_value_types(self.model)
        return value.dtype if self.types is None else self.types.dtype_of(value)

    def __post_init__(self) -> None:
        graph = self.model.graph
        for value in graph.inputs:
            if value.name:
                self.values[value.name] = value
        for node in graph:
            self.nodes[node_label(node)] = node
            for out in node.outputs:
                if out.name:
                    self.values[out.name] = out
        self.names = _Names(graph)
        self.has_half = any(v.dtype == ir.DataType.FLOAT16 for v in graph.inputs) or any(
            v.const_value is not None and v.const_value.dtype == ir.DataType.FLOAT16
            for v in graph.initializers.values())


def start_session(model: ir.Model, target: QdqTarget | None = None, *,
                  trt_target: str = "gpu", types: ValueTypes | None = None) -> RepairSession:
    """A new session for ``model`` (the target planned now unless given), kept in its metadata;
    ``types`` are the model's value types when the caller has them."""
    session = RepairSession(model, target or plan_target(model, target=trt_target, types=types),
                            types=types)
    model.meta[SESSION_KEY] = session
    return session


def session_of(model: ir.Model) -> RepairSession:
    session = model.meta.get(SESSION_KEY)
    if isinstance(session, RepairSession) and session.model is model:
        return session
    return start_session(model)


def end_session(model: ir.Model) -> None:
    model.meta.pop(SESSION_KEY, None)
    _Q_INFO.clear()


def _alive(node: ir.Node, graph: ir.Graph) -> bool:
    return node.graph is graph


def float_root(value: ir.Value | None) -> ir.Value | None:
    """The tensor under any activation Q/DQ chain ending in ``value``."""
    seen = 0
    while value is not None and seen < 16:
        producer = value.producer()
        if producer is None or not (is_dequantize(producer) or is_quantize(producer)):
            return value
        source = producer.inputs[0]
        if source is None or (is_dequantize(producer) and source.producer() is None):
            return value if not source or source.const_value is None else None
        value, seen = source, seen + 1
    return value


# How a Q on a chain stands against the target's int8, zero point 0, per-tensor pairs; a chain
# takes its worst Q's. Replaceable: int8 per channel, or uint8 from zero on a tensor that cannot
# be negative (its clamp at zero clamps nothing), both of which the target's pair represents.
_CLEAN, _REPLACEABLE, _ASYMMETRIC = 0, 1, 2
# The mark a chain's scales end with in a signature: a replaceable chain is replaced by the
# target's pair, an asymmetric one is left alone (rule 1).
_MARKS = {_REPLACEABLE: -2.0, _ASYMMETRIC: -1.0}
# Ops whose output is never negative.
_NON_NEGATIVE = frozenset({"Relu", "Sigmoid", "HardSigmoid", "Softmax", "Abs", "Exp"})


def _chains(value: ir.Value) -> tuple[list[tuple[ir.Node, tuple[float, ...], int]],
                                      list[ir.Node], list[ir.Node]]:
    """Final readers of ``value`` with the scales along their chain and how its Qs stand
    (``_CLEAN``, ``_REPLACEABLE``, ``_ASYMMETRIC``); the Q and DQ nodes of every chain."""
    readers: list[tuple[ir.Node, tuple[float, ...], int]] = []
    qs: list[ir.Node] = []
    dqs: list[ir.Node] = []
    stack: list[tuple[ir.Value, tuple[float, ...], int]] = [(value, (), _CLEAN)]
    while stack:
        current, scales, kind = stack.pop()
        for use in list(current.uses()):
            node = use.node
            if is_quantize(node) and use.idx == 0:
                qs.append(node)
                scale, q_kind = _q_info(node)
                for dq_use in node.outputs[0].uses():
                    if is_dequantize(dq_use.node):
                        dqs.append(dq_use.node)
                        stack.append((dq_use.node.outputs[0],
                                      (*scales, float(np.float32(scale or 0.0))),
                                      max(kind, q_kind)))
            else:
                readers.append((node, scales, kind))
    return readers, qs, dqs


_Q_INFO: dict[ir.Node, tuple[float | None, int]] = {}


def _q_info(q: ir.Node) -> tuple[float | None, int]:
    """A Q's symmetric int8 scale and how it stands (``_CLEAN``: int8, zero point 0, one scale),
    memoized for the nodes of the current session: Q/DQ parameters never change once a Q is
    made."""
    found = _Q_INFO.get(q)
    if found is None:
        params = read_params(q)
        scale = activation_scale(params) if params is not None else None
        kind = _ASYMMETRIC
        if params is None or scale is None or not params.zero_point_is_zero:
            pass
        elif params.quant_dtype == ir.DataType.INT8:
            kind = _REPLACEABLE if params.per_channel else _CLEAN
        elif params.quant_dtype == ir.DataType.UINT8 and _non_negative(q.inputs[0]):
            kind = _REPLACEABLE
        found = _Q_INFO[q] = (scale, kind)
    return found


def _non_negative(value: ir.Value | None) -> bool:
    producer = value.producer() if value is not None else None
    if producer is None or producer.domain not in ("", "ai.onnx"):
        return False
    if producer.op_type == "Clip" and len(producer.inputs) > 1:
        low = constant_array(producer.inputs[1])
        return low is not None and low.size == 1 and float(low.reshape(-1)[0]) >= 0
    return producer.op_type in _NON_NEGATIVE


def _current_signature(value: ir.Value) -> Signature:
    readers, qs, _ = _chains(value)
    pairs = frozenset((node_label(r), (*s, _MARKS[kind]) if kind in _MARKS else s)
                      for r, s, kind in readers)
    shared = frozenset(
        frozenset(node_label(u.node) for dq in (d.node for d in q.outputs[0].uses())
                  for u in dq.outputs[0].uses())
        for q in qs)
    output_quantized = _dq_output(value) is not None
    return pairs, shared, output_quantized


def _asymmetric(signature: Signature) -> bool:
    return any(scales and scales[-1] == _MARKS[_ASYMMETRIC] for _, scales in signature[0])


def _dq_output(value: ir.Value) -> ir.Value | None:
    """A graph output that is a dequantized copy of ``value``."""
    for use in value.uses():
        if is_quantize(use.node):
            for dq in use.node.outputs[0].uses():
                out = dq.node.outputs[0]
                if out.is_graph_output():
                    return out
    return None


def _target_signature(value: ir.Value, session: RepairSession) -> Signature:
    points = session.target.points.get(value.name or "", [])
    readers, _, _ = _chains(value)
    everyone = {node_label(r) for r, _, _ in readers}
    covered: dict[str, float] = {}
    shared: set[frozenset[str]] = set()
    for point in points:
        names = everyone if point.readers is None else set(point.readers) & everyone
        if names:
            shared.add(frozenset(names))
        for name in names:
            covered[name] = float(np.float32(point.scale))
    pairs = frozenset((name, (covered[name],) if name in covered else ()) for name in everyone)
    output = any(p.readers is None for p in points) and value.is_graph_output()
    return pairs, frozenset(shared), output


def _strip(value: ir.Value, graph: ir.Graph) -> None:
    """Remove every activation Q/DQ chain on ``value``; readers read ``value`` again."""
    _, qs, dqs = _chains(value)
    for dq in dqs:
        out = dq.outputs[0]
        if out.is_graph_output() and not value.is_graph_output() and not value.is_graph_input():
            name = out.name
            out.replace_all_uses_with(value, replace_graph_outputs=True)
            out.name = None
            value.name = name
        elif out.is_graph_output():
            identity = ir.Node("", "Identity", inputs=[value], name=f"{out.name}_identity")
            graph.insert_after(dq, identity)
            out.replace_all_uses_with(identity.outputs[0], replace_graph_outputs=True)
            identity.outputs[0].name, out.name = out.name, None
        else:
            out.replace_all_uses_with(value)
    for node in dict.fromkeys([*dqs, *qs]):  # DQs first: then nothing reads the Qs
        for out in node.outputs:
            for use in list(out.uses()):
                if use.node not in dqs:
                    use.node.replace_input_with(use.idx, value)
        graph.remove(node, safe=True)


def _scope(session: RepairSession, nodes: Iterable[str], tensors: Iterable[str]
           ) -> tuple[list[ir.Value], list[ir.Node]]:
    graph = session.model.graph
    roots: dict[ir.Value, None] = {}
    weighted: dict[ir.Node, None] = {}

    def add(value: ir.Value | None) -> None:
        root = float_root(value)
        if root is not None and root.const_value is None and (
                root.producer() is None or _alive(root.producer(), graph)):  # type: ignore[arg-type]
            roots[root] = None

    for name in nodes:
        node = session.nodes.get(name)
        if node is None or not _alive(node, graph):
            continue
        if node.op_type in WEIGHTED_OPS:
            weighted[node] = None
        if is_quantize(node) or is_dequantize(node):
            add(node.inputs[0])
            for out in node.outputs:  # a weight's DQ: the ops reading the weight
                weighted.update((u.node, None) for u in out.uses()
                                if u.node.op_type in WEIGHTED_OPS)
            continue
        for value in (*node.inputs, *node.outputs):
            add(value)
    for name in tensors:
        add(session.values.get(name))
    for root in list(roots):  # an INT8 tensor carried through copies is repaired where it starts
        current: ir.Value | None = root
        for _ in range(_CARRIED):
            producer = current.producer() if current is not None else None
            if producer is None or not is_commuting(producer) or not producer.inputs:
                break
            current = float_root(producer.inputs[0])
            add(current)
    for root in list(roots):  # a scale group is repaired whole
        group = session.target.group_of.get(root.name or "", "")
        for member in session.target.groups.get(group, []):
            add(session.values.get(member))
    for root in roots:
        if root in session.settled:
            continue  # its weighted readers were looked at when it was settled
        for use in root.uses():
            if use.node.op_type in WEIGHTED_OPS:
                weighted[use.node] = None
        readers, _, _ = _chains(root)
        for reader, _, _ in readers:
            if reader.op_type in WEIGHTED_OPS:
                weighted[reader] = None
    return list(roots), list(weighted)


def repair_scope(model: ir.Model, nodes: Iterable[str] = (), tensors: Iterable[str] = ()
                 ) -> list[str]:
    """Make the Q/DQ on the tensors and weighted ops named match the target (rules 1, 2).

    Returns what changed, one line per tensor or weight, in a stable order.
    """
    session = session_of(model)
    graph = model.graph
    roots, weighted = _scope(session, nodes, tensors)
    actions: list[str] = []
    inserts: list[ActivationQdq] = []
    for value in roots:
        if value in session.settled:
            continue
        session.settled.add(value)
        current, wanted = _current_signature(value), _target_signature(value, session)
        if current == wanted:
            continue
        if _asymmetric(current):
            # An asymmetric Q clamps (onnxruntime drops a Relu whose Q starts at zero): a
            # symmetric pair would not, so such a tensor is left for a re-export.
            session.notes[value.name or ""] = (
                "its Q is asymmetric (a non-zero zero point, or uint8 on a tensor that can be "
                "negative): it clamps where a symmetric pair would not; re-export it as INT8 "
                "with a zero point of 0")
            continue
        _strip(value, graph)
        dtype = session.dtype_of(value)
        if value.dtype is None and dtype is not None and dtype != ir.DataType.FLOAT16:
            value.dtype = dtype  # InsertQdq casts a non-float32 tensor around its pair
        for point in session.target.points.get(value.name or "", []):
            readers = None
            if point.readers is not None:
                readers = tuple(n for r in point.readers if (n := session.nodes.get(r)) is not None)
            inserts.append(ActivationQdq(value, point.scale, readers))
        actions.append(_describe(value, current, wanted))
    weights: list[ir.Node] = []
    for node in weighted:
        if node in session.settled:
            continue
        session.settled.add(node)
        label = node_label(node)
        if label in session.target.quantized_weighted:
            _weight_into_initializer(graph, node)
        if label in session.target.quantized_weighted and _float_weight(node) is not None:
            weights.append(node)
            actions.append(f"weight of '{label}' quantized per output channel")
        elif label in session.target.quantized_weighted and _asymmetric_weight(node) and (
                _dequantize_weight(graph, node)):
            weights.append(node)
            actions.append(f"weight of '{label}' quantized again symmetrically per output channel")
        elif label in session.target.quantized_weighted and _restore_per_tensor_weight(graph, node):
            _weight_into_initializer(graph, node)
            if _float_weight(node) is not None:
                weights.append(node)
                actions.append(f"weight of '{label}' quantized again per output channel from its "
                               "float values (it had one scale)")
        elif label in session.target.float_weighted and _dequantize_weight(graph, node):
            actions.append(f"weight of '{label}' back to float "
                           f"({session.target.float_weighted[label]})")
    assert session.names is not None
    if inserts:
        insert = _SessionInsert(session.names, inserts, [])
        if _opset(model) >= _HALF_QDQ_OPSET:
            insert.half = lambda v: session.dtype_of(v) == ir.DataType.FLOAT16
        insert(model)
    if weights:
        requantize_weights(model, weights, session.names)
    session.log.extend(actions)
    return actions


def repair_finding(finding: object, model: ir.Model) -> bool:
    """A rule unit's fix: repair the scope a finding names (its nodes and tensors)."""
    nodes = list(getattr(finding, "nodes", ()))
    tensors = list(getattr(finding, "tensors", ()))
    return bool(repair_scope(model, nodes, tensors))


def _opset(model: ir.Model) -> int:
    return model.opset_imports.get("", model.opset_imports.get("ai.onnx", 0))


def _describe(value: ir.Value, current: Signature, wanted: Signature) -> str:
    if current[2] != wanted[2]:
        return f"'{value.name}': Q/DQ on the network output {'added' if wanted[2] else 'removed'}"
    def readers(sig: Signature) -> str:
        quantized = sorted(name for name, scales in sig[0] if scales)
        return ", ".join(quantized) if quantized else "none"
    return (f"'{value.name}': Q/DQ for [{readers(current)}] -> [{readers(wanted)}]"
            + (f" at scale {next(iter(s for _, s in wanted[0] if s))[0]:.6g}"
               if any(s for _, s in wanted[0]) else ""))


def _weight_input(node: ir.Node) -> int | None:
    return weight_index(node, lambda i: node.inputs[i] is not None and (
        node.inputs[i].const_value is not None  # type: ignore[union-attr]
        or dq_of_constant(node.inputs[i]) is not None))


def _weight_into_initializer(graph: ir.Graph, node: ir.Node) -> None:
    """A float weight stored in a Constant node (paddle2onnx's way) becomes an initializer, to be
    quantized in place as the target planned it (``qdq_target`` reads such weights as stored)."""
    index = weight_index(node, lambda i: node.inputs[i] is not None and _constant_node(
        node.inputs[i]) is not None)
    producer = _constant_node(node.inputs[index]) if index is not None else None
    if producer is not None and len(producer.outputs[0].uses()) == 1:
        constant_to_initializer(graph, producer)


def _constant_node(value: ir.Value | None) -> ir.Node | None:
    producer = value.producer() if value is not None else None
    if producer is None or producer.op_type != "Constant" or producer.domain not in ("", "ai.onnx"):
        return None
    return producer


def _float_weight(node: ir.Node) -> ir.Value | None:
    index = _weight_input(node)
    value = node.inputs[index] if index is not None else None
    if value is None or value.const_value is None or value.is_graph_input():
        return None
    return value if np.issubdtype(value.const_value.numpy().dtype, np.floating) else None


def dq_of_constant(value: ir.Value | None) -> ir.Node | None:
    """The DQ producing ``value`` from a constant (integer weight, or a Q of a float weight)."""
    producer = value.producer() if value is not None else None
    if producer is None or not is_dequantize(producer) or producer.inputs[0] is None:
        return None
    source = producer.inputs[0]
    upstream = source.producer()
    if source.const_value is not None:
        return producer
    if upstream is not None and is_quantize(upstream) and upstream.inputs[0] is not None and (
            upstream.inputs[0].const_value is not None):
        return producer
    return None


def dequantized_constant(dq: ir.Node) -> np.ndarray | None:
    """The float array a DQ of a constant (or of a Q of a constant) produces."""
    source = dq.inputs[0]
    if source is None:
        return None
    upstream = source.producer()
    if upstream is not None and is_quantize(upstream):
        from qdqkit.core.qdq_math import quantize

        params = read_params(upstream)
        weight = upstream.inputs[0]
        if params is None or weight is None or weight.const_value is None:
            return None
        integers = quantize(weight.const_value.numpy(), params)
    elif source.const_value is not None:
        integers = source.const_value.numpy()
    else:
        return None
    params = read_params(dq)
    if params is None:
        return None
    out = np.float16 if params.scale_dtype == ir.DataType.FLOAT16 else np.float32
    return dequantize(integers, params, out)


def requantize_weights(model: ir.Model, nodes: list[ir.Node],
                       names: _Names | None = None) -> None:
    """Quantize the float weight of each of ``nodes`` per output channel (``InsertQdq``); a float16
    weight's DQ gets a float16 scale, so it still writes float16 (opset 19 Q/DQ)."""
    specs = [WeightQdq(node) for node in nodes]
    half = set()
    for node in nodes:
        weight = _float_weight(node)
        if weight is not None and weight.const_value is not None and (
                weight.const_value.dtype == ir.DataType.FLOAT16):
            half.add(node)
    if names is None:
        InsertQdq(weights=specs)(model)
    else:
        _SessionInsert(names, [], specs)(model)
    for node in half:
        index = _weight_input(node)
        value = node.inputs[index] if index is not None else None
        dq = value.producer() if value is not None else None
        scale = dq.inputs[1] if dq is not None and len(dq.inputs) > 1 else None
        if value is not None and scale is not None and scale.const_value is not None:
            scale.const_value = ir.Tensor(scale.const_value.numpy().astype(np.float16),
                                          name=scale.name)


def _asymmetric_weight(node: ir.Node) -> bool:
    """Whether the weight's DQ has a non-zero zero point or is not int8 (TensorRT reads int8
    with zero points 0 only)."""
    index = _weight_input(node)
    dq = dq_of_constant(node.inputs[index] if index is not None else None)
    params = read_params(dq) if dq is not None else None
    return params is not None and (not params.zero_point_is_zero
                                   or params.quant_dtype != ir.DataType.INT8)


def _restore_per_tensor_weight(graph: ir.Graph, node: ir.Node) -> bool:
    """Rule 2b: a float weight quantized with one scale for all its output channels (a Q of the
    float weight, then a DQ) is read as the float weight again, to be quantized per channel: a
    channel of small weights loses every step to the largest channel's scale (zeroed when its
    values stay below half a step), per channel it gets 127 of its own. An int8 weight stored
    behind a DQ alone has no float values to go back to and is left as it is."""
    index = _weight_input(node)
    value = node.inputs[index] if index is not None else None
    dq = dq_of_constant(value)
    q = dq.inputs[0].producer() if dq is not None and dq.inputs[0] is not None else None
    params = read_params(dq) if dq is not None else None
    if index is None or dq is None or q is None or not is_quantize(q) or params is None \
            or params.per_channel or q.inputs[0] is None:
        return False
    source = q.inputs[0]
    array = constant_array(source)
    if array is None or array.ndim < 2 or not np.issubdtype(array.dtype, np.floating) \
            or array.shape[output_channel_axis(node, index, array.ndim)] < 2:
        return False
    node.replace_input_with(index, source)
    remove_unused(graph, dq)
    return True


def _dequantize_weight(graph: ir.Graph, node: ir.Node) -> bool:
    index = _weight_input(node)
    value = node.inputs[index] if index is not None else None
    dq = dq_of_constant(value)
    array = dequantized_constant(dq) if dq is not None else None
    if value is None or dq is None or array is None:
        return False
    floating = new_constant(f"{value.name}_float" if value.name else None, array)
    graph.register_initializer(floating)
    node.replace_input_with(index, floating)  # type: ignore[arg-type]
    remove_unused(graph, dq)
    return True


def remove_unused(graph: ir.Graph, node: ir.Node) -> None:
    """Remove ``node`` and the Q feeding it once nothing reads them."""
    while node is not None and all(not o.uses() and not o.is_graph_output() for o in node.outputs):
        source = node.inputs[0]
        graph.remove(node, safe=True)
        upstream = source.producer() if source is not None else None
        node = upstream if upstream is not None and is_quantize(upstream) else None  # type: ignore[assignment]


class _SessionInsert(InsertQdq):
    """``InsertQdq`` with the session's name index, so a small repair costs a small time."""

    def __init__(self, names: _Names, activations: list[ActivationQdq],
                 weights: list[WeightQdq]) -> None:
        super().__init__(activations, weights)
        self.names = names
        self.half: Callable[[ir.Value], bool] | None = None

    def call(self, model: ir.Model) -> ir.passes.PassResult:
        names = self.names
        native = native_qdq_types(model)
        for activation in self.activations:
            self._quantize_activation(model.graph, names, activation, native)
        done: dict[tuple[ir.Value, bool, bool], ir.Value] = {}
        for weight in self.weights:
            self._quantize_weight(model.graph, names, weight, done)
        return ir.passes.PassResult(model, modified=True)

    def _quantize_activation(self, graph: ir.Graph, names: _Names, spec: ActivationQdq,
                             native: set[ir.DataType]) -> None:
        value = spec.value
        half = value.dtype is None and self.half is not None and self.half(value)
        before = {u.node for u in value.uses()}
        super()._quantize_activation(graph, names, spec, native)
        made = [u.node for u in value.uses() if u.node not in before and is_quantize(u.node)]
        if half:
            # A float16 tensor at opset 19+: the pair takes a float16 scale and writes float16.
            for q in made:
                scale = q.inputs[1]
                if scale is not None and scale.const_value is not None:
                    scale.const_value = ir.Tensor(
                        scale.const_value.numpy().astype(np.float16), name=scale.name)
        for q in made:  # the Q of a cast network input reads the input (passes.input_cast_qdq)
            quantize_before_input_cast(graph, q)
