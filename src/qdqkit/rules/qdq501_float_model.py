"""QDQ501: the model has no QuantizeLinear/DequantizeLinear, so TensorRT builds it in float (A9)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ501",
        name="float-model",
        severity=Severity.INFO,
        summary="the model has no Q/DQ nodes",
        why="Nothing is quantized: TensorRT builds an FP16 (or FP32) engine.",
        what_to_do="Quantize it (qdqkit quantize, ModelOpt, ...) to get INT8.",
        fixable=False,
        rule_id="A9",
        how_it_checks="The graph has no QuantizeLinear/DequantizeLinear.",
    ),
)

fix: Fix | None = None


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.text import plural

    if ctx.view.qdq_count == 0:
        layers = ctx.prediction.engine.layers
        yield ctx.finding("QDQ501", "no QuantizeLinear/DequantizeLinear: this is a float model",
                          cost=f"all {plural(len(layers), 'layer')} run float")
