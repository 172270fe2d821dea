"""QDQ404, QDQ405, QDQ406: how each quantized activation tensor is quantized (B6-B8, E3, E7).

1. QDQ406: a Q on a network input has nothing earlier to fuse into.
2. QDQ405: a DQ feeds a Q: equal scales cancel (info), different scales requantize.
3. QDQ404: several Qs on one tensor: one scale merges (info), several cost Quantize Reformats.
One check: all three walk the activation Qs once, in graph order.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity, replace_by_placement

if TYPE_CHECKING:

    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ404",
        name="several-q-on-one-tensor",
        severity=Severity.WARNING,
        summary="several Q nodes quantize one tensor",
        why=(
            "Qs with the same scale merge; with different scales each one is a separate Quantize "
            "(Reformat) and the producer cannot write INT8 for all readers."
        ),
        what_to_do="Quantize a tensor once and let every reader share the Q/DQ.",
        fixable=True,
        rule_id="B7",
        how_it_checks=(
            "A tensor read by more than one activation Q; error-free (info) when the scales are "
            "equal."
        ),
    ),
    Rule(
        code="QDQ405",
        name="requantize-chain",
        severity=Severity.WARNING,
        summary="a DQ is immediately followed by a Q",
        why=(
            "DQ->Q with equal scales cancels; with different scales an INT8->INT8 requantize "
            "layer remains."
        ),
        what_to_do="Remove the pair, or make the scales equal.",
        fixable=True,
        rule_id="B6, E3",
        how_it_checks="A DequantizeLinear whose output feeds a QuantizeLinear.",
    ),
    Rule(
        code="QDQ406",
        name="q-on-network-input",
        severity=Severity.INFO,
        summary="a network input is quantized",
        why=(
            "There is nothing earlier to fuse the Q into: it runs as a standalone Reformat unless "
            "the input is declared INT8 (trtexec --inputIOFormats=int8:chw32)."
        ),
        what_to_do="Nothing, or feed INT8 input with --inputIOFormats.",
        fixable=False,
        rule_id="B8, E7",
        how_it_checks="A Q whose input is a graph input.",
    ),
)


fix: Fix | None = replace_by_placement


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label

    seen: set[object] = set()
    for q in ctx.view.activation_quantizers():
        x = q.inputs[0]
        if x is None:
            continue
        if x.is_graph_input():
            yield ctx.finding(
                "QDQ406", f"'{node_label(q)}' quantizes network input '{x.name}'",
                nodes=[node_label(q)], tensors=[x.name or ""],
                cost=ctx.reformat_cost(ctx.reformats_of([q])),
            )
        dq = ctx.dq_of(x)
        if dq is not None:
            equal = ctx.scale(dq) == ctx.scale(q) and ctx.scale(q) is not None
            finding = ctx.finding(
                "QDQ405", f"'{node_label(dq)}' -> '{node_label(q)}' "
                + ("with equal scales (cancels)" if equal else "requantizes to another scale"),
                nodes=[node_label(dq), node_label(q)], tensors=[x.name or ""],
                cost="none" if equal else "+1 requantize layer",
            )
            if equal:
                finding.severity = Severity.INFO
            yield finding
        if x in seen:
            continue
        seen.add(x)
        quantizers = ctx.activation_quantizers(x)
        if len(quantizers) < 2:
            continue
        scales = {ctx.scale(n) for n in quantizers}
        names = [node_label(n) for n in quantizers]
        if len(scales) == 1 and None not in scales:
            finding = ctx.finding(
                "QDQ404", f"'{x.name}' has {len(quantizers)} Q nodes with one scale",
                nodes=names, tensors=[x.name or ""], cost="none: TensorRT merges them",
            )
            finding.severity = Severity.INFO
        else:
            distinct = len(scales)
            finding = ctx.finding(
                "QDQ404", f"'{x.name}' has {len(quantizers)} Q nodes with {distinct} scales",
                nodes=names, tensors=[x.name or ""],
                cost=f"up to +{distinct - 1} Quantize Reformat layers; the producer writes float",
            )
        yield finding
