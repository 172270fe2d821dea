"""QDQ506: operator-format quantization (QLinearConv, ConvInteger, ...), which the parser rejects (A7).

Every op whose type starts with ``QLinear`` (the standard QLinearConv and QLinearMatMul, and
onnxruntime's contrib QLinearAdd, QLinearLeakyRelu, QLinearGlobalAveragePool...), the integer
ops (ConvInteger, MatMulInteger) and onnxruntime's other quantized kernels (QGemm,
DynamicQuantizeMatMul, MatMulIntegerToFloat, QAttention), in any domain: TensorRT's parser
imports quantization only as QuantizeLinear/DequantizeLinear pairs.
"""

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
            "A node whose op type starts with QLinear (QLinearConv, QLinearMatMul, contrib "
            "QLinearAdd, QLinearLeakyRelu...), or is ConvInteger, MatMulInteger, QGemm, "
            "DynamicQuantizeMatMul, MatMulIntegerToFloat or QAttention."
        ),
    ),
)

fix: Fix | None = None


_INTEGER_OPS = frozenset({"ConvInteger", "MatMulInteger", "QGemm", "DynamicQuantizeMatMul",
                          "MatMulIntegerToFloat", "QAttention"})


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import node_label

    found = [op for op in ctx.op_types() if op.startswith("QLinear") or op in _INTEGER_OPS]
    for node in ctx.nodes_of(*found):
        yield ctx.finding("QDQ506", f"{node.op_type} '{node_label(node)}'",
                          nodes=[node_label(node)], cost="the ONNX parser rejects the model")
