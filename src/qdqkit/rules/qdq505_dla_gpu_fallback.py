"""QDQ505: with ``--target dla``, a compute layer DLA does not support falls back to the GPU (I5, I7)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ505",
        name="dla-gpu-fallback",
        severity=Severity.WARNING,
        summary="a layer cannot run on DLA and falls back to the GPU",
        why="Each GPU<->DLA switch costs a Reformat and a separate submission.",
        what_to_do="Replace the op with a DLA-supported one or keep the DLA region contiguous.",
        fixable=False,
        rule_id="I5, I7, E6",
        how_it_checks="--target dla: a predicted layer failing DLA's layer support rules.",
    ),
)

TARGETS = ("dla",)

fix: Fix | None = None


def check(ctx: LintContext) -> Iterator[Finding]:
    for layer in ctx.prediction.engine.layers:
        if layer.device == "GPU" and not layer.is_reformat:
            why = next((n for n in layer.notes if n.startswith("falls back")), "falls back")
            yield ctx.finding("QDQ505", f"'{layer.name}' {why}", nodes=layer.onnx_nodes[:3],
                              cost="GPU fallback: a Reformat at each DLA boundary")
