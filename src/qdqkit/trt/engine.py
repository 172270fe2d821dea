"""One model of a TensorRT engine, whether predicted from ONNX or read from ``trtexec`` exports.

``EngineGraph`` is a list of ``EngineLayer`` in execution order. Each layer names the ONNX nodes it
fused, its input and output tensors with precision and format, and optionally its latency. The
predictor (``trt.predict``) builds one from a Q/DQ model; the reader (``trt.engine_json``) builds one
from ``--exportLayerInfo``/``--exportProfile`` JSON. Reports, drawings and diffs take an
``EngineGraph`` and never care where it came from.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field, fields
from typing import Any


class Precision(str, enum.Enum):
    """Element type of an engine tensor (or the compute type of a layer)."""

    INT8 = "INT8"
    FP8 = "FP8"
    INT4 = "INT4"
    FP4 = "FP4"
    FP16 = "FP16"
    BF16 = "BF16"
    FP32 = "FP32"
    INT32 = "INT32"
    INT64 = "INT64"
    BOOL = "BOOL"
    UINT8 = "UINT8"
    UNKNOWN = "UNKNOWN"

    @property
    def is_quantized(self) -> bool:
        return self in (Precision.INT8, Precision.FP8, Precision.INT4, Precision.FP4)

    @property
    def is_float(self) -> bool:
        return self in (Precision.FP16, Precision.BF16, Precision.FP32)

    def __str__(self) -> str:
        return self.value


@dataclass
class EngineTensor:
    name: str
    precision: Precision = Precision.UNKNOWN
    format: str | None = None  # e.g. "Thirty-two wide channel vectorized row major Int8 format"
    shape: tuple[int, ...] | None = None


class LayerKind(str, enum.Enum):
    """What an engine layer does, normalized across TensorRT versions."""

    CONVOLUTION = "Convolution"
    DECONVOLUTION = "Deconvolution"
    MATRIX_MULTIPLY = "MatrixMultiply"
    FULLY_CONNECTED = "FullyConnected"
    POOLING = "Pooling"
    POINTWISE = "PointWise"
    ELEMENTWISE = "ElementWise"
    ACTIVATION = "Activation"
    REFORMAT = "Reformat"
    QUANTIZE = "Quantize"
    DEQUANTIZE = "Dequantize"
    SHUFFLE = "Shuffle"
    CONCATENATION = "Concatenation"
    SLICE = "Slice"
    PADDING = "Padding"
    REDUCE = "Reduce"
    SOFTMAX = "Softmax"
    NORMALIZATION = "Normalization"
    RESIZE = "Resize"
    SCALE = "Scale"
    CONSTANT = "Constant"
    GATHER = "Gather"
    PLUGIN = "Plugin"
    NOOP = "NoOp"
    MYELIN = "Myelin"
    OTHER = "Other"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True)
class LayerCost:
    """What a predicted compute layer costs: its multiply-accumulates and their precision."""

    macs: int | None  # None when the shapes are unknown
    int8_compute: bool  # whether those MACs run on INT8 kernels


@dataclass
class EngineLayer:
    name: str
    kind: LayerKind
    onnx_nodes: list[str] = field(default_factory=list)
    inputs: list[EngineTensor] = field(default_factory=list)
    outputs: list[EngineTensor] = field(default_factory=list)
    latency_ms: float | None = None  # median/average time per run
    type_name: str | None = None  # the exporter's own LayerType string, e.g. "CaskConvolution"
    origin: str | None = None  # "QDQ" for Reformats made from Q/DQ nodes, "layout" otherwise
    tactic: str | None = None
    device: str = "GPU"  # "GPU" or "DLA"
    notes: list[str] = field(default_factory=list)  # why the predictor decided what it did
    extra: dict[str, Any] = field(default_factory=dict)  # unknown fields, kept as read
    cost: LayerCost | None = None  # predicted weighted layers only

    def to_json(self) -> dict[str, Any]:
        # The cost has always been printed inside ``extra`` as "macs" and "int8_compute".
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "cost"}
        if self.cost is not None:
            extra = dict(self.extra)
            if self.cost.macs is not None:
                extra["macs"] = self.cost.macs
            extra["int8_compute"] = self.cost.int8_compute
            data["extra"] = extra
        return data

    @property
    def input_precision(self) -> Precision:
        return self.inputs[0].precision if self.inputs else Precision.UNKNOWN

    @property
    def output_precision(self) -> Precision:
        return self.outputs[0].precision if self.outputs else Precision.UNKNOWN

    @property
    def precision(self) -> Precision:
        """The layer's compute precision: what its kernel reads (its first input).

        A convolution reading INT8 runs INT8 tensor-core kernels even when it writes FP16; a
        Reformat is reported by its input here and by ``output_precision`` for where it goes.
        """
        if self.inputs:
            return self.inputs[0].precision
        return self.output_precision

    @property
    def is_reformat(self) -> bool:
        return self.kind in (LayerKind.REFORMAT, LayerKind.QUANTIZE, LayerKind.DEQUANTIZE)


@dataclass
class EngineGraph:
    layers: list[EngineLayer]
    inputs: list[EngineTensor] = field(default_factory=list)
    outputs: list[EngineTensor] = field(default_factory=list)
    source: str = "unknown"  # "predicted" or the path of the file read
    trt_version: str | None = None
    target: str = "gpu"  # "gpu" or "dla"
    metadata: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.layers)

    def reformats(self) -> list[EngineLayer]:
        return [layer for layer in self.layers if layer.is_reformat]

    def qdq_reformats(self) -> list[EngineLayer]:
        return [layer for layer in self.reformats() if layer.origin == "QDQ"]

    def total_latency_ms(self) -> float | None:
        times = [layer.latency_ms for layer in self.layers if layer.latency_ms is not None]
        return sum(times) if times else None
