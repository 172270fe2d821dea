"""QDQ503: in a strongly typed build (TensorRT 11), unquantized layers run FP32 (A9).

1. Reported once for all of them, naming the first node of up to 20 layers.
2. Only when no layer outside the Q/DQ runs FP16: once part of the float remainder is FP16, the
   model was converted, and the layers left FP32 are the converter's choice (``quantize`` and
   AutoCast keep FP32 what would overflow FP16, such as LayerNorm's sums of squares).
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
        how_it_checks=(
            "With --trt 11, predicted non-Reformat layers whose precision is FP32, when none "
            "runs FP16 (a partly FP16 model keeps FP32 on purpose)."
        ),
    ),
)

fix: Fix | None = None


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.text import plural
    from qdqkit.trt.engine import Precision

    prediction = ctx.prediction
    if not prediction.strongly_typed:
        return
    computing = [layer for layer in prediction.engine.layers if not layer.is_reformat]
    fp32 = [layer for layer in computing if layer.precision == Precision.FP32]
    converted = any(layer.precision == Precision.FP16 for layer in computing)
    if fp32 and not converted:
        yield ctx.finding(
            "QDQ503", f"{plural(len(fp32), 'layer')} run FP32 in a strongly typed build",
            nodes=[n for layer in fp32[:20] for n in layer.onnx_nodes[:1]],
            cost=f"{plural(len(fp32), 'FP32 layer')} that --best would have run FP16")
