"""QDQ503: in a strongly typed build (TensorRT 11), unquantized layers run FP32 (A9).

Reported once for all of them, naming the first node of up to 20 layers.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ503",
        name="fp32-remainder",
        severity=Severity.WARNING,
        summary="strongly typed build: unquantized layers run FP32",
        why=(
            "TensorRT 11 builds strongly typed: layers without Q/DQ run in the model's float "
            "type, so an FP32 model keeps FP32 layers that --best would have run FP16."
        ),
        what_to_do="Convert the float part to FP16 (e.g. ModelOpt AutoCast) before building.",
        fixable=False,
        rule_id="A9",
        how_it_checks="With --trt 11, predicted non-Reformat layers whose precision is FP32.",
    ),
)

fix: Fix | None = None


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.text import plural
    from qdqkit.trt.engine import Precision

    prediction = ctx.prediction
    if not prediction.strongly_typed:
        return
    fp32 = [layer for layer in prediction.engine.layers
            if not layer.is_reformat and layer.precision == Precision.FP32]
    if fp32:
        yield ctx.finding(
            "QDQ503", f"{plural(len(fp32), 'layer')} run FP32 in a strongly typed build",
            nodes=[n for layer in fp32[:20] for n in layer.onnx_nodes[:1]],
            cost=f"{plural(len(fp32), 'FP32 layer')} that --best would have run FP16")
