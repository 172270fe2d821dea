"""Checks on the Q/DQ nodes themselves: QDQ401, QDQ402, QDQ404-QDQ406, QDQ408, QDQ506."""

from __future__ import annotations

from collections.abc import Iterator

from qdqkit.core.qdq import is_dequantize
from qdqkit.linting.catalog import Severity
from qdqkit.linting.context import LintContext, name_of
from qdqkit.linting.result import Finding

_INTEGER_OPS = frozenset({"QLinearConv", "QLinearMatMul", "ConvInteger", "MatMulInteger",
                          "QLinearAdd", "QLinearMul", "QLinearConcat"})


def _tensor(node_input: object) -> str:
    return getattr(node_input, "name", None) or "?"


def check_params(ctx: LintContext) -> Iterator[Finding]:
    """QDQ401 (per-channel activation), QDQ402 (non-zero zero point), QDQ408 (run-time scale)."""
    view = ctx.view
    for node in (*view.quantize_nodes, *view.dequantize_nodes):
        if node in ctx.prediction.facts.folded_nodes and is_dequantize(node):
            constant = True
        else:
            constant = ctx.is_constant(node.inputs[0])
        params = view.params(node)
        tensor = _tensor(node.inputs[0])
        if params is None:
            yield ctx.finding("QDQ408", f"{node.op_type} '{name_of(node)}' on '{tensor}'",
                              nodes=[name_of(node)], tensors=[tensor], cost="the build may fail")
            continue
        if params.per_channel and not constant:
            yield ctx.finding(
                "QDQ401", f"{node.op_type} '{name_of(node)}' quantizes activation '{tensor}' with "
                f"{params.scale.size} scales", nodes=[name_of(node)], tensors=[tensor],
                cost="the build fails",
            )
        if not params.zero_point_is_zero:
            assert params.zero_point is not None
            shown = params.zero_point.reshape(-1)[:3].tolist()
            yield ctx.finding(
                "QDQ402", f"{node.op_type} '{name_of(node)}' on '{tensor}': zero point {shown}",
                nodes=[name_of(node)], tensors=[tensor], cost="the parser rejects the node",
            )


def check_tensor_quantizers(ctx: LintContext) -> Iterator[Finding]:
    """QDQ404 (several Qs on a tensor), QDQ405 (DQ -> Q), QDQ406 (Q on a network input)."""
    walk = ctx.prediction.walk
    seen: set[object] = set()
    for q in ctx.view.activation_quantizers():
        x = q.inputs[0]
        if x is None:
            continue
        if x.is_graph_input():
            layer = walk.qdq_layer.get(q)
            yield ctx.finding(
                "QDQ406", f"'{name_of(q)}' quantizes network input '{x.name}'",
                nodes=[name_of(q)], tensors=[x.name or ""],
                cost=ctx.reformat_cost([layer] if layer is not None else []),
            )
        dq = ctx.dq_of(x)
        if dq is not None:
            equal = ctx.scale(dq) == ctx.scale(q) and ctx.scale(q) is not None
            finding = ctx.finding(
                "QDQ405", f"'{name_of(dq)}' -> '{name_of(q)}' "
                + ("with equal scales (cancels)" if equal else "requantizes to another scale"),
                nodes=[name_of(dq), name_of(q)], tensors=[x.name or ""],
                cost="none" if equal else "+1 requantize layer",
            )
            if equal:
                finding.severity = Severity.INFO
            yield finding
        if x in seen:
            continue
        seen.add(x)
        quantizers = ctx.activation_quantizers(x)
        if len(quantizers) < 2:
            continue
        scales = {ctx.scale(n) for n in quantizers}
        names = [name_of(n) for n in quantizers]
        if len(scales) == 1 and None not in scales:
            finding = ctx.finding(
                "QDQ404", f"'{x.name}' has {len(quantizers)} Q nodes with one scale",
                nodes=names, tensors=[x.name or ""], cost="none: TensorRT merges them",
            )
            finding.severity = Severity.INFO
        else:
            distinct = len(scales)
            finding = ctx.finding(
                "QDQ404", f"'{x.name}' has {len(quantizers)} Q nodes with {distinct} scales",
                nodes=names, tensors=[x.name or ""],
                cost=f"up to +{distinct - 1} Quantize Reformat layers; the producer writes float",
            )
        yield finding


def check_integer_ops(ctx: LintContext) -> Iterator[Finding]:
    """QDQ506: operator-format quantization."""
    for node in ctx.graph:
        if node.op_type in _INTEGER_OPS:
            yield ctx.finding("QDQ506", f"{node.op_type} '{name_of(node)}'", nodes=[name_of(node)],
                              cost="the ONNX parser rejects the model")
