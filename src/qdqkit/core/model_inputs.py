"""What a model expects to be fed: its graph inputs that are not initializers.

Data sources check and cast every batch against these facts (name, element type, dimensions), and
the random source sizes its values from them. A dimension is an ``int`` when the model fixes it and
``None`` when it is dynamic (a ``dim_param`` or no value); the symbolic name is kept for messages.
"""

from __future__ import annotations

from dataclasses import dataclass

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
    """One graph input: ``dims`` is None when the model does not say its rank."""

    name: str
    dtype: np.dtype
    dims: tuple[int | None, ...] | None
    dim_names: tuple[str, ...] | None = None

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
    return tuple(found)


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
