"""Choose the layers that must run FP16: the readers of every float tensor left without a scale.

TensorRT's implicit INT8 runs a layer INT8 only if its tensors have scales; a reader of an unscaled
tensor falls back to FP16 (with ``--fp16``), and ``--layerPrecisions name:fp16`` makes that explicit
rather than leaving the choice to the builder. Constant-derived and non-float tensors (shapes,
indices, masks) never need a scale and are skipped, and so are readers that write no float (Shape,
a Cast to int64): only layers that compute in float are listed. Names are unique and non-empty.

A model that is already mixed precision (it holds float16 tensors, as a TensorRT 11 Q/DQ model with
an FP16 remainder does) computes some nodes in float32 on purpose, for range: a node writing only
float32 there is listed FP32 instead (``fp32_nodes``), and its unscaled float32 tensors are not
counted as FP16 ones. Cast nodes convert and are listed as before. Without float16 tensors, or
without known types, nothing changes.

With ``add_unary``, a Conv output that feeds only one two-input Add whose *other* input has a real
scale gets scale 1.0 instead (the DLA compiler then fuses Conv+Add in INT8); never both Add inputs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import onnx_ir as ir

from qdqkit.core.constants import constant_derived_values
from qdqkit.core.qdq import FLOAT_TYPES, QdqView
from qdqkit.passes.scales import ScaleOrigin, ScaleTable

_NON_FLOAT_OPS = frozenset({
    "Shape", "Size", "NonZero", "ArgMax", "ArgMin", "Equal", "Less", "Greater", "LessOrEqual",
    "GreaterOrEqual", "Not", "And", "Or", "Xor", "IsNaN", "IsInf", "Range",
})


@dataclass
class Fp16Selection:
    nodes: list[str] = field(default_factory=list)
    unscaled_tensors: list[str] = field(default_factory=list)
    fp32_nodes: list[str] = field(default_factory=list)
    unary_tensors: list[str] = field(default_factory=list)


def _classify(graph: ir.Graph) -> tuple[set[ir.Value], set[ir.Value]]:
    """(constant-derived values, non-float values), each in one forward sweep."""
    constant = constant_derived_values(graph)
    non_float: set[ir.Value] = {
        v for v in (*graph.inputs, *graph.initializers.values())
        if v.dtype is not None and v.dtype not in FLOAT_TYPES
    }
    for node in graph:
        inputs = [v for v in node.inputs if v is not None]
        if node.op_type == "Constant":
            tensor = node.attributes.get("value")
            if tensor is not None and tensor.type == ir.AttributeType.TENSOR \
                    and tensor.value.dtype not in FLOAT_TYPES:
                non_float.update(node.outputs)
            elif tensor is None:  # value_int(s), value_string(s): never float
                non_float.update(o for o in node.outputs if not _float_constant_node(node))
            continue
        for out in node.outputs:
            if out.dtype is not None:
                if out.dtype not in FLOAT_TYPES:
                    non_float.add(out)
            elif node.op_type in _NON_FLOAT_OPS or (
                node.op_type == "Cast"
                and ir.DataType(node.attributes["to"].as_int()) not in FLOAT_TYPES
            ) or (inputs and node.op_type != "Cast" and all(v in non_float for v in inputs)):
                non_float.add(out)
    return constant, non_float


def _float_constant_node(node: ir.Node) -> bool:
    return any(name in node.attributes for name in ("value_float", "value_floats"))


def _computes_in_float(node: ir.Node, non_float: set[ir.Value]) -> bool:
    """Whether a layer writes float: a Shape or a Cast to int64 reads float but computes nothing
    TensorRT could run in FP16, so pinning it only clutters --layerPrecisions."""
    return any(out not in non_float for out in node.outputs)


def _unary_candidate(value: ir.Value, scales: ScaleTable) -> bool:
    # Imported here: importing trt.predict loads the whole engine predictor (~25 ms at every
    # translate's start), and only the DLA option asks this question.
    from qdqkit.trt.predict.ops import is_add

    producer = value.producer()
    uses = list(value.uses())
    if producer is None or producer.op_type != "Conv" or len(uses) != 1 or value.is_graph_output():
        return False
    add = uses[0].node
    if not is_add(add):
        return False
    other = add.inputs[1 - uses[0].idx]
    entry = scales.entry(other) if other is not None and other is not value else None
    return entry is not None and entry.origin is not ScaleOrigin.UNARY


def _mixed_precision(graph: ir.Graph) -> bool:
    """Whether the graph computes some tensors in float16 (its float32 nodes are then chosen)."""
    # Enum members are singletons: ``is`` skips IntEnum's comparison, ~25k times in a big graph.
    float16 = ir.DataType.FLOAT16
    if any(v.dtype is float16 for v in (*graph.inputs, *graph.initializers.values())):
        return True
    return any(out.dtype is float16 for node in graph for out in node.outputs)


def _explicit_fp32(node: ir.Node) -> bool:
    """A node of a mixed-precision graph that writes float32 and only float32 floats."""
    floats = [out for out in node.outputs if out.dtype in FLOAT_TYPES]
    return node.op_type != "Cast" and bool(floats) and all(
        out.dtype == ir.DataType.FLOAT for out in floats)


def explicit_fp32_nodes(graph: ir.Graph) -> frozenset[ir.Node] | None:
    """The nodes a mixed-precision graph computes in float32 on purpose; None when the graph is
    not mixed precision. Taken before the graph is widened to float32 (``translate``)."""
    if not _mixed_precision(graph):
        return None
    return frozenset(node for node in graph if _explicit_fp32(node))


def select_fp16_nodes(graph: ir.Graph, scales: ScaleTable, add_unary: bool = False,
                      fp32_nodes: frozenset[ir.Node] | None = None) -> Fp16Selection:
    """``fp32_nodes``: the source's float32 nodes (``explicit_fp32_nodes``) when the graph was
    mixed precision before it was widened; by default read from the graph's own types."""
    constant, non_float = _classify(graph)
    selection = Fp16Selection()
    listed: dict[str, None] = {}
    fp32: dict[str, None] = {}
    if fp32_nodes is None:
        fp32_nodes = explicit_fp32_nodes(graph)
    mixed = fp32_nodes is not None
    chosen = fp32_nodes or frozenset()
    candidates = list(graph.inputs) + [out for node in graph for out in node.outputs]
    for value in candidates:
        if value in scales or value in constant or value in non_float:
            continue
        if not value.uses() and not value.is_graph_output():
            continue  # an unused extra output (e.g. BN's training outputs)
        if add_unary and _unary_candidate(value, scales):
            scales.set(value, 1.0, ScaleOrigin.UNARY, "Conv feeding Add: DLA unary scale")
            selection.unary_tensors.append(value.name or "")
            continue
        producer = value.producer()
        if mixed and producer is not None and producer in chosen:
            fp32.setdefault(producer.name or "", None)
            continue  # a float32 tensor of a float32 node: not an FP16 one
        if not mixed or value.is_graph_output() or any(
                use.node not in chosen for use in value.uses()):
            # A tensor only float32 layers read (a network input of a layer kept FP32 for its
            # range) is never FP16 on the device.
            selection.unscaled_tensors.append(value.name or "")
        for use in value.uses():
            name = use.node.name
            if mixed and use.node in chosen:
                fp32.setdefault(name or "", None)
            elif name and name not in listed and _computes_in_float(use.node, non_float):
                listed[name] = None
    selection.nodes = list(listed)
    selection.fp32_nodes = [name for name in fp32 if name and name not in listed]
    return selection


def float_weight_layers(view: QdqView) -> list[ir.Node]:
    """Weighted ops that read a dequantized activation but a float weight (no DQ on it).

    The Q/DQ model, and an explicit build of it, runs them float with that weight. Implicit INT8
    would run them INT8, their activation having a scale, and requantize the weight, so the
    translation pins them to FP16 instead.
    """
    found = []
    for node in view.weighted_nodes:
        if all(view.dequantize_producer(v) is not None for v in node.inputs[:2]):
            continue  # both operands dequantized, the usual case: nothing to pin
        index = view.weight_index(node)
        ref = view.weight_ref(node, index) if index is not None else None
        activation = view.activation_index(node)
        if ref is None or ref.quantized or activation is None:
            continue
        value = node.inputs[activation]
        if value is not None and view.dequantize_producer(value) is not None \
                and value not in view.constant_values:
            found.append(node)
    return found
