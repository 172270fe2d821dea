"""QDQ603 (fp32-in-int8-engine): compute layers running FP32 in an engine that has INT8 layers (A9)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.engine_context import EngineContext

RULES = (
    Rule(
        code="QDQ603",
        name="fp32-in-int8-engine",
        severity=Severity.WARNING,
        summary="layers run FP32 in an INT8 engine",
        why=(
            "FP32 kernels are the slowest TensorRT has; in an INT8 engine they usually mean a "
            "strongly typed build of an FP32 model, or layers left outside the quantized region."
        ),
        what_to_do=(
            "Quantize their inputs, or export the float part of the model in FP16 (TensorRT 11 "
            "has no --fp16)."
        ),
        fixable=False,
        rule_id="A9",
        how_it_checks="The engine has an INT8 compute layer and some compute layer reads FP32.",
        scope="engine",
    ),
)

fix: Fix | None = None


def check(ctx: EngineContext) -> Iterator[Finding]:
    from qdqkit.trt.engine import Precision
    from qdqkit.trt.engine_analysis import latency_sum

    if not ctx.quantized:
        return
    fp32 = [layer for layer in ctx.compute if layer.precision is Precision.FP32]
    if fp32:
        yield Finding(
            code="QDQ603", severity=Severity.WARNING,
            message=f"{ctx.counted(len(fp32), 'layer', 'run')} in FP32 in an INT8 engine: "
            "quantize their inputs, or export the float part of the model in FP16 (TensorRT 11 "
            "has no --fp16)",
            layers=[layer.name for layer in fp32], latency_ms=latency_sum(fp32),
        )
