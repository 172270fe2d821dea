"""QDQ412: a UINT8 Q/DQ, which TensorRT's parser re-types INT8 (A1).

The parser builds a Q/DQ whose zero point is uint8 as INT8 with the same scale (it logs a
warning); only DLA with the asymmetric-import flag (10.11+) keeps uint8. NNCF writes uint8 from
zero after every ReLU, HardSigmoid and Softmax; onnxruntime does too by default.
1. An activation Q with a uint8 zero point of 0 (a non-zero one is QDQ402): the model runs it on
   [0, 255 x scale], the engine on [-128, 127] x scale, so every value above 127 x scale
   saturates: the top half of the calibrated range is lost, silently. Its DQ is the same pair and
   is not reported again. The fix re-places the tensor's Q/DQ as INT8 with scale 255/127 times
   the old one (the same range, half the resolution) where the tensor cannot be negative (a
   ReLU's, a Sigmoid's...); elsewhere the uint8 clamp at zero does work the symmetric pair would
   not do, so the tensor is left for a re-export.
2. A DQ of a uint8 constant or network input: the parser refuses a uint8 DequantizeLinear input,
   the build fails.
Not on ``--target dla``: DLA takes the model through ``translate``, whose cache keeps the range.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity, replace_by_placement

if TYPE_CHECKING:
    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ412",
        name="uint8-read-as-int8",
        severity=Severity.ERROR,
        summary="a UINT8 Q/DQ, which TensorRT builds as INT8 with the same scale",
        why=(
            "TensorRT's ONNX parser re-types a uint8 Q/DQ as INT8 and keeps its scale: an "
            "activation calibrated on [0, 255 x scale] saturates at 127 x scale in the engine; "
            "a uint8 weight or input is refused."
        ),
        what_to_do=(
            "Quantize to INT8 with a zero point of 0; `qdqkit fix` re-places a uint8 Q on a "
            "non-negative tensor as INT8 at 255/127 times its scale (the same range)."
        ),
        fixable=True,
        rule_id="A1",
        how_it_checks=(
            "A Q with a uint8 zero point of 0 on an activation, or a DQ of a uint8 constant or "
            "network input (GPU target)."
        ),
    ),
)

# DLA takes its ranges from the translation, not from Q/DQ types (I1).
TARGETS = ("gpu",)

fix: Fix | None = replace_by_placement


def check(ctx: LintContext) -> Iterator[Finding]:
    import onnx_ir as ir

    from qdqkit.core.qdq import is_quantize, node_label

    view = ctx.view
    for node in view.quantize_nodes:
        params = view.params(node)
        if params is None or params.quant_dtype != ir.DataType.UINT8 or params.zero_point is None:
            continue
        if not params.zero_point_is_zero or ctx.is_constant_input(node):
            continue  # QDQ402's, or a weight's Q (its DQ reads uint8 and is reported below)
        tensor = getattr(node.inputs[0], "name", None) or "?"
        top = float(params.scale.max()) * 255
        yield ctx.finding(
            "QDQ412", f"QuantizeLinear '{node_label(node)}' on '{tensor}' is uint8: the model "
            f"runs it up to {top:.4g}, the engine saturates it at half that",
            nodes=[node_label(node)], tensors=[tensor],
            cost="values above 127 x scale saturate (the top half of the range)",
        )
    for node in view.dequantize_nodes:
        params = view.params(node)
        if params is None or params.quant_dtype != ir.DataType.UINT8:
            continue
        source = node.inputs[0]
        producer = source.producer() if source is not None else None
        if source is None or (producer is not None and is_quantize(producer)):
            continue  # a Q's output: the parser types it INT8 (rule 1 reports the Q)
        if not (ctx.is_constant(source) or source.is_graph_input()):
            continue
        tensor = source.name or "?"
        what = "network input" if source.is_graph_input() else "constant"
        yield ctx.finding(
            "QDQ412", f"DequantizeLinear '{node_label(node)}' reads uint8 {what} '{tensor}'",
            nodes=[node_label(node)], tensors=[tensor], cost="the build fails",
        )
