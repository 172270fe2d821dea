"""Latency of an engine, predicted or real, from a roofline cost model of each layer.

Rules (one formula for every layer of every engine; nothing depends on a layer's name):

1. A layer with arithmetic (convolution, deconvolution, matrix multiply) takes
   ``max(MACs * 2 / (peak[math] * efficiency[math]), bytes / (bandwidth * memory efficiency))``,
   where ``math`` is INT8 when an input is quantized, else the narrowest float type it reads or
   writes. FP32 runs as TF32 on GPUs that have TF32 tensor cores (Ampere and later), because
   that is what the TensorRT builder does unless told ``--noTF32``.
2. A layer without arithmetic (pooling, pointwise, reduce, ...) takes its bytes against bandwidth;
   a Reformat takes its bytes against bandwidth times the Reformat efficiency (strided layout
   changes reach less of the bandwidth than streaming kernels); a NoOp costs nothing.
3. Every layer that runs a kernel adds a fixed per-layer overhead (launch and tail of the kernel
   inside a CUDA-graph run). A float input in another float type than the layer computes in is
   converted first, as TensorRT's inserted Reformat would: bytes at the Reformat efficiency plus
   one overhead (predicted engines show no such Reformat; real engines list it as a layer).
4. Bytes are the layer's input and output tensors at their element size, channels padded to the
   vector width their format names (``Thirty-two wide ...`` pads C to 32); weights are not
   counted (ResNet-scale weights move in microseconds).

The four efficiencies and the overhead are the only fitted constants (``FITTED``, printed by
``--explain``); they were fitted once to the end-to-end medians of five real ResNet-18 engines on an
A100 (FP32, FP16 and three Q/DQ placements, ``tests/fixtures/trex-resnet18-a100``) and are used
unchanged for every GPU of ``trt.gpus``.
"""

from __future__ import annotations

import math as _math
import re
from dataclasses import dataclass, field

from qdqkit.trt.engine import EngineGraph, EngineLayer, EngineTensor, LayerKind, Precision
from qdqkit.trt.gpus import DEFAULT_GPU, Gpu, find_gpu

_ELEMENT_BYTES = {
    Precision.INT8: 1.0, Precision.UINT8: 1.0, Precision.FP8: 1.0, Precision.BOOL: 1.0,
    Precision.INT4: 0.5, Precision.FP4: 0.5, Precision.FP16: 2.0, Precision.BF16: 2.0,
    Precision.FP32: 4.0, Precision.INT32: 4.0, Precision.INT64: 8.0,
}
_VECTOR_WORDS = {"two": 2, "four": 4, "eight": 8, "sixteen": 16, "thirty-two": 32}
_VECTOR_WIDE = re.compile(r"\b(two|four|eight|sixteen|thirty-two) wide channel", re.IGNORECASE)
_CHANNEL_MOD = re.compile(r"channel % (\d+) == 0", re.IGNORECASE)
_ARITHMETIC = (LayerKind.CONVOLUTION, LayerKind.DECONVOLUTION, LayerKind.MATRIX_MULTIPLY,
               LayerKind.FULLY_CONNECTED)


RULES_TEXT = (
    "layer time = overhead + max(2 x MACs / (peak x efficiency), bytes / (bandwidth x efficiency))",
    "math: INT8 when an input is quantized, else the narrowest float; FP32 runs as TF32 on Ampere+",
    "Reformats: overhead + bytes / (bandwidth x Reformat efficiency); NoOps cost nothing",
    "end-to-end latency = the sum of the layers (one stream, one layer after another)",
)


@dataclass(frozen=True)
class CostConstants:
    """The fitted constants: achieved fractions of peak and the per-layer overhead."""

    int8_efficiency: float  # achieved fraction of the INT8 tensor-core peak
    fp16_efficiency: float  # ... of the FP16 tensor-core peak
    fp32_efficiency: float  # ... of the TF32 (or, without TF32, the FP32) peak
    memory_efficiency: float  # achieved fraction of memory bandwidth by streaming kernels
    reformat_efficiency: float  # ... by Reformat (layout and precision copy) kernels
    layer_overhead_us: float  # fixed cost of each kernel in a CUDA-graph run

    def efficiency(self, math: str) -> float:
        if math == "int8":
            return self.int8_efficiency
        if math == "fp16":
            return self.fp16_efficiency
        return self.fp32_efficiency

    def explain(self) -> list[tuple[str, str]]:
        return [
            ("INT8 tensor-core efficiency", f"{self.int8_efficiency:.0%} of peak"),
            ("FP16 tensor-core efficiency", f"{self.fp16_efficiency:.0%} of peak"),
            ("TF32/FP32 efficiency", f"{self.fp32_efficiency:.0%} of peak"),
            ("memory efficiency", f"{self.memory_efficiency:.0%} of bandwidth"),
            ("Reformat efficiency", f"{self.reformat_efficiency:.0%} of bandwidth"),
            ("per-layer overhead", f"{self.layer_overhead_us:.1f} us"),
        ]


# Fitted by benchmarks/fit_cost_model.py (see the module docstring); keep the two in step.
FITTED = CostConstants(
    int8_efficiency=0.4, fp16_efficiency=0.55, fp32_efficiency=0.4,
    memory_efficiency=0.94, reformat_efficiency=0.21, layer_overhead_us=1.0,
)


@dataclass(frozen=True)
class LayerTime:
    """The predicted time of one layer and what bounds it."""

    layer: str
    kind: str
    math: str | None  # "int8", "fp16", "tf32", "fp32", or None without arithmetic
    macs: int | None
    bytes: int
    compute_ms: float
    memory_ms: float
    overhead_ms: float
    time_ms: float
    bound: str  # "compute", "memory", "overhead" or "free"


@dataclass
class LatencyEstimate:
    """Predicted end-to-end latency of one engine on one GPU."""

    gpu: str
    total_ms: float
    layers: list[LayerTime]
    notes: list[str] = field(default_factory=list)

    def costliest(self, count: int = 3) -> list[LayerTime]:
        ranked = sorted(self.layers, key=lambda t: (-t.time_ms, t.layer))
        return [t for t in ranked[:count] if t.time_ms > 0]

    def to_json(self) -> dict[str, object]:
        return {"gpu": self.gpu, "total_ms": round(self.total_ms, 6), "notes": self.notes,
                "layers": [{"layer": t.layer, "time_ms": round(t.time_ms, 6), "math": t.math,
                            "bound": t.bound} for t in self.layers]}


@dataclass
class LatencyComparison:
    """Predicted latency of the engine as it is and of the same model built FP16."""

    gpu: str
    as_is: LatencyEstimate
    fp16: LatencyEstimate
    input_shapes: dict[str, list[int | str]]

    @property
    def speedup(self) -> float:
        """FP16 time over as-is time: above 1 the Q/DQ model is faster."""
        return self.fp16.total_ms / self.as_is.total_ms if self.as_is.total_ms > 0 else 1.0

    def to_json(self) -> dict[str, object]:
        return {
            "gpu": self.gpu, "input_shapes": self.input_shapes,
            "predicted_ms": round(self.as_is.total_ms, 6),
            "fp16_ms": round(self.fp16.total_ms, 6), "speedup_over_fp16": round(self.speedup, 4),
            "notes": self.as_is.notes,
            "costliest": [{"layer": t.layer, "time_ms": round(t.time_ms, 6), "bound": t.bound}
                          for t in self.as_is.costliest(5)],
        }


def _vector_width(tensor: EngineTensor) -> int:
    text = tensor.format or ""
    found = _VECTOR_WIDE.search(text)
    if found:
        return _VECTOR_WORDS[found.group(1).lower()]
    found = _CHANNEL_MOD.search(text)
    return int(found.group(1)) if found else 1


def _elements(shape: tuple[int, ...] | None, width: int) -> int | None:
    if shape is None:
        return None
    dims = [d if d > 0 else 1 for d in shape]
    if width > 1 and len(dims) >= 2:
        dims[1] = -(-dims[1] // width) * width
    return _math.prod(dims)


def _tensor_bytes(tensor: EngineTensor, fallback: tuple[int, ...] | None) -> int:
    size = _ELEMENT_BYTES.get(tensor.precision, 2.0)  # unknown precision: assume a 16-bit type
    count = _elements(tensor.shape if tensor.shape is not None else fallback, _vector_width(tensor))
    return int(count * size) if count is not None else 0


def layer_bytes(layer: EngineLayer) -> int:
    """Bytes a layer reads and writes (rule 4); a tensor without a shape borrows its twin's."""
    shapes = [t.shape for t in (*layer.inputs, *layer.outputs) if t.shape is not None]
    fallback = shapes[0] if shapes else None
    return sum(_tensor_bytes(t, fallback) for t in (*layer.inputs, *layer.outputs))


def _int_list(value: object) -> list[int] | None:
    if isinstance(value, list) and value and all(isinstance(v, int) for v in value):
        return list(value)
    return None


def layer_macs(layer: EngineLayer) -> int | None:
    """MACs of an arithmetic layer: the prediction's count, else from a real export's fields."""
    if layer.cost is not None:
        return layer.cost.macs
    if layer.kind not in _ARITHMETIC or not layer.inputs or not layer.outputs:
        return None
    x, y = layer.inputs[0].shape, layer.outputs[0].shape
    if x is None or y is None or len(x) < 2:
        return None
    out = _math.prod(d if d > 0 else 1 for d in y)
    kernel = _int_list(layer.extra.get("Kernel"))
    if layer.kind in (LayerKind.CONVOLUTION, LayerKind.DECONVOLUTION) and kernel is not None:
        groups = layer.extra.get("Groups")
        groups = groups if isinstance(groups, int) and groups > 0 else 1
        if layer.kind is LayerKind.DECONVOLUTION:
            return _math.prod(d if d > 0 else 1 for d in x) * (y[1] // groups) * _math.prod(kernel)
        return out * (max(x[1], 1) // groups) * _math.prod(kernel)
    return out * max(x[-1], 1)  # a matrix multiply: every output sums over the last input dim


def _float_rank(precision: Precision) -> int:
    return {Precision.FP16: 1, Precision.BF16: 1, Precision.FP32: 2}.get(precision, 0)


def compute_precision(layer: EngineLayer) -> Precision:
    """INT8 when an input is quantized, else the narrowest float type the layer reads or writes."""
    if layer.cost is not None and layer.cost.int8_compute:
        return Precision.INT8
    if any(t.precision.is_quantized for t in layer.inputs):
        return Precision.INT8
    floats = [t.precision for t in (*layer.inputs, *layer.outputs) if t.precision.is_float]
    return min(floats, key=_float_rank) if floats else Precision.UNKNOWN


def _math_mode(precision: Precision, gpu: Gpu, tf32: bool) -> str:
    if precision.is_quantized:
        return "int8"
    if precision in (Precision.FP16, Precision.BF16) or not gpu.has_fp32:
        return "fp16"
    if precision is Precision.UNKNOWN:
        return "fp16"  # names-only exports: the common case of a --fp16/--best build
    return "tf32" if tf32 and gpu.tf32_tops is not None else "fp32"


def _conversion_bytes(layer: EngineLayer, compute: Precision) -> int:
    """Bytes of float inputs stored in another float type than the layer computes in (rule 3)."""
    if not compute.is_float:
        return 0
    total = 0
    for tensor in layer.inputs:
        if tensor.precision.is_float and tensor.precision != compute:
            count = _elements(tensor.shape, 1) or 0
            total += int(count * (_ELEMENT_BYTES[tensor.precision] + _ELEMENT_BYTES[compute]))
    return total


def _runs_a_kernel(layer: EngineLayer) -> bool:
    return layer.kind not in (LayerKind.NOOP, LayerKind.CONSTANT)


def time_layer(layer: EngineLayer, gpu: Gpu, constants: CostConstants = FITTED,
               tf32: bool = True) -> LayerTime:
    """The predicted time of one layer (rules 1-4 of the module docstring)."""
    kind = layer.kind.value
    if not _runs_a_kernel(layer):
        return LayerTime(layer.name, kind, None, None, 0, 0.0, 0.0, 0.0, 0.0, "free")
    moved = layer_bytes(layer)
    bandwidth = gpu.bandwidth_gbs * 1e9 / 1e3  # bytes per millisecond
    overhead = constants.layer_overhead_us / 1e3
    if layer.is_reformat:
        memory = moved / (bandwidth * constants.reformat_efficiency)
        bound = "memory" if memory > overhead else "overhead"
        return LayerTime(layer.name, kind, None, None, moved, 0.0, memory, overhead,
                         memory + overhead, bound)
    precision = compute_precision(layer)
    macs = layer_macs(layer) if layer.kind in _ARITHMETIC else None
    mode = _math_mode(precision, gpu, tf32) if macs else None
    compute = 0.0
    if macs and mode is not None:
        peak = gpu.peak_tops(mode) * 1e12 / 1e3  # operations per millisecond
        compute = 2.0 * macs / (peak * constants.efficiency(mode)) if peak > 0 else _math.inf
    memory = moved / (bandwidth * constants.memory_efficiency)
    converted = _conversion_bytes(layer, precision)
    if converted:
        memory += converted / (bandwidth * constants.reformat_efficiency)
        overhead *= 2
    core = max(compute, memory)
    bound = "compute" if compute >= memory else "memory"
    if overhead > core:
        bound = "overhead"
    return LayerTime(layer.name, kind, mode, macs, moved + converted, compute, memory, overhead,
                     core + overhead, bound)


def estimate_latency(engine: EngineGraph, gpu: Gpu | str = DEFAULT_GPU, *,
                     constants: CostConstants = FITTED, tf32: bool = True) -> LatencyEstimate:
    """Predicted end-to-end latency of ``engine`` on ``gpu``: the sum of its layers' times.

    Layers run one after another on one stream, as TensorRT runs them, so the times add up.
    """
    device = find_gpu(gpu) if isinstance(gpu, str) else gpu
    times = [time_layer(layer, device, constants, tf32) for layer in engine.layers]
    notes: list[str] = []
    if any(t.precision is Precision.UNKNOWN for layer in engine.layers for t in layer.inputs) or (
        engine.metadata.get("names_only")
    ):
        notes.append("some precisions are unknown: those layers are costed as FP16")
    shapeless = sum(1 for layer in engine.layers if _runs_a_kernel(layer) and not any(
        t.shape is not None for t in (*layer.inputs, *layer.outputs)))
    if shapeless:
        notes.append(f"{shapeless} layers have no shapes: only their overhead is counted")
    if device.tf32_tops is not None and tf32 and any(t.math == "tf32" for t in times):
        notes.append("FP32 layers run as TF32 (the builder's default on this GPU)")
    return LatencyEstimate(device.name, sum(t.time_ms for t in times), times, notes)


def annotate(engine: EngineGraph, estimate: LatencyEstimate) -> None:
    """Write each layer's predicted time into ``latency_ms`` (for reports and diffs)."""
    for layer, timed in zip(engine.layers, estimate.layers, strict=True):
        layer.latency_ms = round(timed.time_ms, 6)
    engine.metadata["latency"] = f"predicted by the cost model for {estimate.gpu}"


def as_float_build(engine: EngineGraph, precision: Precision) -> EngineGraph:
    """The engine of a Q/DQ-free model built with ``precision`` as its float type.

    Inner float tensors take ``precision``; network inputs and outputs keep their ONNX type (the
    builder converts them at the edges, rule 3).
    """
    edges = {t.name for t in (*engine.inputs, *engine.outputs)}
    layers = []
    for layer in engine.layers:
        def convert(tensor: EngineTensor) -> EngineTensor:
            if tensor.name in edges or not tensor.precision.is_float:
                return tensor
            return EngineTensor(tensor.name, precision, tensor.format, tensor.shape)
        layers.append(EngineLayer(
            name=layer.name, kind=layer.kind, onnx_nodes=list(layer.onnx_nodes),
            inputs=[convert(t) for t in layer.inputs], outputs=[convert(t) for t in layer.outputs],
            type_name=layer.type_name, origin=layer.origin, device=layer.device,
            notes=list(layer.notes), extra=dict(layer.extra), cost=layer.cost,
        ))
    metadata = dict(engine.metadata)
    metadata["builder"] = f"{precision.value} build"
    return EngineGraph(layers, list(engine.inputs), list(engine.outputs), engine.source,
                       engine.trt_version, engine.target, metadata)
