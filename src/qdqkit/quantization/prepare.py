"""Getting a float model ready to quantize, or refusing it with the reason.

1. A model that is already quantized (QuantizeLinear/DequantizeLinear, or integer operators such
   as ConvInteger and QLinearConv) is refused: re-quantizing stacks a second set of scales on the
   first; ``lint`` and ``fix`` are the tools for it.
2. An opset below 13 (per-channel Q/DQ needs 13) is converted with ``onnx.version_converter``;
   when the converter cannot, the model is refused naming the operator that blocks it. The
   version field is never just rewritten: the ops' semantics change between opsets. The converter
   sees the model without its weights' bytes (they are put back after): it never reads them, and
   copying a large model's weights into and out of it is most of its cost.
3. Nodes onnxruntime cannot run (TensorRT plugins, custom domains) and everything downstream of
   them cannot be calibrated: they are listed with the reason and stay float, untouched.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import onnx
import onnx_ir as ir

from qdqkit.core.activations import ORT_DOMAINS
from qdqkit.core.errors import QdqkitError
from qdqkit.core.host_ops import HostForward, forward_for
from qdqkit.core.qdq import is_qdq, node_label

MIN_OPSET = 13
_INTEGER_OPS = frozenset({
    "ConvInteger", "MatMulInteger", "QLinearConv", "QLinearMatMul", "DynamicQuantizeLinear",
    "QLinearAdd", "QLinearMul", "QLinearConcat", "QLinearAveragePool", "QLinearGlobalAveragePool",
    "QLinearLeakyRelu", "QLinearSigmoid", "QAttention", "DynamicQuantizeMatMul", "MatMulNBits",
    "DequantizeLinear", "QuantizeLinear",
})


def default_opset(proto: onnx.ModelProto) -> int:
    for entry in proto.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    return 0


def refuse_quantized(model: ir.Model, where: str) -> None:
    """Raise if ``model`` already holds Q/DQ or integer operators (rule 1)."""
    found = [n for n in model.graph if is_qdq(n) or n.op_type in _INTEGER_OPS]
    if found:
        kinds = sorted({n.op_type for n in found})
        raise QdqkitError(
            f"{where}: already quantized ({len(found)} {', '.join(kinds)} nodes, e.g. "
            f"'{node_label(found[0])}'); check it with 'qdqkit lint' and repair it with "
            "'qdqkit fix' instead of quantizing it again"
        )


def upgrade_opset(proto: onnx.ModelProto, where: str, minimum: int = MIN_OPSET) -> onnx.ModelProto:
    """``proto`` at opset ``minimum`` or more (rule 2); returns it unchanged when already there."""
    version = default_opset(proto)
    if version >= minimum:
        return proto
    from onnx import version_converter

    stripped, weights = _without_weight_bytes(proto)
    try:
        converted = version_converter.convert_version(stripped, minimum)
    except Exception as exc:  # the converter raises bare RuntimeErrors and ValueErrors
        message = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        blocking = _blocking_op(proto, message)
        reason = (f"onnx's converter has no conversion for {blocking}" if blocking
                  else _converter_reason(message))
        raise QdqkitError(
            f"{where}: opset {version} cannot be converted to {minimum}: {reason}; re-export the "
            f"model at opset {minimum} or later"
        ) from None
    _restore_weight_bytes(converted, weights)
    return converted


def _converter_reason(message: str) -> str:
    """The converter's own words without the C++ source location and assertion text it adds."""
    if "failed:" in message:
        message = message.split("failed:", 1)[1]
    return message.strip() or "the converter failed"


_STRIPPED = "qdqkit-weight-bytes-held-aside"  # a location no file has: marks a stripped weight
_STRIP_MIN_ELEMENTS = 256  # smaller tensors cost the converter nothing


def _without_weight_bytes(
    proto: onnx.ModelProto,
) -> tuple[onnx.ModelProto, dict[str, onnx.TensorProto]]:
    """A copy of ``proto`` whose large initializers are external references to nowhere, and the
    original initializers by name. Graph, shapes and types are unchanged, so conversion is too.
    (Protobuf-level copies only: reading ``raw_data`` into Python would copy every weight.)"""
    stripped = onnx.ModelProto()
    stripped.CopyFrom(proto)
    originals = {t.name: t for t in proto.graph.initializer if t.name}
    weights: dict[str, onnx.TensorProto] = {}
    for tensor in stripped.graph.initializer:
        if (tensor.name in originals and tensor.name not in weights
                and tensor.data_location != onnx.TensorProto.EXTERNAL
                and tensor.HasField("raw_data") and math.prod(tensor.dims) >= _STRIP_MIN_ELEMENTS):
            weights[tensor.name] = originals[tensor.name]
            tensor.ClearField("raw_data")
            tensor.data_location = onnx.TensorProto.EXTERNAL
            tensor.external_data.add(key="location", value=_STRIPPED)
    return stripped, weights


def _restore_weight_bytes(proto: onnx.ModelProto, weights: dict[str, onnx.TensorProto]) -> None:
    for tensor in proto.graph.initializer:
        if any(e.key == "location" and e.value == _STRIPPED for e in tensor.external_data):
            tensor.CopyFrom(weights[tensor.name])


def _blocking_op(proto: onnx.ModelProto, message: str) -> str:
    ops = sorted({n.op_type for n in proto.graph.node})
    named = [op for op in ops if op in message]
    if named:
        node = next(n for n in proto.graph.node if n.op_type == named[0])
        return f"{named[0]} node '{node.name or node.output[0]}'"
    return ""


def unrunnable_nodes(
    model: ir.Model, local_domains: set[str], forwards: Mapping[str, HostForward] | None = None
) -> dict[ir.Node, str]:
    """Nodes onnxruntime cannot run and their downstream, with why they stay float (rule 3).

    A custom node with a numpy forward in ``forwards`` stays float itself, but what follows it is
    calibrated through the forward.
    """
    blocked: dict[ir.Node, str] = {}
    hosted: set[ir.Node] = set()
    for node in model.graph:
        if node.domain not in ORT_DOMAINS and node.domain not in local_domains:
            if forward_for(node, forwards or {}) is not None:
                hosted.add(node)
                blocked[node] = (f"{node.domain}::{node.op_type} is a plugin: left float and "
                                 "untouched (calibrated through its numpy forward)")
                continue
            blocked[node] = (f"{node.domain}::{node.op_type} is not an onnxruntime operator "
                             "(a TensorRT plugin): left float and untouched")
            continue
        upstream = next((blocked[v.producer()] for v in node.inputs  # type: ignore[index]
                         if v is not None and v.producer() in blocked
                         and v.producer() not in hosted), None)
        if upstream is not None:
            source = upstream if upstream.startswith("after ") else None
            blocked[node] = source or f"after a node onnxruntime cannot run ({upstream.split(' ')[0]})"
    return blocked
