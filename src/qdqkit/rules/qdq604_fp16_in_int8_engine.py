"""QDQ604 (fp16-in-int8-engine): compute layers running FP16/BF16 in an engine that has INT8 layers."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.engine_context import EngineContext

RULES = (
    Rule(
        code="QDQ604",
        name="fp16-in-int8-engine",
        severity=Severity.INFO,
        summary="layers run FP16/BF16 in an INT8 engine",
        why=(
            "Layers outside the quantized region run in half precision: fine for small layers, a "
            "lost speed-up for large ones."
        ),
        what_to_do="Quantize their inputs if they matter for speed.",
        fixable=False,
        rule_id="A9, D8",
        how_it_checks=(
            "The engine has an INT8 compute layer and some compute layer reads FP16 or BF16."
        ),
        scope="engine",
    ),
)

fix: Fix | None = None


def check(ctx: EngineContext) -> Iterator[Finding]:
    from qdqkit.trt.engine import Precision
    from qdqkit.trt.engine_analysis import latency_sum

    if not ctx.quantized:
        return
    fp16 = [la for la in ctx.compute if la.precision in (Precision.FP16, Precision.BF16)]
    if fp16:
        yield Finding(
            code="QDQ604", severity=Severity.INFO,
            message=f"{ctx.counted(len(fp16), 'layer', 'run')} in FP16/BF16 in an INT8 engine; "
            "quantize their inputs if they matter for speed",
            layers=[layer.name for layer in fp16], latency_ms=latency_sum(fp16),
        )
