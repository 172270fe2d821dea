"""QDQ504: a Q/DQ model built for DLA, whose INT8 scales come from a calibration cache (I1, I2)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ504",
        name="qdq-on-dla",
        severity=Severity.WARNING,
        summary="DLA takes its INT8 scales from a calibration cache, not from Q/DQ",
        why=(
            "Through TensorRT 10, DLA's INT8 path is implicit: a Q/DQ model must be translated to "
            "a Q/DQ-free model plus a calibration cache, else DLA layers run FP16."
        ),
        what_to_do="Run qdqkit translate and build with --calib and --useDLACore.",
        fixable=False,
        rule_id="I1, I2",
        how_it_checks="--target dla on a model that has Q/DQ nodes.",
    ),
)

TARGETS = ("dla",)

fix: Fix | None = None


def check(ctx: LintContext) -> Iterator[Finding]:
    if ctx.view.qdq_count:
        yield ctx.finding("QDQ504", "Q/DQ model built for DLA",
                          cost="the INT8 DLA layers predicted here need the translated model "
                          "and cache (qdqkit translate); built from Q/DQ directly they run FP16")
