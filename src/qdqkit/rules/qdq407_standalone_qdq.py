"""QDQ407: a Q/DQ Reformat layer that no other finding explains (D6, E1, E2).

Runs last: it receives every other finding and reports only the predicted Q/DQ Reformats none of
them names, so each Reformat is explained once, by its most specific rule.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Rule, Severity

if TYPE_CHECKING:
    import onnx_ir as ir

    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ407",
        name="standalone-qdq",
        severity=Severity.WARNING,
        summary="a Q or DQ runs as its own Reformat layer",
        why=(
            "A Q whose producer writes float, or a DQ whose reader needs float, becomes a "
            "standalone Reformat (extra memory traffic)."
        ),
        what_to_do=(
            "See the layer's note: quantize the producer's other readers, or the reader's output."
        ),
        fixable=True,
        rule_id="D6, E1, E2",
        how_it_checks="A predicted Q/DQ Reformat layer that no other finding already names.",
    ),
)

RUNS_LAST = True

def fix(finding: Finding, model: ir.Model) -> bool:
    """Re-place the Q/DQ on the finding's nodes and tensors the way the one placement policy
    places them, with the scales the model carries (``passes.replace_qdq``)."""
    from qdqkit.passes.replace_qdq import repair_finding

    return repair_finding(finding, model)


def check(ctx: LintContext, earlier: Sequence[Finding]) -> Iterator[Finding]:
    named = {node for finding in earlier for node in finding.nodes}
    for layer in ctx.prediction.engine.layers:
        if layer.origin != "QDQ" or any(n in named for n in layer.onnx_nodes):
            continue
        note = layer.notes[0] if layer.notes else "a standalone Q/DQ"
        yield ctx.finding("QDQ407", f"'{layer.name}': {note}", nodes=layer.onnx_nodes,
                          tensors=[t.name for t in layer.inputs],
                          cost=f"+1 Reformat layer ({layer.input_precision} -> "
                          f"{layer.output_precision})")
