"""Which input of a weighted op is its weight, and which weight axis is the output channel.

TensorRT quantizes the weight of a Conv, ConvTranspose, Gemm or MatMul per output channel, and the
channel axis depends on the op and on where the weight sits:

1. Conv reads its weight (M x C/g x k...) at input 1, channels on axis 0; ConvTranspose
   (C x M/g x k...) on axis 1.
2. Gemm and MatMul take the constant operand as the weight, B (input 1) before A (input 0). For B,
   the channels are N: axis 0 of a transposed Gemm B, else the last axis; for A they are M: axis 0
   of a Gemm A (axis 1 if transposed), the second-to-last axis of a MatMul A.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx_ir as ir


def _flag(node: ir.Node, name: str) -> bool:
    attr = node.attributes.get(name)
    return attr is not None and bool(attr.as_int())


def weight_index(node: ir.Node, is_weight: Callable[[int], bool]) -> int | None:
    """The input of ``node`` that is its weight, or None; ``is_weight(i)`` judges Gemm/MatMul's."""
    if node.op_type in ("Conv", "ConvTranspose"):
        return 1 if len(node.inputs) > 1 else None
    if node.op_type not in ("Gemm", "MatMul"):
        return None
    for index in (1, 0):
        if index < len(node.inputs) and node.inputs[index] is not None and is_weight(index):
            return index
    return None


def output_channel_axis(node: ir.Node, index: int, rank: int) -> int:
    """The axis of the weight at input ``index`` (of rank ``rank``) that holds output channels."""
    op = node.op_type
    if op == "ConvTranspose":
        return 1
    if op == "Gemm":
        if index == 1:
            return 0 if _flag(node, "transB") else 1
        return 1 if _flag(node, "transA") else 0
    if op == "MatMul":
        return rank - 1 if index == 1 else max(rank - 2, 0)
    return 0


def is_depthwise_conv(node: ir.Node) -> bool:
    """A Conv with ``group`` > 1 whose weight is (C * m, 1, ...): one input channel per output."""
    group = node.attributes.get("group")
    if node.op_type != "Conv" or group is None or group.as_int() <= 1 or len(node.inputs) < 2:
        return False
    weight = node.inputs[1]
    shape = weight.shape if weight is not None else None
    return shape is None or (len(shape) >= 3 and shape[1] == 1)
