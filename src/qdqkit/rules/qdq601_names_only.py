"""QDQ601 (names-only): the export has layer names only, so kinds are guessed and precisions unknown (K1)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.engine_context import EngineContext

RULES = (
    Rule(
        code="QDQ601",
        name="names-only",
        severity=Severity.WARNING,
        summary="the engine export has layer names only",
        why=(
            "Without --profilingVerbosity=detailed, trtexec exports names but no kinds, tensors "
            "or precisions: every figure derived from them is a guess."
        ),
        what_to_do="Rebuild with trtexec --profilingVerbosity=detailed --exportLayerInfo=...",
        fixable=False,
        rule_id="K1",
        how_it_checks="The layer-info JSON lists layers as plain names.",
        scope="engine",
    ),
)

fix: Fix | None = None


def check(ctx: EngineContext) -> Iterator[Finding]:
    if ctx.names_only:
        yield Finding(
            code="QDQ601", severity=Severity.WARNING,
            message="the export has layer names only, so kinds are guessed and precisions "
            "unknown; rebuild with trtexec --profilingVerbosity=detailed --exportLayerInfo=...",
        )
