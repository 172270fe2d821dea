"""QDQ106: a quantized ConvTranspose whose fused chain holds an activation (C13).

Explicit-mode ConvTranspose + activation fusion has been reported to fail, so the prediction that
it fuses is worth verifying on a real engine. GPU only: DLA builds the model through ``translate``,
in implicit mode, where the reports do not apply.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ106",
        name="convtranspose-activation",
        severity=Severity.WARNING,
        summary="a ConvTranspose is followed by an activation",
        why=(
            "Explicit-mode ConvTranspose+activation fusion has been reported to fail (no fusion "
            "or wrong output) and INT8 deconvolution can be slower than FP16."
        ),
        what_to_do=(
            "Verify the engine (qdqkit lint --engine); if the deconv is not fused, try Q/DQ "
            "between the deconv and the activation, or keep the deconv FP16."
        ),
        fixable=False,
        rule_id="C13",
        how_it_checks="A ConvTranspose's epilogue chain (after BN) contains an activation.",
    ),
)

TARGETS = ("gpu",)

fix: Fix | None = None


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label
    from qdqkit.trt.predict.ops import ACTIVATIONS

    for block in ctx.prediction.blocks:
        if block.weighted is None or block.weighted.op_type != "ConvTranspose":
            continue
        acts = [n for n in block.nodes if n.op_type in ACTIVATIONS]
        quantized = block.weight is not None and block.weight.quantized
        if acts and quantized:
            yield ctx.finding(
                "QDQ106", f"ConvTranspose '{node_label(block.weighted)}' + {acts[0].op_type} "
                f"'{node_label(acts[0])}'", nodes=[node_label(block.weighted), node_label(acts[0])],
                cost="predicted fused; reported unfused on TensorRT 10.x -- verify on an engine",
            )
