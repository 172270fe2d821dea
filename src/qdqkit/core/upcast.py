"""Running fp16 models in fp32, so numbers compare quantization and not fp16 kernels.

onnxruntime's CPU fp16 arithmetic differs between versions (a ModelOpt-style fp16 Q/DQ model
verified at 52.9 dB on onnxruntime 1.31 and 24.9 dB on 1.23, optimizations off in both). Comparing
two fp16 models therefore measures the runtime as much as the models. ``upcast_float16`` turns
every fp16 tensor, constant, Cast target and value type of a model into fp32 in place: the graph
computes the same function, in a precision where both sides agree.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.value_types import set_dtype

_F16 = ir.DataType.FLOAT16
_F32 = ir.DataType.FLOAT


def _widened(tensor: ir.TensorProtocol) -> ir.Tensor:
    return ir.Tensor(np.asarray(tensor.numpy()).astype(np.float32), name=tensor.name)


def upcast_float16(model: ir.Model) -> bool:
    """Rewrite ``model`` (main graph) from fp16 to fp32 in place; True if anything changed."""
    graph = model.graph
    changed = False
    for value in graph.initializers.values():
        if value.const_value is not None and value.const_value.dtype == _F16:
            value.const_value = _widened(value.const_value)
            changed = True
    # Initializers too: a value keeps its declared type apart from its tensor's, and a float16
    # declaration left on a widened weight would be written out as such.
    values = [*graph.inputs, *graph.initializers.values()]
    for node in graph:
        values.extend(node.outputs)
        for name in ("value", "value_float"):  # Constant, ConstantOfShape
            attr = node.attributes.get(name)
            if attr is not None and attr.type == ir.AttributeType.TENSOR and attr.value.dtype == _F16:
                node.attributes[name] = ir.AttrTensor(name, _widened(attr.value))
                changed = True
        to = node.attributes.get("to")
        if node.op_type == "Cast" and to is not None and to.as_int() == _F16:
            node.attributes["to"] = ir.AttrInt64("to", _F32)
            changed = True
        out_dtype = node.attributes.get("output_dtype")
        if node.op_type == "DequantizeLinear" and out_dtype is not None and out_dtype.as_int() == _F16:
            node.attributes["output_dtype"] = ir.AttrInt64("output_dtype", _F32)
            changed = True
    for value in values:
        if value.dtype == _F16:
            set_dtype(value, _F32)
            changed = True
    return changed
