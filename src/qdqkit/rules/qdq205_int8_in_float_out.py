"""QDQ205: a non-weighted layer predicted float although an input comes through DQ (C8, D5).

Non-weighted layers run INT8 only when their output is quantized too; otherwise each input DQ is a
Reformat. Plugins (their own rule) and Concats (QDQ301/QDQ302) are left out.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity, replace_by_placement

if TYPE_CHECKING:

    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ205",
        name="int8-in-float-out",
        severity=Severity.WARNING,
        summary="a non-weighted op has INT8 inputs but a float output",
        why=(
            "Non-weighted layers run INT8 only when their output is quantized too; otherwise "
            "every input DQ becomes a Reformat and the op runs FP16."
        ),
        what_to_do="Quantize the op's output (a Q/DQ after it), or remove the Q/DQ on its inputs.",
        fixable=True,
        rule_id="D5, C8",
        how_it_checks=(
            "A predicted pointwise/pooling/other layer runs float although one of its inputs is a "
            "DQ."
        ),
    ),
)


fix: Fix | None = replace_by_placement


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label
    from qdqkit.trt.engine import LayerKind

    for found in ctx.predicted_blocks(weighted=False):
        layer, anchor = found.layer, found.anchor
        if found.int8_compute or layer.kind == LayerKind.CONCATENATION:
            continue
        dqs = ctx.dequantized_inputs(found.block)
        if not dqs:
            continue
        yield ctx.finding(
            "QDQ205", f"{anchor.op_type} '{node_label(anchor)}' reads INT8 but its output is not "
            "quantized",
            nodes=[node_label(n) for n in found.block.nodes] + [node_label(d) for d in dqs],
            cost=ctx.reformat_cost(ctx.reformats_of(dqs), f"'{layer.name}' runs {layer.precision}"),
        )
