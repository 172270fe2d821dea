"""What every engine-level rule (QDQ6xx) can ask of an engine: its layers, Reformats, names-only."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from qdqkit.core.text import plural
from qdqkit.trt.engine import EngineGraph, EngineLayer
from qdqkit.trt.engine_json import is_compute_layer


@dataclass
class ReformatInfo:
    name: str
    origin: str  # "QDQ" or "layout"
    from_precision: str
    to_precision: str
    from_format: str | None
    to_format: str | None
    latency_ms: float | None
    next_to_qdq: bool  # a layout Reformat touching a Q/DQ Reformat: two conversions in a row



@dataclass
class EngineContext:
    """What every engine rule's check can ask: the engine, its Reformats, whether names only."""

    graph: EngineGraph
    reformats: list[ReformatInfo]
    names_only: bool

    @cached_property
    def compute(self) -> list[EngineLayer]:
        """The layers doing the network's arithmetic, as the engine report counts them: rules
        about compute precision must not flag a Constant, marker or host copy."""
        return [layer for layer in self.graph.layers if is_compute_layer(layer)]

    @cached_property
    def quantized(self) -> bool:
        """Whether any compute layer runs quantized (a quantized Constant alone does not count)."""
        return any(layer.precision.is_quantized for layer in self.compute)

    @staticmethod
    def counted(n: int, noun: str, verb: str = "") -> str:
        """``1 layer runs`` / ``2 layers run``."""
        text = plural(n, noun)
        if verb:
            text += f" {verb}s" if n == 1 else f" {verb}"
        return text
