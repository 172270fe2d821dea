"""QDQ409: a Conv, ConvTranspose, Gemm or BatchNormalization bias is quantized (A8: biases stay
float).

A bias input produced by a DequantizeLinear of a constant (an int32 bias as onnxruntime's
static quantization writes it, or a Q/DQ pair on a float bias) is a finding; the int32 form is
called out, since int32 is not among the types TensorRT's Q/DQ layers take. The check and the
repair share one definition of a quantized bias (``passes.replace_qdq.dq_of_constant``), and the
repair (``passes.float_bias``) gives the layer the dequantized values as a float initializer.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Rule, Severity

if TYPE_CHECKING:
    import onnx_ir as ir

    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ409",
        name="quantized-bias",
        severity=Severity.WARNING,
        summary="a Conv/ConvTranspose/Gemm/BatchNormalization bias is quantized",
        why=(
            "TensorRT quantizes weights and activations only and adds biases in float: a Q/DQ on "
            "a bias at best folds into a float constant rounded to its grid (precision lost for "
            "nothing), and an int32 bias DQ is not a type its Q/DQ layers take."
        ),
        what_to_do=(
            "Keep biases float (ModelOpt: QuantizeBias off); 'qdqkit fix' replaces the DQ by the "
            "float values it computes."
        ),
        fixable=True,
        rule_id="A8",
        how_it_checks=(
            "Input 2 of a Conv, ConvTranspose, Gemm or BatchNormalization is the output of a "
            "DequantizeLinear of a constant, or of a QuantizeLinear of a constant."
        ),
    ),
)

def fix(finding: Finding, model: ir.Model) -> bool:
    """The finding's layers read their bias as a float initializer holding the DQ's values."""
    from qdqkit.passes.float_bias import DequantizeBias

    rewrite = DequantizeBias(finding.nodes)
    rewrite(model)
    return bool(rewrite.changes)


def check(ctx: LintContext) -> Iterator[Finding]:
    import onnx_ir as ir

    from qdqkit.core.qdq import node_label
    from qdqkit.passes.float_bias import BIASED_OPS
    from qdqkit.passes.replace_qdq import dq_of_constant

    for node in ctx.nodes_of(*sorted(BIASED_OPS)):
        bias = node.inputs[2] if len(node.inputs) > 2 else None
        dq = dq_of_constant(bias)
        if bias is None or dq is None or dq.inputs[0] is None:
            continue
        source = dq.inputs[0]
        q = source.producer()
        constant = q.inputs[0] if q is not None and q.inputs[0] is not None else source
        stored = constant.const_value.dtype if constant.const_value is not None else None
        if stored == ir.DataType.INT32:
            how, cost = f"is int32, dequantized by '{node_label(dq)}'", \
                "the parser may reject the int32 DQ"
        else:
            how, cost = f"goes through Q/DQ ('{node_label(dq)}')", \
                "the bias is rounded to its quantization grid"
        yield ctx.finding(
            "QDQ409", f"{node.op_type} '{node_label(node)}': bias '{constant.name}' {how}",
            nodes=[node_label(node), node_label(dq)],
            tensors=[t for t in (constant.name, bias.name) if t], cost=cost,
        )
