"""What a model expects to be fed: its graph inputs that are not initializers.

Data sources check and cast every batch against these facts (name, element type, dimensions), and
the random source sizes its values from them. A dimension is an ``int`` when the model fixes it and
``None`` when it is dynamic (a ``dim_param`` or no value); the symbolic name is kept for messages.

Each input's batch axis (where samples stack) is decided from all the inputs together:

1. When some input's axis 0 is dynamic, the batch is dynamic: an input with a dynamic axis 0 is
   batched on it; an input whose axis 0 is fixed is batched on its first axis named like a dynamic
   axis 0 of another input (``state [2, batch, 128]`` beside ``input [batch, 512]``: axis 1), and
   has no batch axis when none is so named (``scale [1]`` beside ``x [N, 3]``).
2. When every input's axis 0 is fixed, axis 0 is the batch axis of a fixed batch if all inputs
   agree on its size; if they disagree nothing says which one is the batch, so no input has one.
3. A scalar (rank 0) has no batch axis; an input of unknown rank is taken as batched on axis 0.

An input without a batch axis is fed whole: one value for every sample of a batch.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import onnx
from onnx import helper, numpy_helper

from qdqkit.core.errors import QdqkitError

# Symmetric int8 as TensorRT uses it: -127..127 (never -128).
_QUANT_LIMITS: dict[int, tuple[int, int]] = {
    onnx.TensorProto.INT8: (-127, 127),
    onnx.TensorProto.UINT8: (0, 255),
    onnx.TensorProto.INT16: (-32767, 32767),
    onnx.TensorProto.UINT16: (0, 65535),
}


@dataclass(frozen=True)
class ModelInput:
    """One graph input: ``dims`` is None when the model does not say its rank.

    ``batch_axis`` is the axis samples stack on, None for an input fed whole (module docstring).
    """

    name: str
    dtype: np.dtype
    dims: tuple[int | None, ...] | None
    dim_names: tuple[str, ...] | None = None
    batch_axis: int | None = 0

    @property
    def rank(self) -> int | None:
        return None if self.dims is None else len(self.dims)

    def shape_text(self) -> str:
        """``[N, 3, 224, 224]``: the shape as the model spells it, for messages."""
        if self.dims is None:
            return "[any rank]"
        names = self.dim_names or ("?",) * len(self.dims)
        parts = [str(d) if d is not None else (n or "?") for d, n in zip(self.dims, names,
                                                                        strict=True)]
        return "[" + ", ".join(parts) + "]"


def model_inputs(model: onnx.ModelProto) -> tuple[ModelInput, ...]:
    """The inputs a caller must feed, in graph order (initializers listed as inputs excluded)."""
    initializers = {init.name for init in model.graph.initializer}
    found = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor_type = value.type.tensor_type
        if not value.type.HasField("tensor_type") or tensor_type.elem_type == 0:
            raise QdqkitError(
                f"model input '{value.name}' is not a typed tensor; qdqkit can only feed tensors"
            )
        try:
            dtype = np.dtype(helper.tensor_dtype_to_np_dtype(tensor_type.elem_type))
        except Exception:
            raise QdqkitError(
                f"model input '{value.name}' has ONNX element type {tensor_type.elem_type}, "
                "which numpy data cannot feed"
            ) from None
        dims: tuple[int | None, ...] | None = None
        names: tuple[str, ...] | None = None
        if tensor_type.HasField("shape"):
            dims = tuple(
                d.dim_value if d.HasField("dim_value") and d.dim_value > 0 else None
                for d in tensor_type.shape.dim
            )
            names = tuple(d.dim_param for d in tensor_type.shape.dim)
        found.append(ModelInput(value.name, dtype, dims, names))
    if not found:
        raise QdqkitError("the model has no inputs to feed (every graph input is an initializer)")
    return tuple(replace(item, batch_axis=axis)
                 for item, axis in zip(found, _batch_axes(found), strict=True))


def _batch_axes(inputs: Sequence[ModelInput]) -> list[int | None]:
    """The batch axis of every input, by the rules of the module docstring."""
    leading = [i.dims[0] for i in inputs if i.dims]  # axis 0 of the inputs of rank 1 or more
    if None not in leading:  # rule 2: a fixed batch, when the inputs agree on its size
        agreed = len(set(leading)) == 1
        return [0 if i.dims is None or (i.dims and agreed) else None for i in inputs]
    names = {i.dim_names[0] for i in inputs
             if i.dims and i.dims[0] is None and i.dim_names and i.dim_names[0]}
    return [_dynamic_batch_axis(i, names) for i in inputs]


def _dynamic_batch_axis(item: ModelInput, batch_names: set[str]) -> int | None:
    """Rule 1: axis 0 when dynamic, else the first dynamic axis named like a batch."""
    if item.dims is None:
        return 0
    names = item.dim_names or ("",) * len(item.dims)
    for axis, (dim, name) in enumerate(zip(item.dims, names, strict=True)):
        if dim is None and (axis == 0 or name in batch_names):
            return axis
    return None


def input_quant_ranges(model: onnx.ModelProto) -> dict[str, tuple[float, float]]:
    """Per graph input quantized by a per-tensor QuantizeLinear: the float range that Q covers.

    The range is ``(qmin - zero_point) * scale .. (qmax - zero_point) * scale`` with int8 taken as
    -127..127, i.e. +-127*scale for TensorRT's symmetric int8. One pass over the nodes.
    """
    inputs = {value.name for value in model.graph.input}
    constants: dict[str, onnx.TensorProto] = {t.name: t for t in model.graph.initializer}
    for node in model.graph.node:
        if node.op_type == "Constant" and node.output:
            for attr in node.attribute:
                if attr.name == "value" and attr.type == onnx.AttributeProto.TENSOR:
                    constants[node.output[0]] = attr.t
    ranges: dict[str, tuple[float, float]] = {}
    for node in model.graph.node:
        if node.op_type != "QuantizeLinear" or len(node.input) < 2 or node.input[0] not in inputs:
            continue
        scale_proto = constants.get(node.input[1])
        if scale_proto is None:
            continue
        scale = numpy_helper.to_array(scale_proto).astype(np.float64)
        if scale.size != 1:
            continue
        zero_point = 0.0
        quant_type: int = onnx.TensorProto.UINT8  # the spec's default when no zero point is given
        zp_proto = constants.get(node.input[2]) if len(node.input) > 2 and node.input[2] else None
        if zp_proto is not None:
            zero_point = float(numpy_helper.to_array(zp_proto).reshape(-1)[0])
            quant_type = zp_proto.data_type
        lo, hi = _QUANT_LIMITS.get(quant_type, (-127, 127))
        s = float(abs(scale.reshape(-1)[0]))
        ranges.setdefault(node.input[0], ((lo - zero_point) * s, (hi - zero_point) * s))
    return ranges
