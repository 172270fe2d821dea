"""QDQ103, QDQ104: a Q/DQ pair inside a weighted op's epilogue (C2, D2, D3).

1. QDQ103: the weighted op's own output goes through Q -> DQ into BatchNorm, an activation, or
   a bias or scale op (an Add, Sub, Mul or Div with a constant operand, as exporters that keep
   the bias out of the conv write it), no-op copies (Identity, Dropout) in between passed.
2. QDQ104: a later point of the fused chain (after BN or bias) does.
Either way the epilogue runs as a separate layer. One check: the two differ only by where the
chain was cut. A chain that ends in a pool (ConvActPool, C10) takes no further epilogue, so a
BatchNorm or activation after it starts a layer of its own with or without the Q/DQ. Not for
DLA, whose implicit build takes the pair as the tensor's range and fuses across it (I1).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity, replace_by_placement

if TYPE_CHECKING:
    import onnx_ir as ir

    from qdqkit.rules.model_context import LintContext
    from qdqkit.trt.predict.fusion import Block

RULES = (
    Rule(
        code="QDQ103",
        name="q-on-weighted-output",
        severity=Severity.ERROR,
        summary=(
            "a Q sits on a weighted op's output before its BatchNorm, bias, activation or "
            "residual Add"
        ),
        why=(
            "The Q splits the conv from its epilogue: BN/activation/Add run as a separate layer "
            "and the conv writes INT8 that is immediately dequantized."
        ),
        what_to_do=(
            "Remove the Q/DQ between the weighted op and its epilogue; quantize after the "
            "activation (the next layer's input) instead."
        ),
        fixable=True,
        rule_id="D2, C2",
        how_it_checks=(
            "A weighted op's output (possibly after BN/bias) goes to a Q whose DQ feeds "
            "BatchNormalization, an activation or a bias/scale op."
        ),
    ),
    Rule(
        code="QDQ104",
        name="qdq-inside-epilogue",
        severity=Severity.ERROR,
        summary="Q/DQ between BatchNorm and the activation of a conv",
        why=(
            "TensorRT fuses Conv+BN+activation only when nothing sits between them; a Q/DQ in the "
            "chain ends the fused kernel early and adds a pointwise layer."
        ),
        what_to_do="Drop the Q/DQ inside the chain; keep one Q after the activation.",
        fixable=True,
        rule_id="D3, C2",
        how_it_checks=(
            "A BatchNormalization output (of a conv chain) goes through Q/DQ into an activation."
        ),
    ),
)


# DLA builds implicitly and fuses across a range (I1).
TARGETS = ("gpu",)

fix: Fix | None = replace_by_placement


def _through_qdq(value: ir.Value) -> list[tuple[ir.Node, ir.Node, ir.Node]]:
    """(Q, DQ, reader) for every reader reached from ``value`` through one Q -> DQ pair."""
    from qdqkit.core.qdq import is_dequantize, is_quantize

    found = []
    for use in value.uses():
        q = use.node
        if not is_quantize(q) or use.idx != 0:
            continue
        for dq_use in q.outputs[0].uses():
            dq = dq_use.node
            if is_dequantize(dq):
                found += [(q, dq, reader.node) for reader in dq.outputs[0].uses()]
    return found


def _chain_would_take(ctx: LintContext, block: Block, value: ir.Value, reader: ir.Node) -> bool:
    """Whether the fused chain would take ``reader`` were the Q/DQ gone (``value`` stands for the
    chain's output): it alone reads it, or it is a SiLU pair, or a pointwise DAG a full conv or
    GEMM takes on the GPU. A depthwise conv stops at a shared tensor (C7), so a decomposed
    HardSwish after it is a PointWise layer of its own whose input Q/DQ belongs there."""
    from qdqkit.trt.predict.fusion import is_depthwise, silu_pair

    facts = ctx.prediction.facts
    readers = [use.node for use in value.uses()]
    if readers == [reader] and not value.is_graph_output():
        return True
    if silu_pair(facts, value) is not None:
        return True
    return facts.generic_epilogues and block.weighted is not None and not is_depthwise(block.weighted)


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label
    from qdqkit.trt.predict.fusion import is_epilogue_op
    from qdqkit.trt.predict.ops import ACTIVATIONS, POOLS, is_default_domain

    epilogue_ops = ACTIVATIONS | {"BatchNormalization"}
    facts = ctx.prediction.facts
    for block in ctx.prediction.blocks:
        if block.weighted is None or block.last.op_type in POOLS:
            continue
        value = block.output
        for q, dq, first in _through_qdq(value):
            # Past the no-op copies an exporter leaves (paddle2onnx's Identity after each op).
            reader, read = ctx.past_copies(first, dq.outputs[0])
            if not is_default_domain(reader) or not (
                    reader.op_type in epilogue_ops or is_epilogue_op(facts, reader, read)):
                continue  # is_epilogue_op: a bias or scale op with a constant operand too
            if not _chain_would_take(ctx, block, read, reader):
                continue
            code = "QDQ103" if block.last is block.weighted else "QDQ104"
            split = ctx.prediction.layer_of(reader)
            cost = "the epilogue runs as a separate layer"
            if split is not None:
                cost = f"+1 layer '{split.name}' ({split.precision})"
            yield ctx.finding(
                code,
                f"'{node_label(q)}'/'{node_label(dq)}' between '{node_label(block.last)}' and "
                f"{reader.op_type} '{node_label(reader)}'",
                nodes=[node_label(q), node_label(dq), node_label(reader)],
                tensors=[value.name or ""], cost=cost,
            )
