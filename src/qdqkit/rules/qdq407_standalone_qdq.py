"""QDQ407: a Q/DQ Reformat layer that no other finding explains (D6, E1, E2).

Runs last: it receives every other finding and reports only the predicted Q/DQ Reformats none of
them names, so each Reformat is explained once, by its most specific rule.

Not reported: the Q in front of weighted ops that run INT8, read by nothing else (a Shape reads
no value and does not count), whose producer
computes math INT8 cannot carry (Tanh, Erf, Exp...; C17) or has no INT8 form at all (an LSTM,
a Softmax: ``trt.placement.runs_float``), or holds a weighted op the model records
as kept float on purpose (``core.kept_float``: ``quantize`` found its own Q would not pay),
directly or through single-reader
copies (Reshape, Transpose, Pad, a roll written as Slices and a Concat: TensorRT moves the Q
back onto that math, B1, B3). The ops need that
Q (D1) and nothing before it can absorb it, like a network input's (B8): the placement policy
places it there on purpose, weighing the Reformat against the ops' INT8 (C15, C20, E1), so no
placement removes it. Nor the DQ of a residual skip that its writer writes in INT8 for other
INT8 readers, when the block the skip's Add fused into writes float because only float math reads
it: the end of a residual chain that runs into float math has one Reformat wherever the Q/DQ go
(C4; ``LintContext.skip_needed_in_int8``). Nor, on DLA, the DQ of a network output written on
DLA, directly or through copies: leaving DLA's native format takes a Reformat at the output
whatever its precision (I6, E6). Nor, on DLA, a Q/DQ between a layer on one device and readers
all on the other (an attention MatMul of two activations that falls back to the GPU between
projections on DLA): the boundary takes a Reformat whatever the precisions, and QDQ505 already
counts it (E6).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity, replace_by_placement

if TYPE_CHECKING:
    import onnx_ir as ir

    from qdqkit.rules.model_context import LintContext
    from qdqkit.trt.engine import EngineLayer

RULES = (
    Rule(
        code="QDQ407",
        name="standalone-qdq",
        severity=Severity.WARNING,
        summary="a Q or DQ runs as its own Reformat layer",
        why=(
            "A Q whose producer writes float, or a DQ whose reader needs float, becomes a "
            "standalone Reformat (extra memory traffic)."
        ),
        what_to_do=(
            "See the layer's note: quantize the producer's other readers, or the reader's output."
        ),
        fixable=True,
        rule_id="D6, E1, E2",
        how_it_checks="A predicted Q/DQ Reformat layer that no other finding already names.",
    ),
)

RUNS_LAST = True

fix: Fix | None = replace_by_placement


def check(ctx: LintContext, earlier: Sequence[Finding]) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label

    named = {node for finding in earlier for node in finding.nodes}
    quantizers = {node_label(q): q for q in ctx.view.quantize_nodes}
    dequantizers = {node_label(d): d for d in ctx.view.dequantize_nodes}
    boundary = _device_boundaries(ctx) if ctx.prediction.target == "dla" else set()
    for layer in ctx.prediction.engine.layers:
        if (layer.origin != "QDQ" or any(n in named for n in layer.onnx_nodes)
                or id(layer) in boundary):
            continue
        only = quantizers.get(layer.onnx_nodes[0]) if len(layer.onnx_nodes) == 1 else None
        if only is not None and _weighted_input_after_float_math(ctx, only):
            continue
        dq = dequantizers.get(layer.onnx_nodes[0]) if len(layer.onnx_nodes) == 1 else None
        if dq is not None and (_skip_at_chain_end(ctx, dq) or _dla_output(ctx, dq)):
            continue
        note = layer.notes[0] if layer.notes else "a standalone Q/DQ"
        yield ctx.finding("QDQ407", f"'{layer.name}': {note}", nodes=layer.onnx_nodes,
                          tensors=[t.name for t in layer.inputs],
                          cost=f"+1 Reformat layer ({layer.input_precision} -> "
                          f"{layer.output_precision})")


def _device_boundaries(ctx: LintContext) -> set[int]:
    """The fourth exception of the module docstring: Q/DQ Reformats (by ``id``) between a layer
    on one device and readers all on the other, found in one pass over the predicted layers."""
    layers = ctx.prediction.engine.layers
    writer: dict[str, EngineLayer] = {}
    readers: dict[str, list[EngineLayer]] = {}
    for layer in layers:
        for tensor in layer.outputs:
            writer.setdefault(tensor.name, layer)
        for tensor in layer.inputs:
            readers.setdefault(tensor.name, []).append(layer)
    found: set[int] = set()
    for layer in layers:
        if layer.origin != "QDQ" or not layer.inputs or not layer.outputs:
            continue
        source = writer.get(layer.inputs[0].name)
        sinks = readers.get(layer.outputs[0].name, [])
        if source is not None and sinks and all(s.device != source.device for s in sinks):
            found.add(id(layer))
    return found


def _rolled(concat: ir.Node, shape_ops: frozenset[str]) -> ir.Value | None:
    """The tensor a Concat of its own slices copies (``torch.roll``, as a Swin's shifted windows
    export it: Slice + Slice + Concat), when nothing else reads that tensor or the slices; else
    None."""
    if concat.op_type != "Concat" or len(concat.inputs) < 2:
        return None
    slices = [v.producer() if v is not None else None for v in concat.inputs]
    sources = {s.inputs[0] for s in slices
               if s is not None and s.op_type == "Slice" and s.inputs}
    if len(sources) != 1 or any(s is None or s.op_type != "Slice" for s in slices):
        return None
    source = next(iter(sources))
    if source is None or any(len(list(v.uses())) != 1 for v in concat.inputs if v is not None):
        return None
    readers = {u.node for u in source.uses() if u.node.op_type not in shape_ops}
    return source if readers == set(slices) else None


def _dla_output(ctx: LintContext, dq: ir.Node) -> bool:
    """The third exception of the module docstring (through copies TensorRT elides, such as
    the Reshape a TensorFlow export puts between its last conv and the output)."""
    from qdqkit.trt.predict.ops import DATA_MOVEMENT

    if ctx.prediction.target != "dla" or not dq.outputs[0].is_graph_output():
        return False
    q = ctx.view.quantize_of(dq)
    source = q.inputs[0] if q is not None else None
    writer = source.producer() if source is not None else None
    layer = ctx.prediction.layer_of(writer) if writer is not None else None
    for _ in range(8):
        if layer is not None or writer is None or writer.op_type not in DATA_MOVEMENT:
            break
        source = _copied(ctx, writer.inputs[0] if writer.inputs else None)
        writer = source.producer() if source is not None else None
        layer = ctx.prediction.layer_of(writer) if writer is not None else None
    return layer is not None and layer.device == "DLA"


def _copied(ctx: LintContext, value: ir.Value | None) -> ir.Value | None:
    """What a copy copies: ``value``, or the tensor a Q/DQ pair in front of it dequantizes."""
    from qdqkit.core.qdq import is_dequantize

    producer = value.producer() if value is not None else None
    if producer is not None and is_dequantize(producer):
        q = ctx.view.quantize_of(producer)
        return q.inputs[0] if q is not None and q.inputs else None
    return value


def _skip_at_chain_end(ctx: LintContext, dq: ir.Node) -> bool:
    """The second exception of the module docstring."""
    from qdqkit.trt.engine import Precision

    residual = dq.outputs[0]
    for use in residual.uses():
        block = ctx.prediction.block_of(use.node)
        if (block is None or block.residual_add is not use.node
                or block.residual_input is not residual):
            continue
        layer = ctx.prediction.block_layer(block)
        if (layer is not None and layer.output_precision != Precision.INT8
                and not ctx.prediction.reformats_reading(layer)
                and ctx.skip_needed_in_int8(use.node, residual)):
            return True
    return False


def _weighted_input_after_float_math(ctx: LintContext, q: ir.Node) -> bool:
    """The exception of the module docstring (through a Pad in front of a conv too, C12)."""
    from qdqkit.core.qdq import is_dequantize, node_label
    from qdqkit.trt.engine import Precision
    from qdqkit.trt.placement import precision_sensitive, runs_float
    from qdqkit.trt.predict.ops import DATA_MOVEMENT, SHAPE_OPS

    facts = ctx.prediction.facts
    x = q.inputs[0]
    producer = x.producer() if x is not None else None
    # A Pad copies too (a Swin window partition pads by amounts computed from the input's
    # shape): a Q after it is no more absorbable than one after a Reshape.
    copies = DATA_MOVEMENT | {"Pad"}
    for _ in range(8):  # TensorRT moves a Q back across copies (B1, B3): judge what they copy
        rolled = _rolled(producer, SHAPE_OPS) if producer is not None else None
        if rolled is not None:
            producer = rolled.producer()
            continue
        if producer is None or producer.op_type not in copies or not producer.inputs:
            break
        source = producer.inputs[0]
        # A Shape reads no value: a copy that Shapes read too is still the only reader.
        if source is None or sum(1 for u in source.uses()
                                 if u.node.op_type not in SHAPE_OPS) != 1:
            break
        producer = source.producer()
    block = ctx.prediction.block_of(producer) if producer is not None else None
    # A Cast is no math: a Q after one moves in front of it (B8, passes.input_cast_qdq).
    if block is None or not any(precision_sensitive(facts, n) or node_label(n) in ctx.kept_float
                                or (runs_float(n) and n.op_type != "Cast")
                                for n in block.nodes):
        return False
    dqs = [u.node for u in q.outputs[0].uses()]
    if not dqs or not all(is_dequantize(dq) and not dq.outputs[0].is_graph_output() for dq in dqs):
        return False
    # A Shape reads only the shape: it may read the DQ's output too (trt.placement does so).
    readers = [(u.node, dq.outputs[0]) for dq in dqs for u in dq.outputs[0].uses()
               if u.node.op_type not in SHAPE_OPS]
    for reader, value in readers:
        if reader.op_type == "Pad" and len(list(reader.outputs[0].uses())) == 1:
            value = reader.outputs[0]
            reader = next(iter(value.uses())).node
        index = ctx.view.activation_index(reader) if reader in facts.weighted else None
        layer = ctx.prediction.layer_of(reader)
        if index is None or reader.inputs[index] is not value or layer is None \
                or layer.precision != Precision.INT8:
            return False
    return bool(readers)
