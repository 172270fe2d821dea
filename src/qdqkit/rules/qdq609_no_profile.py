"""QDQ609 (no-profile): the engine has no per-layer timing, so the report cannot say where time goes (K1)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.engine_context import EngineContext

RULES = (
    Rule(
        code="QDQ609",
        name="no-profile",
        severity=Severity.INFO,
        summary="no per-layer timing was given",
        why="Without a profile the report counts layers but cannot rank them by time.",
        what_to_do="Pass --profile ENGINE.profile.json (trtexec --exportProfile).",
        fixable=False,
        rule_id="K1",
        how_it_checks="No layer of the engine has a latency.",
        scope="engine",
    ),
)

fix: Fix | None = None


def check(ctx: EngineContext) -> Iterator[Finding]:
    if ctx.graph.total_latency_ms() is None:
        yield Finding(
            code="QDQ609", severity=Severity.INFO,
            message="no per-layer timing: pass --profile ENGINE.profile.json (trtexec "
            "--exportProfile) to see where the time goes",
        )
