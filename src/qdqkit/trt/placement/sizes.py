"""Which weighted ops stay float by structure: too small to gain (C15, C20) or decode arithmetic.

1. Too small (GPU only; DLA wants every layer INT8, I2). A Conv/ConvTranspose with fewer than 16
   input or output channels stays float unless TensorRT has efficient INT8 kernels for it: a
   dense conv with a square kernel and 8-aligned channels that is the first layer or has 16+
   channels on the other side, or a grouped conv with 8-aligned outputs and a kernel of 3 or more.
   A Gemm/MatMul with a reduction depth K or an output width N below 16 stays float. These are
   the thresholds ModelOpt measured: below them the Q/DQ Reformats cost more than INT8 saves.
   The policy applies them only where the Q would stand alone (see ``policy``): a small layer
   fed by an INT8 layer gets its Q fused for free, and float would cost a Reformat instead.
2. Decode arithmetic: a weighted op reading a Softmax (through copies) is a softmax expectation,
   the DFL box decode of anchor-free detectors (a 1x1 conv with the constant weights 0..n-1), or
   an attention-probability product: its input lives in [0, 1] with a few dominant values,
   exactly what a per-tensor INT8 grid represents worst. Decided by structure, never by names.
"""

from __future__ import annotations

from collections.abc import Callable

import onnx_ir as ir

from qdqkit.trt.predict.ops import DATA_MOVEMENT

MIN_CHANNELS = 16  # C20: fewer input or output channels have no efficient INT8 conv kernels
MIN_GEMM_DIM = 16  # C15: K or N below this regresses TensorRT INT8 GEMMs
_ALIGN = 8

ShapeOf = Callable[[ir.Value], "ir.Shape | None"]


def _ints(shape: ir.Shape | None) -> list[int] | None:
    if shape is None:
        return None
    dims = [d if isinstance(d, int) else -1 for d in shape]
    return dims


def too_small(node: ir.Node, weight: ir.Value, shape_of: ShapeOf, first_layer: bool) -> str | None:
    """Why ``node`` is too small to gain from INT8 (C15/C20), or None."""
    wshape = _ints(weight.shape if weight.shape is not None else shape_of(weight))
    if wshape is None or any(d < 0 for d in wshape):
        return None
    if node.op_type in ("Conv", "ConvTranspose"):
        group_attr = node.attributes.get("group")
        group = group_attr.as_int() if group_attr is not None else 1
        if len(wshape) < 3:
            return None
        if node.op_type == "Conv":
            out_ch, in_ch = wshape[0], wshape[1] * group
        else:
            in_ch, out_ch = wshape[0], wshape[1] * group
        if in_ch >= MIN_CHANNELS and out_ch >= MIN_CHANNELS:
            return None
        kernel = wshape[2:]
        square = len(set(kernel)) == 1
        if group == 1 and square and (out_ch % _ALIGN == 0 or in_ch % _ALIGN == 0) and (
            first_layer or max(in_ch, out_ch) >= MIN_CHANNELS
        ):
            return None
        if group > 1 and out_ch % _ALIGN == 0 and min(kernel) >= 3:
            return None
        return (f"{in_ch} input and {out_ch} output channels: below {MIN_CHANNELS} TensorRT has "
                "no INT8 kernel that beats FP16 (C20)")
    if node.op_type in ("Gemm", "MatMul"):
        out_shape = _ints(shape_of(node.outputs[0]))
        n = out_shape[-1] if out_shape else -1
        k = _reduction_depth(node, weight, wshape, shape_of)
        small = [f"{name} {value}" for name, value in (("K", k), ("N", n))
                 if 0 <= value < MIN_GEMM_DIM]
        if small:
            return (f"GEMM with {' and '.join(small)}: below {MIN_GEMM_DIM} INT8 is slower than "
                    "FP16 in TensorRT (C15)")
    return None


def _reduction_depth(node: ir.Node, weight: ir.Value, wshape: list[int], shape_of: ShapeOf) -> int:
    if weight is node.inputs[1]:
        if node.op_type == "Gemm":
            attr = node.attributes.get("transB")
            trans = attr is not None and attr.as_int() == 1
            return wshape[1] if trans else wshape[0]
        return wshape[-2] if len(wshape) >= 2 else wshape[0]
    a_shape = _ints(shape_of(node.inputs[1])) if node.inputs[1] is not None else None
    if not a_shape:
        return -1
    return a_shape[0] if len(a_shape) >= 2 else a_shape[-1]


def reads_softmax(value: ir.Value | None) -> ir.Node | None:
    """The Softmax that produces ``value`` through data-movement ops, if any."""
    current = value
    for _ in range(16):
        producer = current.producer() if current is not None else None
        if producer is None:
            return None
        if producer.op_type in ("Softmax", "LogSoftmax"):
            return producer
        if producer.op_type not in DATA_MOVEMENT or not producer.inputs:
            return None
        current = producer.inputs[0]
    return None
