"""QDQ602 (profile-mismatch): profile records that name no layer of the engine (K1).

A profile whose records mostly name no layer is of another engine and is refused when it is read
(``trt.engine_profile.refuse_foreign_profile``); this rule reports the rest: a profile that times
this engine but whose records, up to half of them, name layers the graph does not list.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.engine_context import EngineContext

RULES = (
    Rule(
        code="QDQ602",
        name="profile-mismatch",
        severity=Severity.WARNING,
        summary="per-layer profile records name layers the engine does not have",
        why=(
            "A profile from another build times other layers: the time shown per layer would be "
            "wrong."
        ),
        what_to_do="Export the layer info and the profile from the same trtexec run.",
        fixable=False,
        rule_id="K1",
        how_it_checks=(
            "A record of the --exportProfile JSON matches no layer name of the layer-info JSON."
        ),
        scope="engine",
    ),
)

fix: Fix | None = None


def check(ctx: EngineContext) -> Iterator[Finding]:
    from qdqkit.core.text import plural

    unmatched = ctx.graph.metadata.get("unmatched_profile_records") or []
    if unmatched:
        yield Finding(
            code="QDQ602", severity=Severity.WARNING,
            message=f"{plural(len(unmatched), 'profile record')} name no layer of this engine "
            f"(first: {unmatched[0]!r}); were the two files exported from the same build?",
            layers=list(unmatched),
        )
