"""The Q/DQ view of a graph: every QuantizeLinear/DequantizeLinear, its parameters and its role.

Producers spell the same quantization in many ways (float weight -> Q -> DQ; integer weight
initializer -> DQ; int32 bias -> DQ; scales as initializers, Constant nodes or behind Identity/Cast;
a Q without zero point; one Q feeding several DQs; TF's Reshape/Transpose between a weight DQ and its
conv). ``QdqView`` reads them all into one vocabulary so the commands never look at spelling again.
All look-ups use the graph's use-def links: building the view is linear in the number of nodes.
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import numpy as np
import onnx_ir as ir

from qdqkit.core.constants import (
    constant_array,
    constant_array_and_dtype,
    constant_derived_values,
    constant_dtype,
    constant_source,
)
from qdqkit.core.weights import weight_index

# onnxruntime's dynamic quantization: integer weights, activation scales computed at run time.
DYNAMIC_QUANTIZATION_OPS = frozenset({"DynamicQuantizeLinear", "ConvInteger", "MatMulInteger",
                                      "DynamicQuantizeMatMul"})

QDQ_DOMAINS = frozenset({"", "ai.onnx", "com.microsoft"})
WEIGHTED_OPS = frozenset({"Conv", "ConvTranspose", "Gemm", "MatMul"})
# Ops a weight may pass through between its DQ and the weighted op (TF exports, fp16 casts).
WEIGHT_PATH_OPS = frozenset({"Reshape", "Transpose", "Identity", "Cast", "Unsqueeze", "Squeeze"})
# The integer types TensorRT's implicit INT8 (and the calibration cache) can carry.
INT8_TYPES = frozenset({ir.DataType.INT8, ir.DataType.UINT8})
# The float element types: a tensor of one of these may carry an INT8 scale or run FP16.
FLOAT_TYPES = frozenset({ir.DataType.FLOAT, ir.DataType.FLOAT16, ir.DataType.BFLOAT16,
                         ir.DataType.DOUBLE})


def is_quantize(node: ir.Node) -> bool:
    return node.op_type == "QuantizeLinear" and node.domain in QDQ_DOMAINS


def is_dequantize(node: ir.Node) -> bool:
    return node.op_type == "DequantizeLinear" and node.domain in QDQ_DOMAINS


def is_qdq(node: ir.Node) -> bool:
    return is_quantize(node) or is_dequantize(node)


def node_label(node: ir.Node) -> str:
    """How findings and errors name a node: its name, or its op type and first output."""
    if node.name:
        return node.name
    out = node.outputs[0].name if node.outputs else "?"
    return f"<unnamed {node.op_type} -> {out}>"


@dataclass(frozen=True)
class QuantParams:
    """The quantization one Q or DQ node applies.

    ``scale`` keeps the model's own element type (fp16 scales stay fp16) so values can be reported
    exactly; ``axis`` is None for per-tensor quantization.
    """

    scale: np.ndarray
    zero_point: np.ndarray | None
    quant_dtype: ir.DataType
    axis: int | None
    block_size: int | None
    scale_dtype: ir.DataType

    @property
    def per_channel(self) -> bool:
        return self.scale.size > 1

    @property
    def blocked(self) -> bool:
        return bool(self.block_size)

    @property
    def zero_point_is_zero(self) -> bool:
        zero_point = self.zero_point
        if zero_point is None:
            return True
        if zero_point.size == 1:  # per-tensor: a float test, a fraction of numpy's per-call cost
            return float(zero_point.reshape(-1)[0]) == 0
        return not np.any(np.asarray(zero_point, dtype=np.float64))

    @property
    def scalar_scale(self) -> float:
        """The per-tensor scale as a Python float (exact: float32/fp16 -> float64 is lossless)."""
        if self.scale.size != 1:
            raise ValueError("scalar_scale of a per-channel scale")
        return float(self.scale.reshape(-1)[0])

    @property
    def implicit_int8_scale(self) -> float:
        """The per-tensor int8 scale that keeps this quantization's range in implicit INT8.

        An explicit uint8 zero point of 0 spans [0, 255 * scale]; a symmetric int8 scale must be
        ``scale * 255 / 127`` to keep that amax instead of clipping at half of it. A Q without a
        zero point is uint8 only by the ONNX default: TensorRT reads it as int8, scale unchanged.
        Rounded to float32, the type the calibration cache stores.
        """
        if self.quant_dtype == ir.DataType.UINT8 and self.zero_point is not None:
            return float(np.float32(self.scalar_scale * 255.0 / 127.0))
        return self.scalar_scale

    @property
    def int8_compatible(self) -> bool:
        """Whether TensorRT's implicit INT8 path can carry this quantization."""
        return self.quant_dtype in INT8_TYPES and not self.blocked


def quant_range(dtype: ir.DataType) -> tuple[int, int]:
    ranges = {
        ir.DataType.INT8: (-128, 127),
        ir.DataType.UINT8: (0, 255),
        ir.DataType.INT4: (-8, 7),
        ir.DataType.UINT4: (0, 15),
        ir.DataType.INT16: (-32768, 32767),
        ir.DataType.UINT16: (0, 65535),
        ir.DataType.INT32: (-(2**31), 2**31 - 1),
    }
    return ranges.get(dtype, (0, 0))


def dtype_label(dtype: ir.DataType) -> str:
    return dtype.name.lower()


def _attr_int(node: ir.Node, name: str, default: int) -> int:
    # The attributes' plain dict: ``Attributes.get`` (a UserDict) raises and catches KeyError
    # for a missing name, several times slower, its ``in`` and ``[]`` are Python-level calls,
    # and most Q/DQ have neither axis nor block_size.
    attr = node.attributes.data.get(name)
    return attr.as_int() if attr is not None else default


def read_params(
    node: ir.Node,
    constant_of: Callable[[ir.Value | None], np.ndarray | None] = constant_array,
    dtype_of: Callable[[ir.Value | None], ir.DataType | None] = constant_dtype,
) -> QuantParams | None:
    """The parameters of a Q or DQ node, or None if its scale is computed at run time.

    ``constant_of`` reads a constant input and ``dtype_of`` its element type; ``QdqView`` passes
    memoized ones because a Q and its DQ(s) normally share the same scale and zero-point values.
    """
    scale_value = node.inputs[1] if len(node.inputs) > 1 else None
    scale = constant_of(scale_value)
    if scale is None:
        return None
    zp_value = node.inputs[2] if len(node.inputs) > 2 else None
    zero_point = constant_of(zp_value) if zp_value is not None else None
    if zp_value is not None and zero_point is None:
        return None
    quant_dtype = _quant_dtype(node, zp_value, dtype_of)
    block_size = _attr_int(node, "block_size", 0) or None
    axis: int | None = None
    if scale.size > 1 or block_size:
        axis = _attr_int(node, "axis", 1)
    scale_dtype = dtype_of(scale_value) or ir.DataType.FLOAT
    return QuantParams(
        scale=np.asarray(scale),
        zero_point=None if zero_point is None else np.asarray(zero_point),
        quant_dtype=quant_dtype,
        axis=axis,
        block_size=block_size,
        scale_dtype=scale_dtype,
    )


def _quant_dtype(
    node: ir.Node,
    zp_value: ir.Value | None,
    dtype_of: Callable[[ir.Value | None], ir.DataType | None],
) -> ir.DataType:
    if zp_value is not None:
        zp_type = dtype_of(zp_value)
        if zp_type is not None:
            return zp_type
    if is_quantize(node):
        out_dtype = _attr_int(node, "output_dtype", 0)
        if out_dtype:
            return ir.DataType(out_dtype)
        if node.outputs and node.outputs[0].dtype is not None:
            return node.outputs[0].dtype
        return ir.DataType.UINT8  # the ONNX default when neither zero point nor type is given
    x = node.inputs[0]
    x_type = dtype_of(x) if x is not None else None
    if x_type is not None:
        return x_type
    return ir.DataType.UINT8


class DqSource(enum.Enum):
    """Where a DequantizeLinear's integer input comes from."""

    QUANTIZE = "q"  # a QuantizeLinear (fake-quant pair)
    CONSTANT = "constant"  # an integer initializer (pre-quantized weight, int32 bias)
    GRAPH_INPUT = "graph-input"  # a quantized network input
    OTHER = "other"  # anything else (a computed integer tensor)


@dataclass(frozen=True)
class WeightRef:
    """A weighted op's constant operand reached through Q/DQ (or not)."""

    consumer: ir.Node
    input_index: int
    dequantize: ir.Node | None  # None: the op reads a float weight directly
    quantize: ir.Node | None  # the Q of a float weight, for fake-quant style
    source: ir.Value  # the float weight (Q input) or the integer initializer (DQ input)
    path: tuple[ir.Node, ...]  # Reshape/Transpose/... between the DQ and the consumer
    params: QuantParams | None

    @property
    def quantized(self) -> bool:
        return self.dequantize is not None

    @property
    def style(self) -> str:
        if self.dequantize is None:
            return "float"
        return "q-dq" if self.quantize is not None else "dq-only"


class QdqView:
    """The Q/DQ nodes of one graph and questions about them, answered from use-def links."""

    def __init__(self, graph: ir.Graph) -> None:
        self.graph = graph
        self.quantize_nodes: list[ir.Node] = []
        self.dequantize_nodes: list[ir.Node] = []
        self._params: dict[ir.Node, QuantParams | None] = {}
        self._constants: dict[ir.Value, np.ndarray | None] = {}
        self._dtypes: dict[ir.Value, ir.DataType | None] = {}
        self._shared_params: dict[tuple[ir.Value | None, ir.Value, int, int], QuantParams | None] = {}
        # Values computed only from constants (a weight behind Reshape/Transpose, a Q of a weight):
        # TensorRT folds them at build time, so a Q/DQ on them quantizes a weight.
        self.constant_values = constant_derived_values(graph)
        for node in graph:
            # is_quantize / is_dequantize, spelled out: two calls a node add up over big graphs.
            op_type = node.op_type
            if op_type == "QuantizeLinear":
                found = self.quantize_nodes
            elif op_type == "DequantizeLinear":
                found = self.dequantize_nodes
            else:
                continue
            if node.domain in QDQ_DOMAINS:
                found.append(node)
                self._params[node] = self._read_params(node)

    def _read_params(self, node: ir.Node) -> QuantParams | None:
        """``read_params``, once per spelling: a Q and its DQ(s) reading the same scale and zero
        point with the same attributes get one (immutable) ``QuantParams``. Only with a zero point
        of known type: without one, the integer type depends on the node itself."""
        inputs = node.inputs
        zp_value = inputs[2] if len(inputs) > 2 else None
        self._constant(zp_value)  # its type is then known too, from the same walk
        if zp_value is None or self._dtype(zp_value) is None:
            return read_params(node, self._constant, self._dtype)
        key = (inputs[1], zp_value, _attr_int(node, "axis", 1), _attr_int(node, "block_size", 0))
        try:
            return self._shared_params[key]
        except KeyError:
            params = self._shared_params[key] = read_params(node, self._constant, self._dtype)
            return params

    def _constant(self, value: ir.Value | None) -> np.ndarray | None:
        if value is None:
            return None
        try:
            return self._constants[value]
        except KeyError:
            array, dtype = constant_array_and_dtype(value)
            self._constants[value] = array
            self._dtypes[value] = dtype
            return array

    def _dtype(self, value: ir.Value | None) -> ir.DataType | None:
        if value is None:
            return None
        try:
            return self._dtypes[value]
        except KeyError:
            dtype = self._dtypes[value] = constant_dtype(value)
            return dtype

    # ------------------------------------------------------------------ basic facts
    @property
    def qdq_count(self) -> int:
        return len(self.quantize_nodes) + len(self.dequantize_nodes)

    def params(self, node: ir.Node) -> QuantParams | None:
        try:
            return self._params[node]
        except KeyError:
            params = self._params[node] = self._read_params(node)
            return params

    def unreadable(self) -> list[ir.Node]:
        """Q/DQ nodes whose scale or zero point is not a build-time constant."""
        return [n for n, p in self._params.items() if p is None]

    # ------------------------------------------------------------------ structure
    def dq_source(self, dq: ir.Node) -> DqSource:
        x = dq.inputs[0]
        if x is None:
            return DqSource.OTHER
        producer = x.producer()
        if producer is not None and is_quantize(producer):
            return DqSource.QUANTIZE
        if x in self.constant_values or constant_source(x) is not None:
            return DqSource.CONSTANT
        if x.is_graph_input():
            return DqSource.GRAPH_INPUT
        return DqSource.OTHER

    def quantize_of(self, dq: ir.Node) -> ir.Node | None:
        x = dq.inputs[0]
        producer = x.producer() if x is not None else None
        return producer if producer is not None and is_quantize(producer) else None

    def dequantizers_of(self, q: ir.Node) -> list[ir.Node]:
        return [use.node for use in q.outputs[0].uses() if is_dequantize(use.node)]

    def is_weight_quantize(self, q: ir.Node) -> bool:
        """A Q whose input is computed from constants only: it quantizes a weight."""
        x = q.inputs[0]
        return x is not None and (x in self.constant_values or constant_source(x) is not None)

    def activation_quantizers(self) -> list[ir.Node]:
        return [q for q in self.quantize_nodes if not self.is_weight_quantize(q)]

    def dequantize_producer(self, value: ir.Value | None) -> ir.Node | None:
        """The DQ that produces ``value`` directly, if any."""
        if value is None:
            return None
        producer = value.producer()
        return producer if producer is not None and is_dequantize(producer) else None

    def activation_scale_of(self, value: ir.Value) -> float | None:
        """The per-tensor scale of the first activation Q that reads ``value``."""
        for use in value.uses():
            if is_quantize(use.node) and use.idx == 0:
                params = self.params(use.node)
                if params is not None and not params.per_channel:
                    return params.scalar_scale
        return None

    # ------------------------------------------------------------------ weighted ops
    @cached_property
    def weighted_nodes(self) -> list[ir.Node]:
        return [n for n in self.graph if n.op_type in WEIGHTED_OPS and n.domain in ("", "ai.onnx")]

    def weight_index(self, node: ir.Node) -> int | None:
        """Which input of a weighted op is its constant weight, or None if both are computed."""
        return weight_index(node, lambda index: self.weight_ref(node, index) is not None)

    def weight_ref(self, node: ir.Node, index: int) -> WeightRef | None:
        """Follow input ``index`` back to a constant weight, through DQ and weight-path ops."""
        value = node.inputs[index] if index < len(node.inputs) else None
        path: list[ir.Node] = []
        while value is not None and len(path) < 8:
            producer = value.producer()
            if constant_source(value) is not None and (
                producer is None or producer.op_type in ("Constant", "Identity", "Cast")
            ):
                return WeightRef(node, index, None, None, value, tuple(reversed(path)), None)
            if producer is None:
                return None
            if is_dequantize(producer):
                return self._weight_from_dq(node, index, producer, tuple(reversed(path)))
            if producer.op_type not in WEIGHT_PATH_OPS:
                return None
            path.append(producer)
            value = producer.inputs[0]
        return None

    def _weight_from_dq(
        self, node: ir.Node, index: int, dq: ir.Node, path: tuple[ir.Node, ...]
    ) -> WeightRef | None:
        x = dq.inputs[0]
        if x is None:
            return None
        q = self.quantize_of(dq)
        if q is not None:
            source = q.inputs[0]
            if source is None or not self.is_weight_quantize(q):
                return None
            return WeightRef(node, index, dq, q, source, path, self.params(dq))
        if x not in self.constant_values and constant_source(x) is None:
            return None
        return WeightRef(node, index, dq, None, x, path, self.params(dq))

    def activation_index(self, node: ir.Node) -> int | None:
        """The computed (activation) input of a weighted op."""
        w = self.weight_index(node)
        if w is None:
            return None
        return 0 if w == 1 else 1

    def input_is_dequantized(self, node: ir.Node, index: int) -> bool:
        """Whether input ``index`` of ``node`` is produced by a DQ (INT8 in TensorRT's eyes)."""
        value = node.inputs[index] if index < len(node.inputs) else None
        return self.dequantize_producer(value) is not None
