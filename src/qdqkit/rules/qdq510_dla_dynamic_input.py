"""QDQ510: with ``--target dla``, a network input has dynamic dimensions, and DLA builds for one
shape only (I5).

The DLA check then takes every dimension that is not a number as fixed by the build profile
(``trt.dla``), so the model is judged once here rather than at each layer; ``--shapes`` makes the
check exact, DLA's size limits included.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ510",
        name="dla-dynamic-input",
        severity=Severity.WARNING,
        summary="a network input has dynamic dimensions, and DLA builds for one shape only",
        why=(
            "DLA has no dynamic shapes: the engine's optimization profile must give each input one "
            "shape (min = opt = max), and the runtime shape must equal it."
        ),
        what_to_do=(
            "Build with trtexec --shapes for the shape you deploy, and lint with the same --shapes "
            "to check DLA's size limits at that shape."
        ),
        fixable=False,
        rule_id="I5",
        how_it_checks="--target dla: a graph input whose shape has a dimension that is not a number.",
    ),
)

TARGETS = ("dla",)

fix: Fix | None = None


def check(ctx: LintContext) -> Iterator[Finding]:
    for value in ctx.prediction.facts.dynamic_inputs:
        assert value.shape is not None
        dims = ", ".join(str(dim) if isinstance(dim, int) else (dim.value or "?")
                         for dim in value.shape)
        yield ctx.finding(
            "QDQ510",
            f"input '{value.name}' is [{dims}]: a DLA engine is built for one shape; build with "
            f"--shapes {value.name}:<its shape> (min = opt = max) and lint with the same --shapes; "
            "until then each dimension is taken as fixed by the build",
            tensors=[value.name or ""],
        )
