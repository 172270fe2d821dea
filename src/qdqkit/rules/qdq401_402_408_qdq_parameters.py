"""QDQ401, QDQ402, QDQ408: scale and zero point of each Q/DQ node, as the parser reads them (A1-A3).

1. QDQ408: the scale or zero point is computed at run time (no constant to read).
2. QDQ401: an activation (non-constant input) is quantized with more than one scale. Its fix
   re-places the tensor's Q/DQ per tensor, at the widest channel's scale (``passes.qdq_target``).
3. QDQ402: the zero point is present and not all zeros.
One check: all three read the node's quantization parameters once.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity, replace_by_placement

if TYPE_CHECKING:

    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ401",
        name="per-channel-activation",
        severity=Severity.ERROR,
        summary="an activation is quantized per channel",
        why="TensorRT supports per-channel scales only on constant weights: the build fails.",
        what_to_do=(
            "Quantize activations per tensor; `qdqkit fix` gives each one its widest channel's "
            "scale, which clips no value its own channel's scale did not."
        ),
        fixable=True,
        rule_id="A3, D7",
        how_it_checks="An activation (non-constant) Q or DQ has more than one scale.",
    ),
    Rule(
        code="QDQ402",
        name="nonzero-zero-point",
        severity=Severity.ERROR,
        summary="a Q/DQ has a non-zero zero point",
        why=(
            "TensorRT's ONNX parser accepts only symmetric quantization (zero points all zero); "
            "UINT8 is read as INT8."
        ),
        what_to_do="Re-quantize symmetrically with INT8 and zero zero points.",
        fixable=False,
        rule_id="A1",
        how_it_checks="A Q or DQ whose zero point is present and not all zeros.",
    ),
    Rule(
        code="QDQ408",
        name="runtime-scale",
        severity=Severity.ERROR,
        summary="a Q/DQ scale or zero point is computed at run time",
        why=(
            "TensorRT <= 10.12 needs build-time constant scales; qdqkit cannot read the scale "
            "either."
        ),
        what_to_do="Fold the scale computation into an initializer.",
        fixable=False,
        rule_id="A2",
        how_it_checks="A Q or DQ whose scale or zero point is not a constant.",
    ),
)


fix: Fix | None = replace_by_placement


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import is_dequantize, node_label

    view = ctx.view
    folded = ctx.prediction.facts.folded_nodes
    for node in (*view.quantize_nodes, *view.dequantize_nodes):
        # A folded DQ dequantizes a constant (a weight), whatever its input looks like.
        constant = (node in folded and is_dequantize(node)) or ctx.is_constant(node.inputs[0])
        params = view.params(node)
        tensor = getattr(node.inputs[0], "name", None) or "?"
        if params is None:
            yield ctx.finding("QDQ408", f"{node.op_type} '{node_label(node)}' on '{tensor}'",
                              nodes=[node_label(node)], tensors=[tensor],
                              cost="the build may fail")
            continue
        if params.per_channel and not constant:
            yield ctx.finding(
                "QDQ401", f"{node.op_type} '{node_label(node)}' quantizes activation '{tensor}' "
                f"with {params.scale.size} scales", nodes=[node_label(node)], tensors=[tensor],
                cost="the build fails",
            )
        if not params.zero_point_is_zero:
            assert params.zero_point is not None
            shown = params.zero_point.reshape(-1)[:3].tolist()
            yield ctx.finding(
                "QDQ402", f"{node.op_type} '{node_label(node)}' on '{tensor}': zero point {shown}",
                nodes=[node_label(node)], tensors=[tensor], cost="the parser rejects the node",
            )
