"""QDQ304: an averaging pool predicted float between an INT8 producer and an INT8 reader (C9).

A ReduceMean is a pool only over the spatial axes (2 and up) of an NCHW-like tensor, and never
as a normalization's statistic (a LayerNorm's mean over the last axis of tokens is not a pool).

Averaging pools do not commute with Q/DQ: without DQ before and Q after they run float with a
Reformat on each side.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity, replace_by_placement

if TYPE_CHECKING:

    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ304",
        name="float-pool-between-int8",
        severity=Severity.WARNING,
        summary="an AveragePool/GlobalAveragePool runs float between INT8 layers",
        why=(
            "Averaging pools do not commute with Q/DQ: without DQ before and Q after, the pool "
            "runs FP16 with a Reformat on each side."
        ),
        what_to_do="Put Q/DQ on the pool's input (and keep the Q after it).",
        fixable=True,
        rule_id="C9",
        how_it_checks=(
            "A predicted averaging-pool layer (AveragePool, GlobalAveragePool, a ReduceMean over "
            "spatial axes that is no normalization statistic) runs float while its producer "
            "computes INT8 and its reader wants INT8."
        ),
    ),
)


fix: Fix | None = replace_by_placement


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label

    prediction = ctx.prediction
    for found in ctx.predicted_blocks(weighted=False):
        anchor, layer = found.anchor, found.layer
        source = anchor.inputs[0] if anchor.inputs else None
        if found.int8_compute or source is None or not ctx.is_spatial_pool(anchor):
            continue
        if prediction.int8_of(source) is not None or not all(ctx.int8_around(source, anchor)):
            continue  # with float on one side, the float pool costs no Reformat
        after = prediction.reformats_reading(layer)
        yield ctx.reformat_finding(
            "QDQ304", f"{anchor.op_type} '{node_label(anchor)}' is not quantized between INT8 "
            "layers", anchor, after, tensors=[source.name or ""],
            consequence=f"the pool runs {layer.precision}",
        )
