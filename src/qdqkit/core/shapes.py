"""Shapes and element types of a model's values from ONNX shape inference, without touching it.

``infer_value_types(model)`` returns a ``ValueTypes`` table (value name -> inferred shape and
dtype); the model is never changed and its file never re-read. Inference runs on one protobuf
serialization in which initializers over 64 elements carry their dims but not their data, so it
stays linear in the graph size and cheap next to loading the model. Known shapes win: the table
only fills what the model leaves unset.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import onnx
import onnx_ir as ir

_KEEP_INITIALIZER_ELEMENTS = 64  # shape tensors and scalars keep their values (data propagation)


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
        return inferred

    def dtype_of(self, value: ir.Value) -> ir.DataType | None:
        if value.dtype is not None:
            return value.dtype
        return self.dtypes.get(value.name or "")


class _GraphWithoutLargeWeights:
    """The graph as ``serde`` sees it, minus initializers too big to matter for shapes."""

    def __init__(self, graph: ir.Graph) -> None:
        self._graph = graph
        self.initializers = {
            name: value for name, value in graph.initializers.items()
            if not _is_large(value)
        }

    def __getattr__(self, name: str) -> Any:
        return getattr(self._graph, name)

    def __iter__(self) -> Iterator[ir.Node]:
        return iter(self._graph)


class _ModelView:
    def __init__(self, model: ir.Model) -> None:
        self._model = model
        self.graph = _GraphWithoutLargeWeights(model.graph)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._model, name)


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


def _proto_without_large_weights(model: ir.Model) -> onnx.ModelProto:
    proto = onnx.ModelProto()
    ir.serde.serialize_model_into(proto, _ModelView(model))  # type: ignore[arg-type]
    graph = model.graph
    large = [v for v in graph.initializers.values() if _is_large(v)]
    proto.graph.initializer.extend(_dims_only(v) for v in large)
    # The serializer declares each initializer's type again as value_info; a model file does not,
    # and ONNX inference before IR version 4 types only initializers listed as graph inputs. Drop
    # them so inference sees what the file says.
    declared = [vi for vi in proto.graph.value_info if vi.name not in graph.initializers]
    del proto.graph.value_info[:]
    proto.graph.value_info.extend(declared)
    return proto


_WEIGHTED_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})


def infer_value_types(model: ir.Model) -> ValueTypes:
    """Shapes and dtypes ONNX inference gives the node outputs the model leaves unset.

    Exporters sometimes store intermediate shapes that contradict the ops (a rank-0 output of a
    Sum), and onnx then gives up on everything downstream. When a weighted op is left without a
    shape that way, inference runs once more ignoring the stored intermediate shapes.
    """
    values = [out for node in model.graph for out in node.outputs]
    if all(v.shape is not None for v in values):
        return ValueTypes()
    types = _infer(model, values, ignore_stored=False)
    if all(
        types.shape_of(node.outputs[0]) is not None
        for node in model.graph if node.op_type in _WEIGHTED_OPS and node.outputs
    ):
        return types
    return _infer(model, values, ignore_stored=True)


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
                value.dtype = dtype


def _infer(model: ir.Model, values: list[ir.Value], *, ignore_stored: bool) -> ValueTypes:
    proto = _proto_without_large_weights(model)
    if ignore_stored:
        del proto.graph.value_info[:]
        for output in proto.graph.output:
            output.type.tensor_type.ClearField("shape")
    try:
        # Not strict: a custom-domain plugin op must not cost the shapes of everything else.
        inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=False, data_prop=True)
    except Exception:  # a malformed graph: no shapes beyond the stored ones
        return ValueTypes()
    infos = {vi.name: vi.type.tensor_type for vi in inferred.graph.value_info}
    infos.update({vi.name: vi.type.tensor_type for vi in inferred.graph.output})
    shapes: dict[str, ir.Shape] = {}
    dtypes: dict[str, ir.DataType] = {}
    for value in values:
        name = value.name or ""
        info = infos.get(name)
        if info is None:
            continue
        if (ignore_stored or value.shape is None) and info.HasField("shape"):
            shapes[name] = ir.Shape([
                d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
                for d in info.shape.dim
            ])
        if value.dtype is None and info.elem_type:
            dtypes[name] = ir.DataType(info.elem_type)
    return ValueTypes(shapes, dtypes, inferred_wins=ignore_stored)
