"""QDQ506: operator-format quantization (QLinearConv, ConvInteger, ...), which the parser rejects (A7)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ506",
        name="integer-operator",
        severity=Severity.ERROR,
        summary="QLinear*/Integer operators (QLinearConv, ConvInteger, ...)",
        why="TensorRT imports only Q/DQ-format quantization: these ops fail to parse.",
        what_to_do="Export in QDQ format (onnxruntime QuantFormat.QDQ).",
        fixable=False,
        rule_id="A7",
        how_it_checks=(
            "A node with op type QLinearConv, QLinearMatMul, ConvInteger or MatMulInteger."
        ),
    ),
)

fix: Fix | None = None


_INTEGER_OPS = frozenset({"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger",
                          "QLinearAdd", "QLinearMul", "QLinearConcat"})


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label

    for node in ctx.nodes_of(*_INTEGER_OPS):
        yield ctx.finding("QDQ506", f"{node.op_type} '{node_label(node)}'",
                          nodes=[node_label(node)], cost="the ONNX parser rejects the model")
