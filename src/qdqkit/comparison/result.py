"""What ``compare`` returns: typed rows, written to JSON field by field in declaration order."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from qdqkit.comparison.pairing import SketchNode
from qdqkit.core.numerics import ErrorMetrics


@dataclass(frozen=True)
class Histogram:
    """Counts of |x| (the float model's values) in equal bins from 0, with the quantizer's range."""

    bin_width: float
    counts: list[int]
    clip: float  # |x| beyond this is clipped by the quantizer
    absmax: float


@dataclass
class TensorRow:
    """One quantized activation: its parameters, its error in both views, clipping."""

    name: str
    float_name: str | None
    scale: float | list[float]
    zero_point: int | list[int] | None
    quant_type: str
    graph: ErrorMetrics | None  # the Q/DQ model's dequantized tensor vs the float tensor
    local: ErrorMetrics | None  # DQ(Q(float tensor)) vs the float tensor: rounding and clipping
    clipped_fraction: float | None
    saturated_fraction: float | None
    histogram: Histogram | None = None


@dataclass(frozen=True)
class WeightError:
    """A quantized weight against the float model's: overall and per output channel."""

    input_index: int
    snr_db: float
    min_channel_snr_db: float | None
    worst_channel: int | None
    channel_snr_db: list[float]


@dataclass
class WhatIf:
    """What running one node unquantized (FP16) changes: output SNR and predicted engine cost."""

    output_snr_db: float  # the worst output's SNR with this node unquantized
    snr_gain_db: float  # against the Q/DQ model's on the same samples
    reformats_added: int | None  # predicted Reformat layers, variant minus Q/DQ model
    int8_macs_lost: int | None  # predicted MACs that leave INT8 kernels
    samples: int


@dataclass
class FallbackStep:
    """The fallback list's first ``nodes`` entries run FP16 together."""

    nodes: int
    output_snr_db: float
    snr_gain_db: float
    reformats_added: int | None
    int8_macs_lost: int | None


@dataclass
class NodeRow:
    """One quantized node (reads Q/DQ outputs), measured at its first output."""

    name: str
    op_type: str
    output: str
    float_output: str | None
    quantized_inputs: list[str]
    graph: ErrorMetrics | None  # accumulated: the Q/DQ model end to end
    local: ErrorMetrics | None  # layer-wise: float inputs through this node's own Q/DQ
    arrival_snr_db: float | None  # worst graph-wise SNR of what the node reads, before its Q
    snr_drop_db: float | None  # arrival minus output graph-wise SNR
    added_snr_db: float | None  # SNR of the noise added here (output minus arriving noise power)
    weights: list[WeightError] = field(default_factory=list)
    engine_layer: str | None = None
    engine_precision: str | None = None
    what_if: WhatIf | None = None


@dataclass(frozen=True)
class OutputRow:
    name: str
    float_name: str
    error: ErrorMetrics
    argmax_agreement: float | None
    topk_agreement: float | None
    k: int


@dataclass
class CompareResult:
    float_model: str
    quant_model: str
    data: str
    random_data: bool
    samples: int
    fp16_upcast: bool
    views: list[str]
    outputs: list[OutputRow]
    output_snr_db: float | None  # the worst output's SNR
    user_metric: float | None
    nodes: list[NodeRow]
    tensors: list[TensorRow]
    graph_ranking: list[str]  # nodes by the SNR of the noise they add, lowest first
    layer_ranking: list[str]  # nodes by layer-wise SNR, lowest first
    fallback: list[str]  # nodes by what-if gain, largest first (positive gains only)
    unpaired: list[str]
    trt: str
    # ["trt"] when the version came from the quantized model's record (``trt.build_record``).
    from_model: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # The fallback list's first 2, 4, 8... nodes (and all of them) FP16 together.
    fallback_steps: list[FallbackStep] = field(default_factory=list)
    graph: list[SketchNode] = field(default_factory=list, repr=False)  # for the drawing only

    def to_json(self) -> dict[str, Any]:
        """Every field but the drawing's graph sketch, in declaration order."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "graph"}

    def node(self, name: str) -> NodeRow:
        return next(n for n in self.nodes if n.name == name)
