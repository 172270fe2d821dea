"""QDQ107: Pad -> Q -> DQ -> Conv, which keeps the Pad from folding into the conv (C12)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity, replace_by_placement

if TYPE_CHECKING:

    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ107",
        name="qdq-between-pad-and-conv",
        severity=Severity.ERROR,
        summary="Q/DQ between a Pad and the Conv it pads",
        why=(
            "Pad folds into the convolution only when it directly feeds it; Q/DQ in between keeps "
            "a separate padding layer and a Reformat."
        ),
        what_to_do="Move the Q/DQ in front of the Pad (Pad commutes with quantization).",
        fixable=True,
        rule_id="C12",
        how_it_checks="A Pad's output is quantized by a Q whose DQ feeds a Conv.",
    ),
)


fix: Fix | None = replace_by_placement


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label

    for node in ctx.view.weighted_nodes:
        if node.op_type not in ("Conv", "ConvTranspose") or not node.inputs:
            continue
        base, pair = ctx.unwrap_qdq(node.inputs[0])
        pad = base.producer() if base is not None and pair else None
        if pad is not None and pad.op_type == "Pad":
            layer = ctx.prediction.layer_of(pad)
            yield ctx.finding(
                "QDQ107", f"'{node_label(pair[0])}'/'{node_label(pair[1])}' between Pad "
                f"'{node_label(pad)}' and {node.op_type} '{node_label(node)}'",
                nodes=[node_label(pad), *(node_label(n) for n in pair), node_label(node)],
                cost=f"Pad stays a separate layer ({layer.precision if layer else 'float'}) plus "
                "a Quantize Reformat",
            )
