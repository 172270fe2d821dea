"""Reading constant tensors however a producer spelled them.

Exporters put scales and weights in initializers, in ``Constant`` nodes, or behind ``Identity`` and
``Cast`` nodes (fp16 scales cast up, TF-style identity chains). ``constant_array`` follows those
forms to the numbers; anything computed at run time is not a constant and yields ``None``.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

# Ops that pass a constant through unchanged (or only re-typed); followed when looking for a value.
_PASS_THROUGH_OPS = frozenset({"Identity", "Cast", "Constant"})


def constant_array(value: ir.Value | None) -> np.ndarray | None:
    """The numpy value of ``value`` if it is a build-time constant, else ``None``."""
    hops = 0
    while value is not None and hops < 16:
        if value.const_value is not None:
            return _to_numpy(value.const_value)
        node = value.producer()
        if (
            node is None
            or node.domain not in ("", "ai.onnx")
            or node.op_type not in _PASS_THROUGH_OPS
        ):
            return None
        if node.op_type == "Constant":
            return _constant_node_value(node)
        if node.op_type == "Cast":
            source = constant_array(node.inputs[0] if node.inputs else None)
            if source is None:
                return None
            to = ir.DataType(node.attributes["to"].as_int())
            return source.astype(to.numpy())
        value = node.inputs[0] if node.inputs else None
        hops += 1
    return None


def is_constant(value: ir.Value | None) -> bool:
    return constant_source(value) is not None


def constant_source(value: ir.Value | None) -> ir.Value | None:
    """The initializer or Constant-node output that ``value`` is a pass-through of, if any."""
    hops = 0
    while value is not None and hops < 16:
        if value.const_value is not None:
            return value
        node = value.producer()
        if (
            node is None
            or node.domain not in ("", "ai.onnx")
            or node.op_type not in _PASS_THROUGH_OPS
        ):
            return None
        if node.op_type == "Constant":
            return value
        value = node.inputs[0] if node.inputs else None
        hops += 1
    return None


def _to_numpy(tensor: ir.TensorProtocol) -> np.ndarray:
    array = tensor.numpy()
    # onnx-ir returns ml_dtypes arrays for int4/fp8; keep them, callers check dtype by ir.DataType.
    return np.asarray(array)


def _constant_node_value(node: ir.Node) -> np.ndarray | None:
    attrs = node.attributes
    if "value" in attrs:
        return _to_numpy(attrs["value"].as_tensor())
    if "value_float" in attrs:
        return np.array(attrs["value_float"].as_float(), dtype=np.float32)
    if "value_floats" in attrs:
        return np.array(attrs["value_floats"].as_floats(), dtype=np.float32)
    if "value_int" in attrs:
        return np.array(attrs["value_int"].as_int(), dtype=np.int64)
    if "value_ints" in attrs:
        return np.array(attrs["value_ints"].as_ints(), dtype=np.int64)
    return None


def constant_dtype(value: ir.Value | None) -> ir.DataType | None:
    """The ONNX element type of a constant, resolving through Constant/Identity/Cast."""
    hops = 0
    while value is not None and hops < 16:
        if value.const_value is not None:
            return value.const_value.dtype
        node = value.producer()
        if node is None or node.op_type not in _PASS_THROUGH_OPS:
            return value.dtype
        if node.op_type == "Cast":
            return ir.DataType(node.attributes["to"].as_int())
        if node.op_type == "Constant":
            if "value" in node.attributes:
                return node.attributes["value"].as_tensor().dtype
            if "value_float" in node.attributes or "value_floats" in node.attributes:
                return ir.DataType.FLOAT
            return ir.DataType.INT64
        value = node.inputs[0] if node.inputs else None
        hops += 1
    return None
