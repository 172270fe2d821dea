"""What ``inspect`` reports about one model, as plain data (the CLI renders it as text or JSON)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class WeightedOpInfo:
    name: str
    op_type: str
    quantized: bool
    activation_quantized: bool
    weight_style: str  # "q-dq", "dq-only", "float", "computed"
    weight_granularity: str  # "per-channel(axis=0)", "per-tensor", "-"
    macs: int | None
    # What the op computes in: "INT8", "FP8", "float", "float (INT4 weight)" (weight-only)...
    runs: str = "float"


@dataclass
class ZeroPointProblem:
    node: str
    tensor: str
    detail: str


@dataclass
class InspectResult:
    path: str
    ir_version: int
    opsets: dict[str, int]
    producer: str
    node_count: int
    op_counts: dict[str, int]
    quantize_count: int
    dequantize_count: int
    styles: dict[str, int]
    quant_types: dict[str, int]
    scale_types: dict[str, int]
    granularity: dict[str, int]
    zero_point_problems: list[ZeroPointProblem]
    unreadable_qdq: list[str]
    weighted_ops: list[WeightedOpInfo] = field(default_factory=list)
    int8_mac_share: float | None = None
    total_macs: int | None = None
    # onnxruntime dynamic quantization ops by type (scales computed at run time)
    dynamic_quantization: dict[str, int] = field(default_factory=dict)
    # dynamic input dimensions counted as 1 for MACs ("images.N=1"); --shapes sets them
    assumed_dims: list[str] = field(default_factory=list)

    @property
    def is_quantized(self) -> bool:
        return self.quantize_count + self.dequantize_count > 0
