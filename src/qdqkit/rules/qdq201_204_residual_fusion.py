"""QDQ201, QDQ204: the skip input of a residual Add fused into an INT8 conv (C3, C4, D4).

1. QDQ201: the skip input is float, so the fused block writes float and the next Q cannot fuse
   (a Reformat reads the block). With no Q after the block its float output costs nothing.
2. QDQ204: the skip input is INT8 but nothing after the block is quantized, so it is dequantized
   by a standalone Reformat. Not when the skip's writer writes it in INT8 for other INT8 readers
   too (the last block of a residual chain that ends in float math): with a float skip that
   writer would have to write float as well, so the Reformat would only move.
A float conv is skipped: its skip input costs nothing more (QDQ101/QDQ102 say why). One check:
both read the predicted layer of the same fused block (``LintContext.predicted_blocks``).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity, replace_by_placement

if TYPE_CHECKING:
    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ201",
        name="residual-skip-float",
        severity=Severity.ERROR,
        summary="a residual Add fused into a conv has a float skip (identity) input",
        why=(
            "The fused Conv+Add(+ReLU) takes its output precision from the skip input: the block "
            "writes FP16 and the next Q cannot fuse (a Quantize Reformat)."
        ),
        what_to_do=(
            "Quantize the skip input (Q/DQ on the identity branch, same scale as its other "
            "readers)."
        ),
        fixable=True,
        rule_id="C3, D4",
        how_it_checks=(
            "A predicted INT8 conv layer fused a residual Add whose residual input is float, and "
            "a Quantize Reformat reads the layer."
        ),
    ),
    Rule(
        code="QDQ204",
        name="residual-int8-output-float",
        severity=Severity.WARNING,
        summary="a residual block has an INT8 skip input but nothing after it is quantized",
        why=(
            "TensorRT dequantizes the skip input in a standalone Reformat and the block writes "
            "float."
        ),
        what_to_do=(
            "Quantize the block's consumer too (e.g. the pool input), or drop the skip Q/DQ "
            "there."
        ),
        fixable=True,
        rule_id="C4",
        how_it_checks=(
            "A predicted conv layer fused a residual Add whose INT8 residual input was "
            "dequantized."
        ),
    ),
)


fix: Fix | None = replace_by_placement


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label
    from qdqkit.rules.model_context import module_label
    from qdqkit.trt.engine import Precision

    prediction = ctx.prediction
    for found in ctx.predicted_blocks(weighted=True):
        block, layer = found.block, found.layer
        add, residual = block.residual_add, block.residual_input
        if add is None or residual is None or not found.int8_compute:
            continue
        label = module_label(block)
        if prediction.int8_of(residual) is None:
            after = prediction.reformats_reading(layer)
            if not after:
                continue  # nothing after the block wants INT8: its float output costs nothing
            yield ctx.reformat_finding(
                "QDQ201", f"Add '{node_label(add)}': skip input '{residual.name}' is float",
                add, after, tensors=[residual.name or ""],
                consequence=f"block {label} writes {layer.output_precision}",
            )
        elif layer.output_precision != Precision.INT8 and not ctx.skip_needed_in_int8(add, residual):
            layers = ctx.reformats_of([ctx.dq_of(residual)])
            yield ctx.reformat_finding(
                "QDQ204", f"Add '{node_label(add)}': skip input '{residual.name}' is INT8 but the "
                "block's readers are float", add, layers, tensors=[residual.name or ""],
                consequence=f"block {label} writes {layer.output_precision}",
            )

