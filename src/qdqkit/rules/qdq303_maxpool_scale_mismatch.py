"""QDQ303: the Qs before and after a MaxPool disagree on the scale (C10, B4).

MaxPool commutes with Q/DQ, so the INT8 tensor is shared across it only when the Q after it and
the Qs (or the DQ) on its input have one scale.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity, replace_by_placement

if TYPE_CHECKING:

    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ303",
        name="maxpool-scale-mismatch",
        severity=Severity.WARNING,
        summary=(
            "the Q after a MaxPool and the Qs of its input's other readers have different scales"
        ),
        why=(
            "MaxPool commutes with Q/DQ; the quantized tensor is shared only if all the Qs agree, "
            "otherwise a requantize or a second Quantize Reformat appears."
        ),
        what_to_do="Use one scale for the Q after the MaxPool and the Qs on the MaxPool's input.",
        fixable=True,
        rule_id="C10, B4",
        how_it_checks=(
            "A MaxPool's input tensor and its output are each quantized (directly) with different "
            "scales."
        ),
    ),
)


fix: Fix | None = replace_by_placement


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label

    for node in ctx.nodes_of("MaxPool"):
        if not node.inputs or node.inputs[0] is None:
            continue
        x = node.inputs[0]
        inside = ctx.quantizer_scales(x)
        dq = ctx.dq_of(x)
        if dq is not None:
            inside.add(ctx.scale(dq))
            q = ctx.view.quantize_of(dq)
            if q is not None and q.inputs[0] is not None:
                inside |= ctx.quantizer_scales(q.inputs[0])
        before = {s for s in inside if s is not None}
        after = {s for s in ctx.quantizer_scales(node.outputs[0]) if s is not None}
        if before and after and len(before | after) > 1:
            shown = ", ".join(f"{s:.6g}" for s in sorted(before | after))
            readers = ctx.activation_quantizers(node.outputs[0])
            yield ctx.finding(
                "QDQ303", f"MaxPool '{node_label(node)}': scales before and after differ ({shown})",
                nodes=[node_label(node), *(node_label(q) for q in readers)],
                tensors=[x.name or "", node.outputs[0].name or ""],
                cost="+1 requantize Reformat (the INT8 tensor cannot be shared)",
            )
