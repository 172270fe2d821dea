"""QDQ502: a custom-domain op becomes an opaque float plugin layer (C19)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ502",
        name="plugin-op",
        severity=Severity.INFO,
        summary="a custom-domain op becomes an opaque plugin layer",
        why=(
            "Plugins run in float unless they absorb Q/DQ themselves; Q/DQ around them stay "
            "separate."
        ),
        what_to_do="Nothing by default; for INT8 plugins, let the plugin consume the scales.",
        fixable=False,
        rule_id="C19",
        how_it_checks="A node whose domain is neither the default ONNX domain nor com.microsoft.",
    ),
)

fix: Fix | None = None


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label

    for node in ctx.plugin_nodes():
        yield ctx.finding(
            "QDQ502", f"'{node_label(node)}' ({node.domain}::{node.op_type}) is an opaque "
            "float plugin layer", nodes=[node_label(node)], cost="float in and out")
