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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
import onnx.numpy_helper
import onnx_ir as ir

from qdqkit.core.qdq import WEIGHTED_OPS
from qdqkit.core.shape_folding import fold_shape_values
from qdqkit.core.shape_spec import check_shapes, declared_dims
from qdqkit.core.value_types import set_dtype

_KEEP_INITIALIZER_ELEMENTS = 64  # shape tensors and scalars keep their values (data propagation)
# ONNX's Reshape-13 shape inference ignores a shape its input computes (Shape -> Slice -> Concat,
# as Paddle and traced PyTorch exports write it); Reshape-14 reads it. Nothing else between
# opsets 13 and 14 changes an output's shape (14 adds types, Reshape's allowzero defaulting to
# the old behaviour, and layouts defaulting to the old one), so an opset-13 graph is inferred as
# opset 14; if that fails, as written.
_RESHAPE_WITHOUT_DATA = 13
# Inference rounds with shape values folded to constants (``core.shape_folding``).
_FOLD_ROUNDS = 4
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


def _write_graph(proto: onnx.GraphProto, graph: ir.Graph, *, stored_shapes: bool,
                 folded: Mapping[str, np.ndarray]) -> None:
    """What inference reads of ``graph``; the value types it declares only for computed values.

    Without ``stored_shapes`` the computed values' declared types and the outputs' shapes are left
    out, so inference starts afresh from the inputs and weights. A ``folded`` value is written as
    a constant in place of the node computing it (``core.shape_folding``).
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
    for name, array in folded.items():
        proto.initializer.append(onnx.numpy_helper.from_array(array, name))
    for node in graph:
        if folded and node.outputs and all(o.name in folded for o in node.outputs):
            continue
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


def _inference_bytes(model: ir.Model, *, stored_shapes: bool, reshape_14: bool = False,
                     folded: Mapping[str, np.ndarray] | None = None) -> bytes:
    proto = onnx.ModelProto(ir_version=model.ir_version)
    for domain, version in model.opset_imports.items():
        if reshape_14 and domain in ("", "ai.onnx") and version == _RESHAPE_WITHOUT_DATA:
            version += 1
        proto.opset_import.add(domain=domain, version=version)
    _write_graph(proto.graph, model.graph, stored_shapes=stored_shapes, folded=folded or {})
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


def apply_input_shapes(model: ir.Model, shapes: Mapping[str, Sequence[int]],
                       where: str = "") -> None:
    """Give ``model``'s inputs (the caller's own copy) the ``shapes`` given, checked against the
    model (``core.shape_spec.check_shapes``). Stored intermediate shapes with symbolic dimensions
    would win over inference and keep counting those as 1 inside the graph: they are dropped,
    to be inferred again from the shapes given."""
    inputs = {value.name or "": value for value in model.graph.inputs
              if value.name not in model.graph.initializers}
    check_shapes(declared_dims(inputs.values()), shapes, where)
    for name, dims in shapes.items():
        inputs[name].shape = ir.Shape([int(d) for d in dims])
    for node in model.graph:
        for out in node.outputs:
            if out.shape is not None and not all(isinstance(d, int) for d in out.shape):
                out.shape = None


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


def _run_inference(model: ir.Model, *, stored_shapes: bool,
                   folded: Mapping[str, np.ndarray]) -> onnx.ModelProto | None:
    default = model.opset_imports.get("", model.opset_imports.get("ai.onnx"))
    attempts = (True, False) if default == _RESHAPE_WITHOUT_DATA else (False,)
    for reshape_14 in attempts:
        try:
            # Not strict: a custom-domain plugin op must not cost the shapes of everything else.
            # Bytes in, so the proto written for it is gone before inference makes its own copy.
            return onnx.shape_inference.infer_shapes(
                _inference_bytes(model, stored_shapes=stored_shapes, reshape_14=reshape_14,
                                 folded=folded),
                strict_mode=False, data_prop=True)
        except Exception:  # a malformed graph: no shapes beyond the stored ones
            continue
    return None


def _fold_rounds(model: ir.Model, inferred: onnx.ModelProto, *, stored_shapes: bool
                 ) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """Rule 3 of ``core.shape_folding``: infer again with the shape values it can compute,
    while they size something inference left unsized."""
    graph = model.graph
    folded: dict[str, np.ndarray] = {}
    if not any(node.op_type in ("Shape", "Size") for node in graph):
        return inferred, folded
    for _ in range(_FOLD_ROUNDS):
        dims = _static_dims_by_name(model, inferred)
        more = fold_shape_values(graph, _static_lookup(dims), folded)
        folded.update(more)  # sized by their arrays, whatever inference says of them
        if not _sizes_more(graph, more, dims, folded):
            break
        again = _run_inference(model, stored_shapes=stored_shapes, folded=folded)
        if again is None:
            break
        inferred = again
    return inferred, folded


def _sizes_more(graph: ir.Graph, more: Mapping[str, np.ndarray],
                known: Mapping[str, list[int]], folded: Mapping[str, np.ndarray]) -> bool:
    """Whether a node inference left unsized, and not folded, reads one of the ``more``
    values: only then is another round of inference worth it."""
    return any(
        any(v is not None and v.name in more for v in node.inputs)
        and any(o.name and o.name not in known and o.name not in folded for o in node.outputs)
        for node in graph)


def _static_lookup(dims: Mapping[str, list[int]]) -> Callable[[ir.Value], list[int] | None]:
    def static(value: ir.Value) -> list[int] | None:
        own = _static_dims(value)
        return own if own is not None else dims.get(value.name or "")
    return static


def _static_dims_by_name(model: ir.Model, inferred: onnx.ModelProto) -> dict[str, list[int]]:
    """Every value inference (or the model) sized in full, by name."""
    found: dict[str, list[int]] = {}
    for info in (*inferred.graph.value_info, *inferred.graph.output, *inferred.graph.input):
        tensor = info.type.tensor_type
        if tensor.HasField("shape") and all(d.HasField("dim_value") for d in tensor.shape.dim):
            found[info.name] = [d.dim_value for d in tensor.shape.dim]
    return found


def _infer(model: ir.Model, values: list[ir.Value], *, stored_shapes: bool) -> ValueTypes:
    inferred = _run_inference(model, stored_shapes=stored_shapes, folded={})
    if inferred is None:
        return ValueTypes()
    inferred, folded = _fold_rounds(model, inferred, stored_shapes=stored_shapes)
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
    for name, array in folded.items():  # exact: computed, not inferred
        if name in unset:
            shapes[name] = ir.Shape(array.shape, frozen=True)
            dtypes.setdefault(name, ir.DataType.from_numpy(array.dtype))
    return ValueTypes(shapes, dtypes, inferred_wins=not stored_shapes)
