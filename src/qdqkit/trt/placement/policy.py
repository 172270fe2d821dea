"""Where Q/DQ go in a float model so TensorRT fuses them (rule base B, C, D, I).

``plan_placement(model)`` decides, without changing the model, in two linear passes:

1. Weighted ops (Conv, ConvTranspose, Gemm, MatMul with a constant weight) are quantized on their
   activation input and their weight (D1, C1; weights per output channel, A5/D7), unless
   excluded, unrunnable, too small or decode arithmetic (``sizes``). A zero Pad in front of a
   conv takes the Q/DQ before it (C12). Nothing goes on a weighted op's output or inside its
   BN/activation/SiLU epilogue (D2, C2, C7).
2. A residual Add that fuses into a quantized conv gets Q/DQ on its skip input only (C3, C5),
   with the predictor's own choice of which input is the skip, when the fused block's output is
   read in INT8; otherwise the skip stays float too (C4: its DQ would be a Reformat of its own),
   unless an INT8 block writes the skip for other INT8 readers: a residual chain running into
   float math then pays its one Reformat at its end instead of one per block.
3. Walking the graph backwards: an op that commutes with Q/DQ (MaxPool, Concat, nearest Resize,
   copies, a zero Pad; B3) whose outputs are all read in INT8 passes INT8 through, and its inputs
   join its output's scale group: one scale for the whole Concat/SPPF/MaxPool family, calibrated
   on the union of their data (B4, C10, C11). Such a chain reaching a network input (or its
   float16 Cast) puts the Q on the input: that Reformat is unavoidable (B8), one after the
   copies is not. An averaging pool or linear Resize whose output is read in
   INT8 gets Q/DQ on its input (C9, C14), so it runs INT8 between INT8 layers; so does every
   input of a pointwise layer whose output is read in INT8 (C8), unless its math is precision-
   sensitive, it holds an Add TensorRT would fuse into a conv, or it reads a tensor no INT8 layer
   writes (float math, a network input: each would be a standalone Q, one on its output does).
4. Network outputs are never quantized; LayerNorm, Softmax, GELU and everything after the last
   weighted op stay float because nothing asks for INT8 there (C16, C17).
5. A weighted op reading the output of float math (Tanh, Erf...: C17) is still quantized (D1):
   its Q is a Reformat of its own, weighed by the size rule (``sizes``) like a first layer's,
   and lint does not report it as stray (QDQ407). A Q/DQ on the float16 copy of a float32
   network input (a Cast) is realized on the input itself, the DQ writing float16 and the Cast
   gone (B8, A2; ``passes.input_cast_qdq``).

``target="dla"`` instead gives every float tensor a scale, outputs included (I1, I2): DLA's
implicit INT8 needs one on every tensor, and ``translate`` turns the Q/DQ into the cache. A copy's
input and output share one scale there too, network outputs included (B4). Except the float tail:
layers TensorRT has no INT8 form for (Softmax, normalizations, TopK, plugins) whose results reach
only network outputs, directly or through copies, run float with any scales; a scale on their
output would be a standalone Q and DQ (E1, E2), one on their input a Reformat after an INT8 writer
(C4), so both stay float, as network outputs do on the GPU. The same holds mid-network: no
scale where only such layers read (through copies and pointwise math), none on what they write
unless a weighted op reads it (rule 5). A residual Add reading a layer that falls back to the GPU
(a MatMul of tokens) gets its own scale there, as it cannot fuse across the boundary. And every
scale is read by all readers of its tensor: the cache has one per tensor.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field

import onnx_ir as ir

from qdqkit.core.constants import constant_array
from qdqkit.core.macs import macs_of
from qdqkit.core.qdq import FLOAT_TYPES, WEIGHTED_OPS, QdqView, node_label
from qdqkit.core.shapes import ValueTypes, infer_value_types
from qdqkit.trt.dla import dla_layer_kind
from qdqkit.trt.placement.sizes import reads_softmax, too_small
from qdqkit.trt.predict.fusion import (
    Block,
    GraphFacts,
    chain_root,
    collect_facts,
    form_blocks,
    is_epilogue_op,
)
from qdqkit.trt.predict.ops import (
    AVERAGING_POOLS,
    DATA_MOVEMENT,
    POINTWISE,
    POOLS,
    SHAPE_OPS,
    is_add,
    is_default_domain,
    is_plugin,
)
from qdqkit.trt.predict.wanted import commuting_data_index, is_commuting

# Pointwise math that loses too much in INT8 (C17): GELU's erf/tanh, normalizations' roots and
# powers, softmax's exponentials.
SENSITIVE_OPS = frozenset({"Erf", "Tanh", "Gelu", "Exp", "Log", "Sqrt", "Reciprocal", "Pow",
                        "Softplus", "Mish", "LayerNormalization", "GroupNormalization",
                        "InstanceNormalization", "LpNormalization"})


# Ops a weighted op's INT8 output travels through without a float round trip: its epilogue
# (BN, activations, bias arithmetic), copies, pools and Resize.
_INT8_CARRIERS = DATA_MOVEMENT | POOLS | (POINTWISE - SENSITIVE_OPS) | {
    "Resize", "Upsample", "Concat",
}


@dataclass(frozen=True)
class QuantPoint:
    """One Q/DQ pair: ``value`` quantized for ``readers`` (None: every reader) in scale ``group``."""

    value: ir.Value
    readers: tuple[ir.Node, ...] | None
    group: str


@dataclass(frozen=True)
class WeightedDecision:
    """A weighted op: quantized or kept float, why, and its multiply-accumulates."""

    node: ir.Node
    quantized: bool
    reason: str
    macs: int | None


@dataclass
class Placement:
    """The plan: Q/DQ points, scale groups (tensors calibrated together) and weighted-op choices."""

    points: list[QuantPoint]
    groups: dict[str, list[ir.Value]]
    weighted: list[WeightedDecision]
    int8_ops: list[ir.Node] = field(default_factory=list)  # non-weighted ops made INT8
    target: str = "gpu"

    @property
    def quantized_weighted(self) -> list[ir.Node]:
        return [d.node for d in self.weighted if d.quantized]

    def observed_tensors(self) -> list[str]:
        """Every tensor whose data calibrates a group, in a stable order."""
        return list(dict.fromkeys(v.name or "" for members in self.groups.values()
                                  for v in members))

    def without_groups(self, groups: Iterable[str]) -> Placement:
        """The plan minus the points of ``groups`` (tensors that could not be observed)."""
        dropped = set(groups)
        return Placement([p for p in self.points if p.group not in dropped],
                         {k: v for k, v in self.groups.items() if k not in dropped},
                         self.weighted, self.int8_ops, self.target)


class _Groups:
    """Union-find over values: tensors that must share one INT8 scale."""

    def __init__(self) -> None:
        self.parent: dict[ir.Value, ir.Value] = {}

    def find(self, value: ir.Value) -> ir.Value:
        self.parent.setdefault(value, value)
        root = value
        while self.parent[root] is not root:
            root = self.parent[root]
        while self.parent[value] is not root:  # path compression keeps finds near O(1)
            self.parent[value], value = root, self.parent[value]
        return root

    def union(self, a: ir.Value, b: ir.Value) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra is not rb:
            self.parent[rb] = ra


def matches(node: ir.Node, patterns: Sequence[str]) -> str | None:
    """The first ``--exclude`` pattern naming ``node``: its name, a glob of it, its op type, or
    the label reports give an unnamed node (``<unnamed Conv -> out>``, as ``compare`` lists it)."""
    name = node.name or ""
    for pattern in patterns:
        if pattern == node.op_type or fnmatch.fnmatchcase(name, pattern):
            return pattern
        if not name and pattern == node_label(node):
            return pattern
    return None


def plan_placement(
    model: ir.Model,
    *,
    target: str = "gpu",
    exclude: Sequence[str] = (),
    blocked: Mapping[ir.Node, str] | None = None,
    types: ValueTypes | None = None,
) -> Placement:
    """The Q/DQ placement of the float ``model`` for ``target`` (see the module docstring).

    ``blocked`` maps nodes that must stay float (e.g. ops onnxruntime cannot run and everything
    after them) to the reason; ``exclude`` holds node names, globs or op types kept float.
    """
    graph = model.graph
    blocked = dict(blocked or {})
    types = types if types is not None else infer_value_types(model)
    facts = collect_facts(graph, QdqView(graph), types, generic_epilogues=target != "dla")
    for node in graph:
        pattern = matches(node, exclude)
        if pattern is not None and node not in blocked:
            blocked[node] = f"excluded by --exclude '{pattern}'"
    weighted = _decide_weighted(facts, blocked, target)
    quantized = {d.node for d in weighted if d.quantized}
    qreaders: dict[ir.Value, dict[ir.Node, None]] = {}
    groups = _Groups()
    int8_ops: list[ir.Node] = []
    if target == "dla":
        _everywhere(facts, blocked, qreaders, quantized)
    else:
        for node in graph:
            if node in quantized:
                value, reader = _activation_entry(facts, node)
                qreaders.setdefault(value, {})[reader] = None
    residuals = {} if target == "dla" else {
        add: skip for add, (owner, skip) in facts.residual_owners.items()
        if owner in quantized and add not in blocked}
    block_of = _pass_through(facts, blocked, qreaders, groups, int8_ops, residuals, quantized)
    int8_writers = {*quantized, *int8_ops}
    if target == "dla":
        _copies_share_scales(facts, blocked, qreaders, groups)
    points: list[QuantPoint] = []
    members: dict[str, dict[ir.Value, None]] = {}
    for value, readers in qreaders.items():
        if target != "dla" and all(r.op_type in SHAPE_OPS for r in readers) and not _int8_written(
                value, block_of, int8_writers):
            # Shapes read no value: a Q for them alone fuses only into an INT8 layer writing
            # the tensor (which then carries INT8 through the copies after it); after a float
            # layer it would be a Reformat for nothing.
            continue
        root = groups.find(value)
        key = root.name or ""
        # One Q per tensor, shared by all of its INT8 readers (B7).
        all_readers = {use.node for use in value.uses()}
        covers_all = set(readers) == all_readers and not value.is_graph_output()
        chosen = None if covers_all else tuple(sorted(readers, key=lambda n: facts.order[n]))
        if target == "dla":
            # The cache holds one scale per tensor: every reader reads it quantized (and a
            # network output carries it too), so the Q/DQ model must quantize it for all;
            # but an If/Loop body reads a network input as given (the engine takes it in
            # float), as ``verify`` emulates it.
            main = [n for n in all_readers if n.graph is facts.graph]
            chosen = None if not value.is_graph_input() or len(main) == len(all_readers) else \
                tuple(sorted(main, key=lambda n: facts.order[n]))
        if chosen is None or chosen:
            points.append(QuantPoint(value, chosen, key))
        members.setdefault(key, {})[value] = None
    for value in groups.parent:
        root = groups.find(value)
        if (root.name or "") in members:
            members[root.name or ""][value] = None
    return Placement(points, {k: list(v) for k, v in members.items()}, weighted, int8_ops, target)


def _int8_written(value: ir.Value, block_of: Mapping[ir.Node, Block],
                  int8_writers: AbstractSet[ir.Node]) -> bool:
    """Whether the layer writing ``value`` runs INT8 in the plan (its block holds a quantized
    weighted op or an INT8 pool, pointwise or commuting op)."""
    producer = value.producer()
    block = block_of.get(producer) if producer is not None else None
    nodes = block.nodes if block is not None else ([producer] if producer is not None else [])
    return any(node in int8_writers for node in nodes)


def _decide_weighted(
    facts: GraphFacts, blocked: Mapping[ir.Node, str], target: str
) -> list[WeightedDecision]:
    view = facts.view
    decisions = []
    for node in facts.graph:
        if node not in facts.weighted:
            continue
        w_index = view.weight_index(node)
        a_index = view.activation_index(node)
        if w_index is None or a_index is None:
            continue
        weight, activation = node.inputs[w_index], node.inputs[a_index]
        macs = macs_of(node, shape_of=facts.shape_of)
        reason = blocked.get(node, "")
        dtype = facts.dtype_of(activation) if activation is not None else None
        if not reason and (activation is None or (dtype is not None and dtype not in FLOAT_TYPES)):
            reason = "its input is not a float tensor"
        if not reason and (weight is None or weight.const_value is None):
            reason = "its weight is computed from constants, not stored (fold it into one first)"
        if not reason:
            softmax = reads_softmax(activation)
            if softmax is not None:
                reason = (f"reads Softmax '{node_label(softmax)}': a softmax expectation (decode "
                          "arithmetic) that INT8 represents poorly")
        if not reason and target != "dla" and weight is not None and activation is not None:
            first = activation.is_graph_input()
            small = too_small(node, weight, facts.shape_of, first)
            # Fed by an INT8 layer, the Q fuses into that layer for free and float would cost a
            # Reformat instead: the size rule only saves time where the Q would stand alone.
            if small is not None and not _int8_fed(facts, activation):
                reason = small
        decisions.append(WeightedDecision(node, not reason, reason, macs))
    return decisions


def _int8_fed(facts: GraphFacts, value: ir.Value) -> bool:
    """Whether ``value`` comes from a weighted op through ops that fuse or stay INT8."""
    current = value
    for _ in range(32):
        producer = current.producer()
        if producer is None:
            return False
        if producer in facts.weighted:
            return True
        if producer.op_type not in _INT8_CARRIERS or not is_default_domain(producer):
            return False
        data = facts.data_inputs(producer)
        if not data:
            return False
        current = data[0]
    return False


def _activation_entry(facts: GraphFacts, node: ir.Node) -> tuple[ir.Value, ir.Node]:
    """Where a weighted op's activation Q/DQ goes: before a zero Pad in front of a conv (C12)."""
    index = facts.view.activation_index(node)
    assert index is not None
    value = node.inputs[index]
    assert value is not None
    pad = value.producer()
    if (node.op_type in ("Conv", "ConvTranspose") and pad is not None and pad.op_type == "Pad"
            and _zero_pad(pad) and len(list(value.uses())) == 1 and not value.is_graph_output()
            and pad.inputs and pad.inputs[0] is not None):
        return pad.inputs[0], pad
    return value, node


def _zero_pad(pad: ir.Node) -> bool:
    mode = pad.attributes.get("mode")
    if mode is not None and mode.as_string() != "constant":
        return False
    if len(pad.inputs) > 2 and pad.inputs[2] is not None:
        fill = constant_array(pad.inputs[2])
        if fill is None or (fill.size and float(fill.reshape(-1)[0]) != 0.0):
            return False
    if len(pad.inputs) > 1 and pad.inputs[1] is not None:
        pads = constant_array(pad.inputs[1])
        return pads is not None and bool((pads >= 0).all())
    attr = pad.attributes.get("pads")
    return attr is not None and min(attr.as_ints(), default=0) >= 0


def _float_data(facts: GraphFacts, value: ir.Value | None) -> bool:
    if value is None or facts.is_constant(value):
        return False
    dtype = facts.dtype_of(value)
    return dtype is None or dtype in FLOAT_TYPES


def _everywhere(
    facts: GraphFacts, blocked: Mapping[ir.Node, str], qreaders: dict[ir.Value, dict[ir.Node, None]],
    quantized: AbstractSet[ir.Node],
) -> None:
    """DLA (I2): a scale on every float tensor that a runnable node reads or the network outputs,
    except a tensor inside a conv's fused layer whose scale ``translate`` derives exactly
    (``_range_derived``). Every other inner tensor gets its own, calibrated: the implicit
    build takes the cached scale of every tensor whatever it fuses, so a derived one (a SiLU's
    conv output given the Mul's scale, its Sigmoid 1/127: H7) would clip what the Q/DQ model
    keeps. A pointwise chain's inner tensors get one too: DLA runs each elementwise op as a
    layer of its own, which stays INT8 only with scales on both sides. The float tail
    (``_float_tail``) gets none, and neither do the inputs of a layer with no INT8 form (an LSTM,
    a Softmax mid-network: a scale there is a Reformat after an INT8 writer, C4), nor of the
    copies and pointwise math only such layers read (``_float_read``), nor what float
    layers write (``_float_written``) unless a weighted op reads it, which takes its Q as on the
    GPU (rule 5), or a residual Add fusing into an INT8 conv takes as its skip: a pointwise layer
    reading it runs float, as each such input would otherwise be a standalone Q."""
    _, block_of = form_blocks(facts)
    tail = _float_tail(facts, quantized)
    floated = _float_written(facts, blocked, quantized)
    float_read = _float_read(facts)
    for node in facts.graph:
        if node in blocked or node.op_type in SHAPE_OPS or node in facts.folded_nodes:
            continue
        if not is_default_domain(node) or runs_float(node) or node in float_read:
            continue
        weighted = node in facts.weighted
        residual = node in facts.residual_owners and facts.residual_owners[node][0] in quantized
        if not weighted and not residual and _reads_float(node, facts, floated):
            continue  # it runs float: scales on its inputs would be Reformats (C4, C8)
        for index, value in enumerate(node.inputs):
            if weighted and index != facts.view.activation_index(node) and value in floated:
                continue
            if node in facts.weighted and index == facts.view.weight_index(node):
                continue
            if _float_data(facts, value) and value is not None and not _read_by(tail, value):
                producer = value.producer()
                block = block_of.get(producer) if producer is not None else None
                inside = block is not None and block.weighted is not None and (
                    block is block_of.get(node)) and _range_derived(value, block) and (
                    dla_layer_kind(block.weighted))
                if (producer is None or producer not in blocked) and not inside:
                    qreaders.setdefault(value, {})[node] = None
    for value in facts.graph.outputs:
        producer = value.producer()
        if _float_data(facts, value) and value not in floated and (producer is None or (
                producer not in blocked and producer not in tail)):
            qreaders.setdefault(value, {})


def _reads_float(node: ir.Node, facts: GraphFacts, floated: AbstractSet[ir.Value]) -> bool:
    """Whether ``node`` runs float for reading what float layers write: any input of pointwise
    math or a copy, every input of a Concat (one INT8 input already makes it gather INT8, and
    its float ones are then quantized: mixed, it would run float with a Reformat, C11)."""
    data = facts.data_inputs(node)
    if node.op_type == "Concat":
        return bool(data) and all(v in floated for v in data)
    return any(v in floated for v in data)


def _float_read(facts: GraphFacts) -> set[ir.Node]:
    """DLA: the copies and pointwise math whose results only float layers read (no INT8 form,
    ``runs_float``), directly or through more of them: one backward pass. Scales on their
    inputs would make them read INT8 and write float, a Reformat each (C4)."""
    found: set[ir.Node] = set()
    for node in reversed(list(facts.graph)):
        if node in facts.weighted or runs_float(node) or not is_default_domain(node):
            continue
        if node.op_type not in POINTWISE and not is_commuting(node):
            continue
        readers = [use.node for out in node.outputs for use in out.uses()
                   if use.node.op_type not in SHAPE_OPS]
        if readers and not any(out.is_graph_output() for out in node.outputs) and all(
                r in found or runs_float(r) for r in readers):
            found.add(node)
    return found


def _float_written(facts: GraphFacts, blocked: Mapping[ir.Node, str],
                   quantized: AbstractSet[ir.Node]) -> set[ir.Value]:
    """DLA: the tensors float layers write (no INT8 form, plugins and other blocked nodes,
    excluded weighted ops included), and what copies, pools and pointwise math carry on from
    them: one forward pass in graph order."""
    floated: set[ir.Value] = set()
    for node in facts.graph:
        if node.op_type in SHAPE_OPS or node in facts.folded_nodes:
            continue
        if node in facts.weighted:
            # Only one kept float on purpose: one whose weight is not stored yet is still a
            # weighted layer to ``fix`` (a Q/DQ model's int8 weight behind its DQ).
            float_layer = node in blocked
        else:
            float_layer = node in blocked or runs_float(node) or _reads_float(node, facts, floated)
        if float_layer:
            floated.update(out for out in node.outputs if _float_data(facts, out))
    return floated


# Epilogue readers after which a conv output needs no range of its own on DLA: translate gives
# a ReLU's input its output's range (H6), which clips only what the ReLU zeroes; no-ops pass it.
# Every other reader needs one in the cache, or translate pins it FP16 and the fused layer with
# it (H9): a calibrated range for the tensor, which the Q/DQ model then applies too.
_EXACT_EPILOGUE = frozenset({"Relu", "Identity", "Dropout"})


def _range_derived(value: ir.Value, block: Block) -> bool:
    """Whether ``value``, inside ``block``, can go without a Q/DQ on DLA: every reader is an
    exact epilogue op; or the residual Add, whose conv input takes the unary scale (I4, H8) that
    leaves the accumulator unscaled as the Q/DQ model does; or the weighted op itself behind a
    folded Pad, whose Q goes in front of the Pad (C12). Anything else (a SiLU's Sigmoid and
    Mul, a HardSwish, a constant scale) gets a calibrated range, for every reader of the tensor
    (one range per tensor): a range translate would guess (a SiLU's conv output given the Mul's,
    H7) clips what the Q/DQ model keeps."""
    for use in value.uses():
        reader = use.node
        if reader.op_type in _EXACT_EPILOGUE and reader.inputs[0] is value:
            continue
        if reader is not block.residual_add and reader is not block.weighted:
            return False
    return True


def _float_tail(facts: GraphFacts, quantized: AbstractSet[ir.Node]) -> set[ir.Node]:
    """DLA: the layers with no INT8 form (``runs_float``) whose results reach only network
    outputs (or shape reads), with the copies between them and those outputs or in front of them:
    they run float whatever their scales. A Concat in front of them joins as a copy does: in INT8
    its inputs' scales would differ, each a requantizing Reformat before a float layer (C11). So
    does a Concat that writes a network output: what it gathers (a detector's boxes and scores)
    can span unrelated ranges, and one INT8 scale for all would zero the small ones. Pointwise
    math that only the tail reads joins it (INT8 in, float out would be a Reformat in front of
    each), and a weighted op left float (``_decide_weighted``) counts as a float layer."""
    tail: set[ir.Node] = set()
    for node in reversed(list(facts.graph)):
        gathers = node.op_type in DATA_MOVEMENT or (
            node.op_type == "Concat" and is_default_domain(node))
        pointwise = node.op_type in POINTWISE and is_default_domain(node)
        float_layer = runs_float(node) or (node in facts.weighted and node not in quantized)
        if not float_layer and not gathers and not pointwise:
            continue
        readers = [use.node for out in node.outputs if out is not None for use in out.uses()
                   if use.node.op_type not in SHAPE_OPS]
        if not all(reader in tail for reader in readers):
            continue
        # A copy joins from either side: in front of tail layers, or copying one to an output;
        # a Concat in front of them or as the output's writer.
        if node.op_type == "Concat":
            joins = bool(readers) or any(out.is_graph_output() for out in node.outputs)
        else:
            joins = float_layer or bool(readers) or (
                not pointwise and _copied_from_float(facts, node))
        if joins:
            tail.add(node)
    return tail


def _read_by(tail: AbstractSet[ir.Node], value: ir.Value) -> bool:
    """Whether only ``tail`` layers read ``value`` (shape reads aside): a tensor other layers read
    in INT8 keeps its scale, so its writer stays INT8 for them."""
    readers = [use.node for use in value.uses() if use.node.op_type not in SHAPE_OPS]
    return bool(readers) and all(reader in tail for reader in readers)


def runs_float(node: ir.Node) -> bool:
    """A layer TensorRT has no INT8 form for: not weighted, pointwise, pooling, Concat, Resize
    or a copy (the layers the predictor may run INT8), or a plugin (C19)."""
    if is_plugin(node):
        return True
    if not is_default_domain(node):
        return False
    return not (is_commuting(node) or node.op_type in POINTWISE or node.op_type in POOLS
                or node.op_type in WEIGHTED_OPS or node.op_type in SHAPE_OPS
                or node.op_type in ("Resize", "Upsample", "Constant"))


def _copied_from_float(facts: GraphFacts, node: ir.Node) -> bool:
    """Whether the copy ``node`` copies (through further copies) the result of a float layer."""
    current: ir.Node | None = node
    while current is not None and current.op_type in DATA_MOVEMENT and current.inputs:
        source = current.inputs[0]
        current = source.producer() if source is not None else None
    return current is not None and runs_float(current) and current not in facts.folded_nodes


def _copies_share_scales(
    facts: GraphFacts, blocked: Mapping[ir.Node, str], qreaders: Mapping[ir.Value, object],
    groups: _Groups,
) -> None:
    """DLA (B4): a copy (Reshape, Transpose, Slice...) whose input and output both carry a scale
    gives them one, as ``_pass_through`` does between INT8 readers, here also in front of a
    network output (which has a scale on DLA only): two scales on one copy's two sides would be a
    requantizing Reformat. The output's values are among the input's, so the shared range is the
    input's and nothing clips."""
    for node in facts.graph:
        if (node.op_type not in DATA_MOVEMENT or node in blocked or not is_default_domain(node)
                or not node.inputs or node.inputs[0] is None):
            continue
        source = node.inputs[0]
        for out in node.outputs:
            if out is not None and out in qreaders and source in qreaders:
                groups.union(out, source)


def _pass_through(
    facts: GraphFacts,
    blocked: Mapping[ir.Node, str],
    qreaders: dict[ir.Value, dict[ir.Node, None]],
    groups: _Groups,
    int8_ops: list[ir.Node],
    residuals: Mapping[ir.Node, ir.Value],
    quantized: AbstractSet[ir.Node],
) -> Mapping[ir.Node, Block]:
    """Steps 2 and 3 of the module docstring, in reverse topological order (readers decided
    first); ``quantized`` are the weighted ops step 1 quantized. Returns the fused block of each
    node."""
    passing: dict[ir.Value, set[ir.Node]] = {}
    blocks, block_of = form_blocks(facts)
    pointwise_last = _int8_pointwise_blocks(facts, blocked, blocks, block_of)

    def wanted_in_int8(value: ir.Value) -> bool:
        readers = {use.node for use in value.uses()}
        int8 = set(qreaders.get(value, ())) | passing.get(value, set())
        meaningful = {r for r in readers if r.op_type not in SHAPE_OPS}
        return (not value.is_graph_output()) and bool(meaningful) and meaningful <= int8

    def read_in_int8(value: ir.Value) -> bool:
        if value.is_graph_output():
            return False
        readers = {use.node for use in value.uses()}
        int8 = set(qreaders.get(value, ())) | passing.get(value, set())
        shapes = {r for r in readers - int8 if r.op_type in SHAPE_OPS}
        if not readers or not readers - shapes <= int8 or readers == shapes:
            return False
        for reader in shapes:  # reads only the shape: it may read the DQ's output as well
            qreaders.setdefault(value, {})[reader] = None
        return True

    def skip_in_int8(add: ir.Node, skip: ir.Value) -> bool:
        """Step 2: whether a residual Add fused into a quantized conv reads its skip in INT8."""
        if wanted_in_int8(block_of[add].output):
            return True
        # The fused block writes float, so an INT8 skip costs a Reformat of its own (C4), and the
        # skip stays float; unless an INT8 block writes it and every other reader reads it in
        # INT8. A float skip there makes its writer output float too: the Reformat only moves
        # upstream, and that block's own skip then stays float in turn, one Reformat per block
        # down a residual chain that ends in float math.
        producer = skip.producer()
        source = block_of.get(producer) if producer is not None else None
        if (source is None or source.weighted not in quantized or source.output is not skip
                or skip.is_graph_output()):
            return False
        others = {use.node for use in skip.uses()
                  if use.node is not add and use.node.op_type not in SHAPE_OPS}
        int8 = set(qreaders.get(skip, ())) | passing.get(skip, set())
        return bool(others) and others <= int8

    for node in reversed(list(facts.graph)):
        skip = residuals.get(node)
        if skip is not None and skip_in_int8(node, skip):
            qreaders.setdefault(skip, {})[node] = None
        if node in blocked or node in facts.folded_nodes or not is_default_domain(node):
            continue
        outputs = [v for v in node.outputs if v is not None]
        if not outputs or not all(read_in_int8(v) for v in outputs):
            continue
        if is_commuting(node) and (node.op_type != "Pad" or _zero_pad(node)):
            data = [node.inputs[i] for i in sorted(commuting_data_index(node))
                    if i < len(node.inputs)]
            if not all(_float_data(facts, v) for v in data if v is not None and
                       not facts.is_constant(v)):
                continue
            for value in data:
                if value is None or facts.is_constant(value):
                    continue
                passing.setdefault(value, set()).add(node)
                for out in outputs:
                    groups.union(out, value)
            if node.op_type in ("MaxPool", "GlobalMaxPool", "Concat", "Resize", "Upsample"):
                int8_ops.append(node)
        elif node.op_type in AVERAGING_POOLS or node.op_type in ("Resize", "Upsample"):
            value = node.inputs[0] if node.inputs else None
            if _float_data(facts, value) and value is not None:
                qreaders.setdefault(value, {})[node] = None
                int8_ops.append(node)
        elif node in pointwise_last:
            # C8: a pointwise layer runs INT8 with DQ on every input and Q on its output; its
            # inputs come from INT8 layers anyway (a squeeze-excite gate, a decomposed HardSwish).
            block = pointwise_last[node]
            inside = set(block.nodes)
            for member in block.nodes:
                external = [v for v in member.inputs if v is not None and _float_data(facts, v)
                            and v.producer() not in inside]
                for value in external:
                    qreaders.setdefault(value, {})[member] = None
                if (is_add(member) or member.op_type == "Sub") and len(external) == 2:
                    groups.union(external[0], external[1])  # one scale for both (C6, B4)
            int8_ops.extend(reversed(block.nodes))
    for graph_input in facts.graph.inputs:
        # A network input reached through commuting ops takes the Q itself: the Reformat that
        # quantizes a network input is unavoidable (B8), one past the copies is not. So does
        # its float16 copy (a float remainder's Cast), whose Q is realized on the input itself.
        value = _through_input_casts(graph_input)
        if value in passing and read_in_int8(value):
            for node in sorted(passing[value], key=lambda n: facts.order[n]):
                qreaders.setdefault(value, {})[node] = None
    int8_ops.reverse()
    return block_of


def _through_input_casts(value: ir.Value) -> ir.Value:
    """The last of the float Casts a network input goes through, each the only reader of what it
    casts (a float16 remainder's Cast of the input, ModelOpt's AutoCast); the input if none."""
    while not value.is_graph_output():
        readers = [use.node for use in value.uses()]
        if len(readers) != 1:
            break
        cast = readers[0]
        to = cast.attributes.get("to")
        if (cast.op_type != "Cast" or not is_default_domain(cast) or to is None
                or ir.DataType(to.as_int()) not in FLOAT_TYPES or cast.outputs[0] is None):
            break
        value = cast.outputs[0]
    return value


def _int8_pointwise_blocks(facts: GraphFacts, blocked: Mapping[ir.Node, str],
                           blocks: list[Block], block_of: Mapping[ir.Node, Block]
                           ) -> dict[ir.Node, Block]:
    """Pointwise blocks (as TensorRT fuses them) that may run INT8, keyed by their last node.

    Left out, so they stay float: blocks with precision-sensitive math (exp, log, erf, roots,
    powers, divisions by computed values: GELU, LayerNorm, softmax pieces; C17), blocks with
    an Add that reads a conv chain, which TensorRT would otherwise fuse (QDQ202; C3, C6), and
    blocks reading a tensor no INT8 layer writes (the output of float math, such as an
    attention MatMul kept float, or a network input): in INT8 each such input would be a
    standalone Q, where the block in float needs at most one, on its output.
    """
    sensitive = {b for b in blocks if any(precision_sensitive(facts, n) for n in b.nodes)}
    found: dict[ir.Node, Block] = {}
    for block in blocks:
        if block.weighted is not None or not all(
            n.op_type in POINTWISE and is_default_domain(n) and n not in blocked
            for n in block.nodes
        ):
            continue
        feeders = {block_of.get(p) for n in block.nodes for v in facts.data_inputs(n)
                   if (p := v.producer()) is not None}
        if block in sensitive or feeders & sensitive:  # a GELU's tail is still GELU
            continue
        inside = set(block.nodes)
        if any(v.producer() not in inside and not _int8_fed(facts, v)
               for n in block.nodes for v in facts.data_inputs(n)):
            continue
        if any(is_add(n) and len(facts.data_inputs(n)) == 2
               and any(_conv_fed(facts, v) and len(list(v.uses())) == 1
                       for v in facts.data_inputs(n)) for n in block.nodes):
            continue
        found[block.last] = block
    return found


def _conv_fed(facts: GraphFacts, value: ir.Value) -> bool:
    """Whether the predictor would see ``value`` as a conv chain once one Q reads all of it.

    That is ``chain_root`` with the reader count of ``value`` itself ignored: a Q/DQ covering
    every reader leaves the chain with the single reader the predictor asks for (QDQ202).
    """
    if len(list(value.uses())) == 1 and not value.is_graph_output():
        return chain_root(facts, value) is not None
    producer = value.producer()
    if producer is None:
        return False
    if producer in facts.weighted:
        return True
    data = facts.data_inputs(producer)
    if len(data) == 1 and is_epilogue_op(facts, producer, data[0]):
        return chain_root(facts, data[0]) is not None
    return False


def precision_sensitive(facts: GraphFacts, node: ir.Node) -> bool:
    """Whether ``node``'s math loses too much in INT8 (C17): the policy keeps it float."""
    if node.op_type in SENSITIVE_OPS:
        return True
    if node.op_type == "Div":
        return len(node.inputs) > 1 and not facts.is_constant(node.inputs[1])
    return False
