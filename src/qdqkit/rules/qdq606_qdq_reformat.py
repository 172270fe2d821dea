"""QDQ606 (qdq-reformat): Reformat layers made from Q/DQ nodes TensorRT could not fuse (E1, E2, K2).

A single one is reported as info, several as a warning. One that quantizes a network input is
QDQ608's (it has a remedy of its own), not counted here as well.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.engine_context import EngineContext

RULES = (
    Rule(
        code="QDQ606",
        name="qdq-reformat",
        severity=Severity.WARNING,
        summary="Q/DQ nodes became standalone Reformat layers",
        why=(
            "A Q or DQ that cannot fuse into a neighbouring layer runs as its own Reformat: an "
            "extra pass over the tensor."
        ),
        what_to_do="Run qdqkit lint on the model to see which placement causes each one.",
        fixable=False,
        rule_id="E1, E2, K2",
        how_it_checks=("Reformat layers whose origin is QDQ (or whose name is a Q/DQ node's), "
                       "except those reading a network input (QDQ608)."),
        scope="engine",
    ),
)

fix: Fix | None = None


def check(ctx: EngineContext) -> Iterator[Finding]:
    from qdqkit.trt.engine_analysis import latency_sum

    inputs = {t.name for t in ctx.graph.inputs}
    qdq = [layer for layer in ctx.graph.qdq_reformats()
           if not any(t.name in inputs for t in layer.inputs)]
    if qdq:
        yield Finding(
            code="QDQ606", severity=Severity.WARNING if len(qdq) > 1 else Severity.INFO,
            message=f"{ctx.counted(len(qdq), 'Reformat layer')} made from Q/DQ nodes TensorRT "
            "could not fuse into a neighbouring layer; each is an extra pass over the tensor",
            layers=[layer.name for layer in qdq], latency_ms=latency_sum(qdq),
        )
