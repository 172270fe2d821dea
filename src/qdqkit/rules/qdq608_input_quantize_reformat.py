"""QDQ608 (input-quantize-reformat): a Q/DQ Reformat that quantizes a network input (B8, E7)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.engine_context import EngineContext

RULES = (
    Rule(
        code="QDQ608",
        name="input-quantize-reformat",
        severity=Severity.INFO,
        summary="a Reformat quantizes the network input",
        why=(
            "Nothing earlier can absorb a Q on a network input: it runs as a Reformat unless the "
            "input is fed in INT8."
        ),
        what_to_do=(
            "Feed INT8 directly with trtexec --inputIOFormats=int8:chw32 (the caller then "
            "quantizes the input)."
        ),
        fixable=False,
        rule_id="B8, E7",
        how_it_checks="A Q/DQ Reformat reading a network input.",
        scope="engine",
    ),
)

fix: Fix | None = None


def _io_format_hint(fmt: str | None) -> str:
    lowered = (fmt or "").lower()
    if "thirty-two" in lowered:
        return "int8:chw32"
    if "four wide" in lowered:
        return "int8:chw4"
    return "int8:chw"


def check(ctx: EngineContext) -> Iterator[Finding]:
    input_names = {t.name for t in ctx.graph.inputs}
    for layer in ctx.graph.qdq_reformats():
        if not any(t.name in input_names for t in layer.inputs):
            continue
        hint = _io_format_hint(layer.outputs[0].format if layer.outputs else None)
        yield Finding(
            code="QDQ608", severity=Severity.INFO,
            message=f"'{layer.name}' quantizes the network input; feed INT8 directly with "
            f"trtexec --inputIOFormats={hint} to drop it (the caller then quantizes the input)",
            layers=[layer.name], latency_ms=layer.latency_ms,
        )
