"""QDQ410, QDQ411: Q/DQ in a type other than INT8 (FP8, INT4, FP4, 16-bit) (A6).

Which types TensorRT builds (``docs/tensorrt-qdq-rules.md`` A6): FP8 E4M3 from 9.x (so under
``--trt 10`` and ``11``); INT4 from 10.0 and only for constant weights (weight-only quantization
of a GEMM: the activation stays float and the kernel dequantizes the weight); FP4 E2M1 from 10.8;
never FP8 E5M2, UINT4 or 16/32-bit integers; on DLA nothing but INT8.

1. QDQ410: a Q/DQ whose type the chosen TensorRT version or target cannot build (or INT4 on an
   activation): the build fails.
2. QDQ411: a Q/DQ of a type TensorRT builds but qdqkit's predictor does not model (it predicts
   INT8 fusion only): its layers are predicted in float, so the layer precisions, Reformats and
   latency reported for them do not describe the engine. A weight-only INT4 GEMM is named as such.
One check: both read each Q/DQ node's type once. Naming the nodes keeps QDQ407 from calling
them standalone INT8 Reformats. A DQ of a constant bias (int32, as onnxruntime writes it) is
QDQ409's.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from qdqkit.rules.types import Finding, Fix, Rule, Severity

if TYPE_CHECKING:
    import onnx_ir as ir

    from qdqkit.rules.model_context import LintContext

RULES = (
    Rule(
        code="QDQ410",
        name="unbuildable-qdq-type",
        severity=Severity.ERROR,
        summary="a Q/DQ type the chosen TensorRT version or target cannot build",
        why=(
            "TensorRT builds INT8 Q/DQ everywhere, FP8 (E4M3) from 9.x, INT4 from 10.0 on "
            "constant weights only, FP4 from 10.8; DLA builds INT8 only. Anything else fails to "
            "build."
        ),
        what_to_do=(
            "Quantize to a type the target builds (INT8 everywhere), or build with a TensorRT "
            "version and GPU that support the type."
        ),
        fixable=False,
        rule_id="A6",
        how_it_checks=(
            "A Q or DQ whose quantized type is not INT8/UINT8 and is not built by the --trt "
            "version on the --target (INT4 on a non-constant input included)."
        ),
    ),
    Rule(
        code="QDQ411",
        name="qdq-type-not-modelled",
        severity=Severity.INFO,
        summary="a Q/DQ in a type qdqkit's engine prediction does not model (FP8, INT4, FP4)",
        why=(
            "qdqkit predicts INT8 fusion; layers quantized in another type are predicted in "
            "float, so their precision, Reformats and latency in this report are not the "
            "engine's."
        ),
        what_to_do=(
            "Read the INT8 findings as covering the INT8 part of the model only; check the "
            "other types in the built engine (qdqkit engine report)."
        ),
        fixable=False,
        rule_id="A6",
        how_it_checks=(
            "A Q or DQ of FP8 (E4M3), INT4 or FP4 that the --trt version builds on the --target."
        ),
    ),
)

fix: Fix | None = None


def _type_name(dtype: ir.DataType) -> str:
    return dtype.name.lower()


def _unbuildable(dtype: ir.DataType, trt: str, target: str, constant: bool) -> str | None:
    """Why ``trt`` on ``target`` cannot build this Q/DQ type (rule 1), or None."""
    import onnx_ir as ir

    if target == "dla":
        return "DLA builds INT8 Q/DQ only"
    if dtype == ir.DataType.FLOAT8E4M3FN:
        return "TensorRT 8.6 has no FP8 (from 9.x)" if trt == "8.6" else None
    if dtype == ir.DataType.INT4:
        if trt == "8.6":
            return "TensorRT 8.6 has no INT4 (from 10.0)"
        return None if constant else "TensorRT quantizes only constant weights to INT4"
    if dtype == ir.DataType.FLOAT4E2M1:
        return "TensorRT 8.6 has no FP4 (from 10.8)" if trt == "8.6" else None
    return f"TensorRT has no {_type_name(dtype)} Q/DQ"


def check(ctx: LintContext) -> Iterator[Finding]:
    from qdqkit.core.qdq import WEIGHTED_OPS, is_dequantize, node_label

    prediction = ctx.prediction
    for node in ctx.other_type_qdq:
        params = ctx.view.params(node)
        assert params is not None
        dtype = params.quant_dtype
        constant = ctx.is_constant_input(node)
        tensor = getattr(node.inputs[0], "name", None) or "?"
        where = f"{node.op_type} '{node_label(node)}' on '{tensor}' ({_type_name(dtype)})"
        why = _unbuildable(dtype, prediction.trt, prediction.target, constant)
        if why is not None:
            yield ctx.finding("QDQ410", f"{where}: {why}", nodes=[node_label(node)],
                              tensors=[tensor], cost="the build fails")
            continue
        readers = [use.node for use in node.outputs[0].uses()] if is_dequantize(node) else []
        gemm = [r for r in readers if r.op_type in WEIGHTED_OPS - {"Conv", "ConvTranspose"}]
        if constant and gemm and all(ctx.dq_of(v) is None for r in gemm for v in r.inputs
                                     if v is not node.outputs[0]):
            message = (f"{where}: weight-only quantization of "
                       f"{', '.join(repr(node_label(r)) for r in gemm[:3])}: the GEMM runs in "
                       "float and dequantizes the weight in its kernel; predicted as float")
        else:
            message = f"{where}: not modelled; its layers are predicted in float"
        yield ctx.finding("QDQ411", message, nodes=[node_label(node)], tensors=[tensor],
                          cost="not in the predicted figures")
