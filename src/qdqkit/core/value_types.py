"""Changing a value's element type without touching any other value.

onnx-ir's ``Value.dtype = t`` writes ``t`` into the value's type object, and values can share
one: a cloned model's values share their types with the original's. Upcasting a clone to run
it in float32 then retyped the original's fp16 values too, and the model written afterwards
declared float32 outputs for nodes that compute float16 (onnxruntime refused to load it).
"""

from __future__ import annotations

import onnx_ir as ir


def set_dtype(value: ir.Value, dtype: ir.DataType) -> None:
    """Give ``value`` element type ``dtype`` through a type object of its own."""
    if value.type is None or isinstance(value.type, ir.TensorType):
        value.type = ir.TensorType(dtype)
    else:  # a sequence or optional type keeps its structure; its element is retyped
        value.dtype = dtype
