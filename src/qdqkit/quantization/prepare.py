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
from google.protobuf.message import Message

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


def upgrade_opset(proto: onnx.ModelProto, where: str, minimum: int = MIN_OPSET, *,
                  in_place: bool = False) -> onnx.ModelProto:
    """``proto`` at opset ``minimum`` or more (rule 2); returns it unchanged when already there.

    With ``in_place`` (a caller that has no further use for the original) the converted model is
    usually ``proto`` itself with the converter's graph put around its own weights, so no weight
    is copied; a failed conversion leaves ``proto`` as it was."""
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
    if in_place and _adopt_conversion(proto, converted, weights):
        return proto
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
    (Protobuf-level copies of everything but the weights' bytes, which are never copied.)"""
    stripped = onnx.ModelProto()
    _copy_fields(proto, stripped, skip="graph")
    _copy_fields(proto.graph, stripped.graph, skip="initializer")
    weights: dict[str, onnx.TensorProto] = {}
    for tensor in proto.graph.initializer:
        copy = stripped.graph.initializer.add()
        if (tensor.name and tensor.name not in weights
                and tensor.data_location != onnx.TensorProto.EXTERNAL
                and tensor.HasField("raw_data") and math.prod(tensor.dims) >= _STRIP_MIN_ELEMENTS):
            weights[tensor.name] = tensor
            _copy_fields(tensor, copy, skip="raw_data")
            copy.data_location = onnx.TensorProto.EXTERNAL
            copy.external_data.add(key="location", value=_STRIPPED)
        else:
            copy.CopyFrom(tensor)
    return stripped, weights


def _copy_fields(source: Message, target: Message, skip: str) -> None:
    """Every field set in ``source`` but ``skip`` into the empty message ``target``."""
    for field, value in source.ListFields():
        if field.name == skip:
            continue
        if isinstance(value, Message):
            getattr(target, field.name).CopyFrom(value)
        elif isinstance(value, (bytes, str, int, float)):
            setattr(target, field.name, value)
        else:  # a repeated field (its descriptor's spelling of that varies across protobufs)
            getattr(target, field.name).extend(value)


def _is_stripped(tensor: onnx.TensorProto) -> bool:
    return any(e.key == "location" and e.value == _STRIPPED for e in tensor.external_data)


def _restore_weight_bytes(proto: onnx.ModelProto, weights: dict[str, onnx.TensorProto]) -> None:
    for tensor in proto.graph.initializer:
        if _is_stripped(tensor):
            tensor.CopyFrom(weights[tensor.name])


def _adopt_conversion(proto: onnx.ModelProto, converted: onnx.ModelProto,
                      weights: dict[str, onnx.TensorProto]) -> bool:
    """Make ``proto`` what ``_restore_weight_bytes`` would make ``converted``, keeping its own
    weight messages in place; False (``proto`` untouched) when the converter changed which
    initializers there are or their order."""
    mine, theirs = proto.graph.initializer, converted.graph.initializer
    if len(mine) != len(theirs) or any(
            a.name != b.name or (_is_stripped(b) and b.name not in weights)
            for a, b in zip(mine, theirs, strict=True)):
        return False
    for tensor, new in zip(mine, theirs, strict=True):
        if not _is_stripped(new):
            tensor.CopyFrom(new)
    for field in proto.graph.DESCRIPTOR.fields:
        if field.name != "initializer":
            proto.graph.ClearField(field.name)
    _copy_fields(converted.graph, proto.graph, skip="initializer")
    for field in proto.DESCRIPTOR.fields:
        if field.name != "graph":
            proto.ClearField(field.name)
    _copy_fields(converted, proto, skip="graph")
    return True


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
