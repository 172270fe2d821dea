"""QDQ304: an averaging pool predicted float while its producer or its reader is INT8 (C9).

Averaging pools do not commute with Q/DQ: without DQ before and Q after they run float with a
Reformat on each side.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Rule, Severity

if TYPE_CHECKING:
    import onnx_ir as ir

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
            "A predicted averaging-pool layer runs float while its producer or its reader is "
            "INT8."
        ),
    ),
)


def fix(finding: Finding, model: ir.Model) -> bool:
    """Re-place the Q/DQ on the finding's nodes and tensors the way the one placement policy
    places them, with the scales the model carries (``passes.replace_qdq``)."""
    from qdqkit.passes.replace_qdq import repair_finding

    return repair_finding(finding, model)


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label
    from qdqkit.trt.engine import Precision
    from qdqkit.trt.predict.ops import AVERAGING_POOLS

    prediction = ctx.prediction
    for block in prediction.blocks:
        anchor = block.anchor
        layer = prediction.block_layer(block)
        source = anchor.inputs[0] if anchor.inputs else None
        if anchor.op_type not in AVERAGING_POOLS or layer is None or source is None:
            continue
        if layer.precision == Precision.INT8 or prediction.int8_of(source) is not None:
            continue
        producer = prediction.producer_layer(source)
        producer_cost = prediction.cost_of(producer) if producer is not None else None
        int8_before = producer_cost is not None and producer_cost.int8_compute
        int8_after = prediction.wanted_scale(anchor.outputs[0]) is not None
        if not (int8_before or int8_after):
            continue
        after = prediction.reformats_reading(layer)
        yield ctx.reformat_finding(
            "QDQ304", f"{anchor.op_type} '{node_label(anchor)}' is not quantized between INT8 "
            "layers", anchor, after, tensors=[source.name or ""],
            consequence=f"the pool runs {layer.precision}",
        )
