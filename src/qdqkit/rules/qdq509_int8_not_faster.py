"""QDQ509: the Q/DQ model is predicted no faster than the same model built FP16.

Both engines are timed by the latency cost model (``trt.cost_model``) on the ``--gpu`` of the
run; the finding names the layers that cost the most and the time spent in Reformats. Not
reported for a model with Q/DQ in other types than INT8: their layers are predicted in float
(QDQ411), so the comparison would time an engine TensorRT does not build.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ509",
        name="int8-not-faster",
        severity=Severity.WARNING,
        summary="INT8 is predicted no faster than FP16",
        why=(
            "Q/DQ placements that leave INT8 layers writing float, with standalone Quantize "
            "Reformats between them, pay for the conversions more than INT8 math saves: the "
            "engine can be slower than the plain FP16 build (ResNet-18 plain QAT on an A100: "
            "0.883 ms against 0.862 ms FP16)."
        ),
        what_to_do=(
            "Quantize the residual (skip) inputs and pooling inputs too, so INT8 layers write "
            "INT8 and the Reformats go; or deploy the FP16 build."
        ),
        fixable=False,
        rule_id="K3",
        how_it_checks=(
            "Times the predicted engine and the same graph without Q/DQ built FP16 with the "
            "latency cost model on the --gpu given (A100 by default); warns when the first is not "
            "faster."
        ),
    ),
)

fix: Fix | None = None

_NAMED = 3


def check(ctx: LintContext) -> Iterator[Finding]:
    latency = ctx.latency
    if latency is None or ctx.view.qdq_count == 0 or latency.speedup > 1.0:
        return
    if ctx.other_type_qdq:
        return  # FP8/INT4/FP4 layers are predicted float (QDQ411): the timing says nothing
    as_is, fp16 = latency.as_is, latency.fp16
    reformat_ms = sum(t.time_ms for t in as_is.layers if t.kind == "Reformat")
    costliest = as_is.costliest(_NAMED)
    named = ", ".join(f"'{t.layer}' {t.time_ms * 1e3:.0f} us" for t in costliest)
    yield Finding(
        code="QDQ509", severity=Severity.WARNING,
        message=(f"predicted {as_is.total_ms:.3f} ms with Q/DQ against {fp16.total_ms:.3f} ms "
                 f"built FP16 on {latency.gpu}: INT8 is not faster; costliest layers: {named}"),
        layers=[t.layer for t in costliest],
        cost=f"{reformat_ms * 1e3:.0f} us in Reformat layers",
    )
