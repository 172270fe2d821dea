"""QDQ301, QDQ302: the scales and precisions around a Concat (C11, B4, E3).

1. QDQ302: INT8 and float inputs mixed: the Concat runs float and every INT8 input is dequantized.
2. QDQ301: all inputs INT8 but inputs and output carry more than one scale: each input at another
   scale is requantized.
One check: a Concat is either mixed or all-INT8, never both.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity, replace_by_placement

if TYPE_CHECKING:

    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ301",
        name="concat-scale-mismatch",
        severity=Severity.WARNING,
        summary="Concat inputs and output have different scales",
        why=(
            "Concat is elided only when every input already has the output's scale; each other "
            "input gets its own requantize Reformat."
        ),
        what_to_do="Give all Concat inputs and the Concat output one shared scale.",
        fixable=True,
        rule_id="C11, B4, E3",
        how_it_checks=(
            "A Concat whose inputs come through DQ (or whose output goes to Q) with more than one "
            "scale."
        ),
    ),
    Rule(
        code="QDQ302",
        name="concat-mixed-precision",
        severity=Severity.ERROR,
        summary="a Concat mixes INT8 and float inputs",
        why=(
            "A Concat with one float input is computed in float: every INT8 input is dequantized "
            "(a Reformat each) and the INT8 region breaks."
        ),
        what_to_do="Quantize every Concat input (one shared scale) or none.",
        fixable=True,
        rule_id="C11",
        how_it_checks=(
            "A Concat with at least one input through DQ and at least one computed float input."
        ),
    ),
)


fix: Fix | None = replace_by_placement


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label

    prediction = ctx.prediction
    for node in ctx.nodes_of("Concat"):
        if node in prediction.facts.folded_nodes:
            continue
        inputs = [v for v in node.inputs if v is not None and not ctx.is_constant(v)]
        sources = [prediction.int8_of(v) for v in inputs]
        quantized = [v for v, s in zip(inputs, sources, strict=False) if s is not None]
        if not quantized:
            continue
        if len(quantized) < len(inputs):
            floats = [v.name or "" for v, s in zip(inputs, sources, strict=False) if s is None]
            reformats = ctx.reformats_of(ctx.dq_of(v) for v in quantized)
            yield ctx.reformat_finding(
                "QDQ302", f"Concat '{node_label(node)}': {len(quantized)} INT8 and {len(floats)} "
                f"float inputs ({', '.join(floats[:3])})", node, reformats,
                tensors=floats, consequence="the Concat runs float",
            )
            continue
        found = {s.scale for s in sources if s is not None} | ctx.quantizer_scales(node.outputs[0])
        scales = {s for s in found if s is not None}
        if len(scales) > 1:
            requant = prediction.requantizes_for(node)
            if not requant:
                requant = ctx.reformats_of(ctx.dq_of(v) for v in quantized)
            shown = ", ".join(f"{s:.6g}" for s in sorted(scales))
            yield ctx.reformat_finding(
                "QDQ301", f"Concat '{node_label(node)}': {len(scales)} different scales ({shown})",
                node, requant, tensors=[v.name or "" for v in quantized],
            )
