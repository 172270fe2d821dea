"""QDQ607 (reformat-next-to-qdq): a layout Reformat beside a Q/DQ Reformat (E4, E5).

The tensor is converted twice in a row, once for the layout and once for the precision.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.engine_context import EngineContext

RULES = (
    Rule(
        code="QDQ607",
        name="reformat-next-to-qdq",
        severity=Severity.WARNING,
        summary="a layout Reformat sits next to a Q/DQ Reformat",
        why="The tensor is converted twice in a row: once for the precision, once for the layout.",
        what_to_do="Move the Q/DQ so it fuses; that usually removes both Reformats.",
        fixable=False,
        rule_id="E4, E5",
        how_it_checks="A Reformat not made from Q/DQ whose producer or reader is a Q/DQ Reformat.",
        scope="engine",
    ),
)

fix: Fix | None = None


def check(ctx: EngineContext) -> Iterator[Finding]:
    beside = [r for r in ctx.reformats if r.next_to_qdq]
    if beside:
        yield Finding(
            code="QDQ607", severity=Severity.WARNING,
            message=f"{ctx.counted(len(beside), 'layout Reformat', 'sit')} next to a Q/DQ "
            "Reformat: the tensor is converted twice in a row; moving the Q/DQ so it fuses "
            "usually removes both",
            layers=[r.name for r in beside],
            latency_ms=sum(r.latency_ms or 0.0 for r in beside) or None,
        )
