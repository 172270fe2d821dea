"""Shapes and element types of a model's values from ONNX shape inference, without touching it.

``infer_value_types(model)`` returns a ``ValueTypes`` table (value name -> inferred shape and
dtype); the model is never changed and its file never re-read. Inference runs on a lean protobuf
written for it alone: nodes (type, domain, inputs, outputs, attributes), the graph's inputs and
outputs, the value types the model already declares, and initializers, of which those over 64
elements carry their dims but not their data. Names, doc strings and metadata are left out, so
writing it costs a fraction of a full serialization and adds nothing to the model's own objects
(onnx-ir's serializer creates a metadata store on every value it visits). It stays linear in the
graph size and cheap next to loading the model. Known shapes win: the table only fills what the
model leaves unset.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import onnx
import onnx_ir as ir

from qdqkit.core.qdq import WEIGHTED_OPS
from qdqkit.core.value_types import set_dtype

_KEEP_INITIALIZER_ELEMENTS = 64  # shape tensors and scalars keep their values (data propagation)
# ONNX's Reshape-13 shape inference ignores a shape its input computes (Shape -> Slice -> Concat,
# as Paddle and traced PyTorch exports write it); Reshape-14 reads it. Nothing else between
# opsets 13 and 14 changes an output's shape (14 adds types, Reshape's allowzero defaulting to
# the old behaviour, and layouts defaulting to the old one), so an opset-13 graph is inferred as
# opset 14; if that fails, as written.
_RESHAPE_WITHOUT_DATA = 13
# From this IR version on a function proto carries its own value types (as onnx-ir writes them).
_FUNCTION_VALUE_INFO_IR_VERSION = 10


@dataclass(frozen=True)
class ValueTypes:
    """Inferred shapes and dtypes by value name.

    A value's own shape wins unless the stored shapes contradicted the ops (``inferred_wins``).
    """

    shapes: Mapping[str, ir.Shape] = field(default_factory=dict)
    dtypes: Mapping[str, ir.DataType] = field(default_factory=dict)
    inferred_wins: bool = False

    def shape_of(self, value: ir.Value) -> ir.Shape | None:
        inferred = self.shapes.get(value.name or "")
        if value.shape is not None and not (self.inferred_wins and inferred is not None):
            return value.shape
        if inferred is None and value.const_value is not None:
            # An initializer made in memory (a pass's new weight) declares no shape until the
            # model is saved and read again; its tensor has the true one.
            shape = value.const_value.shape
            if isinstance(shape, ir.Shape):
                return shape
            return ir.Shape([d if isinstance(d, int) else None for d in shape])
        return inferred

    def dtype_of(self, value: ir.Value) -> ir.DataType | None:
        if value.dtype is not None:
            return value.dtype
        if value.const_value is not None:
            return value.const_value.dtype
        return self.dtypes.get(value.name or "")


def _static_dims(value: ir.Value) -> list[int] | None:
    shape = value.shape if value.shape is not None else (
        value.const_value.shape if value.const_value is not None else None)
    if shape is None:
        return None
    dims = [d for d in shape if isinstance(d, int)]
    return dims if len(dims) == len(shape) else None


def _is_large(value: ir.Value) -> bool:
    dims = _static_dims(value)
    return dims is not None and math.prod(dims) > _KEEP_INITIALIZER_ELEMENTS


def _dims_only(value: ir.Value) -> onnx.TensorProto:
    tensor = value.const_value
    dtype = value.dtype or (tensor.dtype if tensor is not None else None)
    proto = onnx.TensorProto(name=value.name or "", dims=_static_dims(value) or [])
    proto.data_type = int(dtype) if dtype is not None else onnx.TensorProto.FLOAT
    # Shapes need the dims only; marking the data external keeps inference from reading it.
    proto.data_location = onnx.TensorProto.EXTERNAL
    return proto


def _write_value_info(proto: onnx.ValueInfoProto, value: ir.Value) -> None:
    proto.name = value.name or ""
    if value.type is not None:
        ir.serde.serialize_type_into(proto.type, value.type)
    if value.shape is not None:
        ir.serde.serialize_shape_into(proto.type, value.shape)


def _write_node(nodes: Any, node: ir.Node) -> None:
    outputs = [v.name or "" for v in node.outputs]
    while outputs and not outputs[-1]:
        outputs.pop()  # trailing unnamed outputs are absent, not empty
    fields: dict[str, Any] = {"op_type": node.op_type, "output": outputs,
                              "input": [v.name or "" if v is not None else "" for v in node.inputs]}
    if node.domain:
        fields["domain"] = node.domain
    if node.overload:
        fields["overload"] = node.overload
    proto = nodes.add(**fields)  # one call: field by field costs as much again
    for attr in node.attributes.values():
        if attr.is_ref():
            ir.serde.serialize_reference_attribute_into(proto.attribute.add(), attr)
        else:
            ir.serde.serialize_attribute_into(proto.attribute.add(), attr)


def _write_graph(proto: onnx.GraphProto, graph: ir.Graph, *, stored_shapes: bool) -> None:
    """What inference reads of ``graph``; the value types it declares only for computed values.

    Without ``stored_shapes`` the computed values' declared types and the outputs' shapes are left
    out, so inference starts afresh from the inputs and weights.
    """
    # ONNX inference before IR version 4 types only initializers listed as graph inputs, so an
    # initializer gets no value_info of its own here, as in a model file.
    for value in graph.inputs:
        _write_value_info(proto.input.add(), value)
    large = []
    for value in graph.initializers.values():
        if _is_large(value):
            large.append(value)
        elif value.const_value is not None:
            tensor = proto.initializer.add()
            ir.serde.serialize_tensor_into(tensor, value.const_value)
            tensor.name = value.name or ""
    proto.initializer.extend(_dims_only(v) for v in large)
    for node in graph:
        _write_node(proto.node, node)
        if not stored_shapes:
            continue
        for value in node.outputs:
            declared = value.type is not None or value.shape is not None
            if declared and value.name and not value.is_graph_output() \
                    and value.name not in graph.initializers:
                _write_value_info(proto.value_info.add(), value)
    for value in graph.outputs:
        output = proto.output.add()
        _write_value_info(output, value)
        if not stored_shapes:
            output.type.tensor_type.ClearField("shape")


def _inference_bytes(model: ir.Model, *, stored_shapes: bool, reshape_14: bool = False) -> bytes:
    proto = onnx.ModelProto(ir_version=model.ir_version)
    for domain, version in model.opset_imports.items():
        if reshape_14 and domain in ("", "ai.onnx") and version == _RESHAPE_WITHOUT_DATA:
            version += 1
        proto.opset_import.add(domain=domain, version=version)
    _write_graph(proto.graph, model.graph, stored_shapes=stored_shapes)
    for function in model.functions.values():
        ir.serde.serialize_function_into(
            proto.functions.add(), function,
            create_value_info=model.ir_version >= _FUNCTION_VALUE_INFO_IR_VERSION,
        )
    return proto.SerializeToString()




def infer_value_types(model: ir.Model) -> ValueTypes:
    """Shapes and dtypes ONNX inference gives the node outputs the model leaves unset.

    Exporters sometimes store intermediate shapes that contradict the ops (a rank-0 output of a
    Sum), and onnx then gives up on everything downstream. When a weighted op is left without a
    shape that way, inference runs once more ignoring the stored intermediate shapes.
    """
    values = [out for node in model.graph for out in node.outputs]
    if all(v.shape is not None for v in values):
        return ValueTypes()
    types = _infer(model, values, stored_shapes=True)
    if all(
        types.shape_of(node.outputs[0]) is not None
        for node in model.graph if node.op_type in WEIGHTED_OPS and node.outputs
    ):
        return types
    return _infer(model, values, stored_shapes=False)


def fill_value_types(model: ir.Model) -> None:
    """Write inferred shapes and dtypes into ``model``: only for a model the caller made itself."""
    types = infer_value_types(model)
    for node in model.graph:
        for value in node.outputs:
            shape = types.shape_of(value)
            if shape is not None:
                value.shape = shape
            dtype = types.dtype_of(value)
            if dtype is not None:
                set_dtype(value, dtype)


def _infer(model: ir.Model, values: list[ir.Value], *, stored_shapes: bool) -> ValueTypes:
    default = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
    attempts = (True, False) if default == _RESHAPE_WITHOUT_DATA else (False,)
    for reshape_14 in attempts:
        try:
            # Not strict: a custom-domain plugin op must not cost the shapes of everything else.
            # Bytes in, so the proto written for it is gone before inference makes its own copy.
            inferred = onnx.shape_inference.infer_shapes(
                _inference_bytes(model, stored_shapes=stored_shapes, reshape_14=reshape_14),
                strict_mode=False, data_prop=True)
            break
        except Exception:  # a malformed graph: no shapes beyond the stored ones
            continue
    else:
        return ValueTypes()
    unset = {v.name for v in values
             if v.name and (v.shape is None or v.dtype is None or not stored_shapes)}
    infos = {vi.name: vi.type.tensor_type for vi in inferred.graph.value_info if vi.name in unset}
    infos.update({vi.name: vi.type.tensor_type for vi in inferred.graph.output})
    shapes: dict[str, ir.Shape] = {}
    dtypes: dict[str, ir.DataType] = {}
    # Most values share a handful of shapes: read each distinct one once, and share it frozen.
    known: dict[bytes, ir.Shape] = {}
    for value in values:
        name = value.name or ""
        info = infos.get(name)
        if info is None:
            continue
        if (value.shape is None or not stored_shapes) and info.HasField("shape"):
            key = info.shape.SerializeToString()
            shape = known.get(key)
            if shape is None:
                shape = known[key] = ir.Shape([
                    d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                    for d in info.shape.dim
                ], frozen=True)
            shapes[name] = shape
        if value.dtype is None and info.elem_type:
            dtypes[name] = ir.DataType(info.elem_type)
    return ValueTypes(shapes, dtypes, inferred_wins=not stored_shapes)
