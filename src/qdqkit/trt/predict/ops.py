"""How TensorRT treats each ONNX op type when it builds an engine (rule base B3, C2, C8, C9).

These sets are the vocabulary of the predictor and of the lint checks: which ops fold into a
convolution's epilogue, which commute with Q/DQ, which are plain copies TensorRT elides, which are
pooling layers that need Q/DQ on both sides to run INT8.
"""

from __future__ import annotations

import onnx_ir as ir

from qdqkit.trt.engine import LayerKind

DEFAULT_DOMAINS = frozenset({"", "ai.onnx"})

# Pointwise activations TensorRT folds into a convolution's epilogue (C2, C7).
ACTIVATIONS = frozenset({
    "Relu", "Clip", "LeakyRelu", "Sigmoid", "Tanh", "HardSigmoid", "HardSwish", "Elu", "Selu",
    "Softplus", "PRelu", "ThresholdedRelu", "Gelu", "Mish",
})
# Elementwise binary ops: an epilogue when the other operand is a constant (bias, scale). ``Sum``
# is the variadic Add older exporters write (Caffe2's residual sums, TensorFlow's AddN): TensorRT's
# parser builds it as the same elementwise SUM layers (see ``is_add``).
BINARY_POINTWISE = frozenset({"Add", "Sub", "Mul", "Div", "Max", "Min", "Pow", "Sum"})
UNARY_POINTWISE = frozenset({
    "Abs", "Neg", "Exp", "Log", "Sqrt", "Reciprocal", "Erf", "Floor", "Ceil", "Round", "Sin", "Cos",
    "Not", "Sign",
})
POINTWISE = ACTIVATIONS | BINARY_POINTWISE | UNARY_POINTWISE | {"BatchNormalization"}

# Ops that only move or select values: Q/DQ pass through them (B3 "value-preserving data movement").
# Copies that change nothing, not even the shape (Dropout at inference): fusion passes them.
NO_OP_COPIES = frozenset({"Identity", "Dropout"})
ELIDED_COPY_OPS = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"})
DATA_MOVEMENT = ELIDED_COPY_OPS | {
    "Transpose", "Slice", "Split", "Gather", "GatherElements", "GatherND", "Expand", "Tile",
    "DepthToSpace", "SpaceToDepth",
}
# Single-input ops Q and DQ commute with (B2, B3): MaxPool proven, copies and zero-preserving ones.
COMMUTING = DATA_MOVEMENT | {"MaxPool", "GlobalMaxPool"}
# Quantizable but not commuting (C9): INT8 only with DQ on the input and Q on the output.
AVERAGING_POOLS = frozenset({"AveragePool", "GlobalAveragePool", "ReduceMean"})
POOLS = AVERAGING_POOLS | {"MaxPool", "GlobalMaxPool"}
# Evaluated at build time when their inputs are known shapes or constants.
SHAPE_OPS = frozenset({"Shape", "Size"})

_KIND_BY_OP = {
    "Conv": LayerKind.CONVOLUTION,
    "ConvTranspose": LayerKind.DECONVOLUTION,
    "Gemm": LayerKind.FULLY_CONNECTED,
    "MatMul": LayerKind.MATRIX_MULTIPLY,
    "Concat": LayerKind.CONCATENATION,
    "Slice": LayerKind.SLICE,
    "Split": LayerKind.SLICE,
    "Gather": LayerKind.GATHER,
    "GatherElements": LayerKind.GATHER,
    "GatherND": LayerKind.GATHER,
    "Softmax": LayerKind.SOFTMAX,
    "LayerNormalization": LayerKind.NORMALIZATION,
    "InstanceNormalization": LayerKind.NORMALIZATION,
    "GroupNormalization": LayerKind.NORMALIZATION,
    "Resize": LayerKind.RESIZE,
    "Upsample": LayerKind.RESIZE,
    "ReduceSum": LayerKind.REDUCE,
    "ReduceMax": LayerKind.REDUCE,
    "ReduceMin": LayerKind.REDUCE,
    "ReduceProd": LayerKind.REDUCE,
}


def is_default_domain(node: ir.Node) -> bool:
    return node.domain in DEFAULT_DOMAINS


def is_add(node: ir.Node) -> bool:
    """An Add, or a two-input Sum: TensorRT's parser makes both one elementwise SUM layer, which
    fuses into a conv as a residual Add does (C3)."""
    return node.op_type == "Add" or (node.op_type == "Sum" and len(node.inputs) == 2)


def layer_kind_of(node: ir.Node) -> LayerKind:
    """The engine layer kind an unfused node becomes."""
    if not is_default_domain(node) and node.domain != "com.microsoft":
        return LayerKind.PLUGIN
    op = node.op_type
    if op in POOLS and op != "ReduceMean":
        return LayerKind.POOLING
    if op == "ReduceMean":
        return LayerKind.REDUCE
    if op in POINTWISE:
        return LayerKind.POINTWISE
    if op in DATA_MOVEMENT and op not in _KIND_BY_OP:
        return LayerKind.SHUFFLE
    return _KIND_BY_OP.get(op, LayerKind.OTHER)


def is_plugin(node: ir.Node) -> bool:
    return not is_default_domain(node) and node.domain != "com.microsoft"
