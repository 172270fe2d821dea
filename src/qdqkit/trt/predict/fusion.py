"""Which ONNX nodes TensorRT fuses into one engine layer (rule base C2, C3, C5-C8, C10, C12).

``form_blocks`` groups the nodes of a Q/DQ graph into *blocks*, one per future engine layer:

1. A weighted op (Conv, ConvTranspose, Gemm, MatMul with a constant weight) takes its weight Q/DQ,
   a zero-padding Pad in front, and the epilogue behind it: BatchNormalization, bias/scale
   arithmetic with constants, activations (SiLU as Sigmoid+Mul), and at most one residual Add with a
   trailing activation; Identity and Dropout in the chain are no-ops it passes. The chain stops at
   a tensor with more than one reader or at a Q. On the GPU (``generic_epilogues``) a non-depthwise
   op also takes a pointwise DAG that reads only its output and constants (an erf GELU, a
   decomposed HardSwish or Mish): TensorRT matches it as one PointWise fusion, then fuses that into
   the convolution or GEMM (C8). Built implicitly (DLA: ``implicit_scales``), a Q -> DQ pair
   inside the chain only gives the tensor its range (I1): the chain takes the pair and goes on.
2. A residual Add (two computed inputs) joins the convolution on its *non-residual* input: an input
   that arrives through DQ is the residual; if both are plain convolution chains the later one takes
   the Add (it runs last and reads the other). The Add stays alone when the chain already holds an
   activation (Conv-SiLU-Add: C6), when the shapes broadcast, or when no input is a conv chain.
3. Remaining adjacent pointwise ops fuse into one PointWise block, a DAG that only reads its own
   inputs and results included (a decomposed HardSwish), past Q -> DQ pairs when built
   implicitly, as in rule 1; everything else is one block.
Constants and shape arithmetic fold away; Q/DQ nodes are decided later by the precision walk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property

import onnx_ir as ir

from qdqkit.core.constants import constant_array, constant_source
from qdqkit.core.qdq import QdqView, WeightRef, is_dequantize, is_qdq, is_quantize
from qdqkit.core.shapes import ValueTypes
from qdqkit.trt.predict.ops import (
    ACTIVATIONS,
    BINARY_POINTWISE,
    ELIDED_COPY_OPS,
    NO_OP_COPIES,
    POINTWISE,
    SHAPE_OPS,
    is_add,
    is_default_domain,
)


@dataclass(eq=False)
class Block:
    """ONNX nodes that become one engine layer."""

    nodes: list[ir.Node]
    weighted: ir.Node | None = None
    weight: WeightRef | None = None
    folded: list[ir.Node] = field(default_factory=list)  # weight Q/DQ, weight path ops, Pad
    residual_add: ir.Node | None = None
    residual_input: ir.Value | None = None
    pad: ir.Node | None = None
    pool_candidate: ir.Node | None = None  # a MaxPool that may join as ConvActPool (C10)

    @property
    def anchor(self) -> ir.Node:
        return self.weighted or self.nodes[0]

    @property
    def last(self) -> ir.Node:
        return self.nodes[-1]

    @property
    def output(self) -> ir.Value:
        return self.nodes[-1].outputs[0]

    def activation_input(self) -> ir.Value | None:
        """The computed input of a weighted block (before a folded Pad)."""
        if self.weighted is None or self.weight is None:
            return None
        index = 0 if self.weight.input_index == 1 else 1
        if self.pad is not None:
            return self.pad.inputs[0]
        return self.weighted.inputs[index] if index < len(self.weighted.inputs) else None


@dataclass
class GraphFacts:
    """Per-graph facts every later step needs, computed once in one pass."""

    graph: ir.Graph
    view: QdqView
    order: dict[ir.Node, int]
    folded_nodes: set[ir.Node]
    weighted: set[ir.Node]  # weighted ops with a constant weight (a set: membership is hot)
    types: ValueTypes = field(default_factory=ValueTypes)  # inferred where the model has none
    # A weighted op takes a following pointwise DAG into its layer (GPU, rule 1); DLA runs each
    # elementwise op as a layer of its own.
    generic_epilogues: bool = True
    # The build quantizes implicitly from the translated model (DLA): a Q/DQ pair becomes a
    # tensor's dynamic range, which cuts no fusion.
    implicit_scales: bool = False

    def shape_of(self, value: ir.Value) -> ir.Shape | None:
        return self.types.shape_of(value)

    def dtype_of(self, value: ir.Value) -> ir.DataType | None:
        return self.types.dtype_of(value)

    def is_constant(self, value: ir.Value | None) -> bool:
        if value is None:
            return True
        if value.const_value is not None or constant_source(value) is not None:
            return True
        producer = value.producer()
        return producer is not None and producer in self.folded_nodes

    def data_inputs(self, node: ir.Node) -> list[ir.Value]:
        return [v for v in node.inputs if v is not None and not self.is_constant(v)]

    @cached_property
    def dynamic_inputs(self) -> tuple[ir.Value, ...]:
        """The graph inputs with a dimension that is not a number: the build's optimization
        profile fixes those (trtexec ``--shapes``), so a symbolic or unknown dimension elsewhere
        may follow from them rather than from the data."""
        return tuple(
            value for value in self.graph.inputs
            if not self.is_constant(value) and value.shape is not None
            and any(not isinstance(dim, int) for dim in value.shape)
        )

    @cached_property
    def residual_owners(self) -> dict[ir.Node, tuple[ir.Node, ir.Value]]:
        """Residual Add -> (the weighted op that fuses it, the residual input) (C3, C5).

        Found once per graph: forming blocks and the Add-input rules both read it.
        """
        return find_residual_owners(self)


def collect_facts(graph: ir.Graph, view: QdqView, types: ValueTypes | None = None, *,
                  generic_epilogues: bool = True, implicit_scales: bool = False) -> GraphFacts:
    order: dict[ir.Node, int] = {}
    folded: set[ir.Node] = set()
    weighted = {n for n in view.weighted_nodes if view.weight_index(n) is not None}
    facts = GraphFacts(graph, view, order, folded, weighted, types or ValueTypes(),
                       generic_epilogues, implicit_scales)
    for index, node in enumerate(graph):
        order[node] = index
        if node.op_type == "Constant" or node.op_type in SHAPE_OPS:
            folded.add(node)
        elif is_default_domain(node) or is_qdq(node):
            inputs = [v for v in node.inputs if v is not None]
            if inputs and all(facts.is_constant(v) for v in inputs):
                folded.add(node)
    return facts


def _single_reader(value: ir.Value) -> ir.Node | None:
    uses = list(value.uses())
    if len(uses) != 1 or value.is_graph_output():
        return None
    return uses[0].node


def silu_pair(facts: GraphFacts, value: ir.Value) -> tuple[ir.Node, ir.Node] | None:
    """``value`` read only by Sigmoid(value) and Mul(value, sigmoid): the SiLU pair."""
    nodes = _silu_nodes(facts, value)
    return (nodes[0], nodes[-1]) if nodes else None


def _silu_nodes(facts: GraphFacts, value: ir.Value) -> list[ir.Node]:
    """The SiLU's nodes in order, with the Q/DQ pair of an implicit build's Sigmoid range."""
    readers = [use.node for use in value.uses()]
    if len(readers) != 2 or value.is_graph_output():
        return []
    sigmoid = next((n for n in readers if n.op_type == "Sigmoid"), None)
    mul = next((n for n in readers if n.op_type == "Mul"), None)
    if sigmoid is None or mul is None:
        return []
    inner, scale = _past_scale(facts, sigmoid.outputs[0])
    if _single_reader(inner) is not mul:
        return []
    return [sigmoid, *scale, mul]


def _past_scale(facts: GraphFacts, value: ir.Value) -> tuple[ir.Value, list[ir.Node]]:
    """Built implicitly, ``value`` seen past a Q -> DQ pair that only gives it a range: the DQ's
    output and the pair; otherwise ``value`` itself."""
    if not facts.implicit_scales:
        return value, []
    q = _single_reader(value)
    if q is None or not is_quantize(q) or q.inputs[0] is not value:
        return value, []
    dq = _single_reader(q.outputs[0])
    if dq is None or not is_dequantize(dq) or dq.inputs[0] is not q.outputs[0]:
        return value, []
    return dq.outputs[0], [q, dq]


def is_epilogue_op(facts: GraphFacts, node: ir.Node, value: ir.Value) -> bool:
    """A node that folds into the producer's epilogue when it reads ``value`` (C2, C7); an
    Identity or Dropout is a no-op the chain passes."""
    if not is_default_domain(node):
        return False
    if node.op_type in NO_OP_COPIES:
        return bool(node.inputs) and node.inputs[0] is value
    if node.op_type not in POINTWISE:
        return False
    if node.op_type == "BatchNormalization" or node.op_type in ACTIVATIONS:
        return node.inputs[0] is value
    if node.op_type in BINARY_POINTWISE:
        others = [v for v in node.inputs if v is not value]
        return len(others) == 1 and facts.is_constant(others[0])
    return False




def is_depthwise(node: ir.Node) -> bool:
    group = node.attributes.get("group")
    return node.op_type in ("Conv", "ConvTranspose") and group is not None and group.as_int() > 1


def _epilogue_dag(
    facts: GraphFacts, value: ir.Value, owners: dict[ir.Node, tuple[ir.Node, ir.Value]]
) -> list[ir.Node]:
    """The pointwise nodes after ``value`` that form one closed DAG: each reads only ``value``,
    the DAG's own results and constants, every reader of ``value`` and of each inner result is in
    it, and one result leaves it (rule 1). Grown in graph order; the longest closed prefix is
    returned, empty when there is none. Linear in the nodes it visits."""

    def eligible(node: ir.Node) -> bool:
        return (node.op_type in POINTWISE and is_default_domain(node) and node not in owners
                and node not in facts.folded_nodes and node not in facts.weighted)

    def readers(v: ir.Value) -> list[ir.Node] | None:
        found = [use.node for use in v.uses()]
        if v.is_graph_output() or not found or not all(eligible(n) for n in found):
            return None
        return found

    first = readers(value)
    if first is None:
        return []
    known = {value}
    members: list[ir.Node] = []
    closed: list[ir.Node] = []
    frontier: dict[ir.Node, None] = dict.fromkeys(first)
    while frontier:
        node = min(frontier, key=facts.order.__getitem__)
        if not all(v is None or v in known or facts.is_constant(v) for v in node.inputs):
            break  # it needs a value from outside the DAG
        del frontier[node]
        members.append(node)
        out = node.outputs[0]
        known.add(out)
        if not frontier:
            closed = list(members)
        following = readers(out)
        if following is None:
            if frontier:
                break  # an inner result is read outside the DAG
            return closed
        frontier.update(dict.fromkeys(following))
    return closed


def chain_root(
    facts: GraphFacts, value: ir.Value, *, through_qdq: bool = False
) -> tuple[ir.Node, bool] | None:
    """The weighted op whose single-reader epilogue chain produces ``value``.

    Returns the op and whether the chain holds an activation (which keeps a following Add apart).
    ``through_qdq`` also walks across Q/DQ pairs inside the chain (to name a chain they broke).
    """
    has_activation = False
    current = value
    for _ in range(64):
        producer = current.producer()
        if through_qdq and producer is not None and is_dequantize(producer):
            q = facts.view.quantize_of(producer)
            if q is not None and q.inputs[0] is not None:
                current = q.inputs[0]
                continue
        if producer is None or producer in facts.folded_nodes or is_qdq(producer):
            return None
        if producer.op_type == "Mul" and len(producer.inputs) == 2:
            pair = _silu_input(facts, producer)
            if pair is not None:
                current, has_activation = pair, True
                continue
        if _single_reader(current) is None:
            return None
        if producer in facts.weighted:
            return producer, has_activation
        data = facts.data_inputs(producer)
        if len(data) != 1 or not is_epilogue_op(facts, producer, data[0]):
            return None
        has_activation = has_activation or producer.op_type in ACTIVATIONS
        current = data[0]
    return None


def _silu_input(facts: GraphFacts, mul: ir.Node) -> ir.Value | None:
    for value in mul.inputs:
        if value is not None and silu_pair(facts, value) is not None:
            return value
    return None


def _same_shape(facts: GraphFacts, a: ir.Value, b: ir.Value) -> bool:
    shape_a, shape_b = facts.shape_of(a), facts.shape_of(b)
    if shape_a is None or shape_b is None:
        return True  # unknown: assume the usual equal-shape residual
    if len(shape_a) != len(shape_b):
        return False
    return all(
        x == y or not isinstance(x, int) or not isinstance(y, int) or i == 0
        for i, (x, y) in enumerate(zip(shape_a, shape_b, strict=False))
    )


def find_residual_owners(facts: GraphFacts) -> dict[ir.Node, tuple[ir.Node, ir.Value]]:
    """Residual Add -> (the weighted op that fuses it, the residual input) (C3, C5)."""
    owners: dict[ir.Node, tuple[ir.Node, ir.Value]] = {}
    for node in facts.graph:
        if not is_add(node) or not is_default_domain(node) or node in facts.folded_nodes:
            continue
        data = facts.data_inputs(node)
        if len(data) != 2 or data[0] is data[1] or not _same_shape(facts, data[0], data[1]):
            continue
        roots = [None if _via_dq(v) else chain_root(facts, v) for v in data]
        candidates = [
            (root[0], data[1 - i]) for i, root in enumerate(roots) if root is not None and not root[1]
        ]
        if not candidates:
            continue
        owner = max(candidates, key=lambda c: facts.order[c[0]])
        owners[node] = owner
    return owners


def _via_dq(value: ir.Value) -> bool:
    producer = value.producer()
    return producer is not None and is_dequantize(producer)


def _foldable_pad(facts: GraphFacts, value: ir.Value | None) -> ir.Node | None:
    """A constant-mode Pad with non-negative pads whose only reader is the conv (C12)."""
    if value is None:
        return None
    pad = value.producer()
    if pad is None or pad.op_type != "Pad" or _single_reader(value) is None:
        return None
    mode = pad.attributes.get("mode")
    if mode is not None and mode.as_string() != "constant":
        return None
    pads: list[int] | None = None
    if len(pad.inputs) > 1 and pad.inputs[1] is not None:
        array = constant_array(pad.inputs[1])
        pads = None if array is None else [int(v) for v in array.reshape(-1)]
    elif "pads" in pad.attributes:
        pads = list(pad.attributes["pads"].as_ints())
    if not pads or min(pads) < 0:
        return None
    return pad


def _pointwise_block(
    facts: GraphFacts, node: ir.Node, block_of: dict[ir.Node, Block],
    owners: dict[ir.Node, tuple[ir.Node, ir.Value]],
) -> Block:
    """Rule 3: ``node`` and the pointwise ops after it, each the single reader of the previous
    one's output, as one PointWise layer (C8). A reader may also read constants and the tensors
    the block already reads or computes, so a pointwise DAG is one layer too: ``x * Clip(x + 3,
    0, 6) / 6`` (a decomposed HardSwish) and ``x * Sigmoid(x)`` left outside a conv each run as a
    single PWN kernel in TensorRT's engines, never as two (PaddleOCR issue 9981 lists a
    TensorRT 8 engine's ``PWN(PWN(Activation), hard_swish)`` layers after each conv)."""
    block = Block(nodes=[node])
    value = node.outputs[0]
    known = {v for v in node.inputs if v is not None} | {value}
    while True:
        # An implicit build's range on the chain's tensor: taken with whatever reads past it.
        value, scale = _past_scale(facts, value)
        known.add(value)
        reader = _single_reader(value)
        if not (
            reader is not None and reader.op_type in POINTWISE and is_default_domain(reader)
            and reader not in block_of and reader not in owners
            and all(v is None or v in known or facts.is_constant(v) for v in reader.inputs)
        ):
            return block
        block.nodes += [*scale, reader]
        value = reader.outputs[0]
        known.add(value)


def _weighted_block(
    facts: GraphFacts, node: ir.Node, owners: dict[ir.Node, tuple[ir.Node, ir.Value]]
) -> Block:
    view = facts.view
    w_index = view.weight_index(node)
    ref = view.weight_ref(node, w_index) if w_index is not None else None
    block = Block(nodes=[node], weighted=node, weight=ref)
    if ref is not None:
        block.folded += [n for n in (ref.quantize, ref.dequantize) if n is not None]
        block.folded += list(ref.path)
    for extra in node.inputs[2:]:
        producer = extra.producer() if extra is not None else None
        if producer is not None and is_dequantize(producer):
            block.folded.append(producer)  # int32 bias DQ
    if node.op_type in ("Conv", "ConvTranspose"):
        block.pad = _foldable_pad(facts, node.inputs[0])
    value = node.outputs[0]
    while True:
        # An implicit build's range on the chain's tensor: taken with whatever reads past it.
        value, scale = _past_scale(facts, value)
        reader = _single_reader(value)
        if reader is not None and is_add(reader) and reader in owners:
            if owners[reader][0] is not node or block.residual_add is not None:
                break
            block.residual_add, block.residual_input = reader, owners[reader][1]
        elif reader is not None and is_epilogue_op(facts, reader, value):
            if block.residual_add is not None and reader.op_type not in ACTIVATIONS:
                break
        elif reader is not None and reader.op_type in ("MaxPool",) and is_default_domain(reader):
            if not scale:  # a pool behind a Q keeps the Q apart: the walk decides it (B3)
                block.pool_candidate = reader
            break
        else:
            dag = _silu_nodes(facts, value)
            if not dag and facts.generic_epilogues and not is_depthwise(node):
                dag = _epilogue_dag(facts, value, owners)
            if not dag or block.residual_add is not None:
                break
            block.nodes += [*scale, *dag]
            value = dag[-1].outputs[0]
            continue
        block.nodes += [*scale, reader]
        value = reader.outputs[0]
    return block


def form_blocks(facts: GraphFacts) -> tuple[list[Block], dict[ir.Node, Block]]:
    """Group the graph's nodes into blocks; returns the blocks and node -> block."""
    owners = facts.residual_owners
    view = facts.view
    block_of: dict[ir.Node, Block] = {}
    blocks: list[Block] = []
    pads_to_fold = {
        pad
        for node in view.weighted_nodes
        if node.op_type in ("Conv", "ConvTranspose") and node.inputs
        and (pad := _foldable_pad(facts, node.inputs[0])) is not None
    }
    for node in facts.graph:
        if node in facts.folded_nodes or node in block_of or is_qdq(node) or node in pads_to_fold:
            continue
        if node.op_type in ELIDED_COPY_OPS and is_default_domain(node):
            continue
        if node in facts.weighted:
            block = _weighted_block(facts, node, owners)
        elif node.op_type in POINTWISE and is_default_domain(node):
            block = _pointwise_block(facts, node, block_of, owners)
        else:
            block = Block(nodes=[node])
        blocks.append(block)
        for member in (*block.nodes, *block.folded):
            block_of[member] = block
        if block.pad is not None:
            block_of[block.pad] = block
    return blocks, block_of

