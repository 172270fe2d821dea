"""What every engine-level rule (QDQ6xx) can ask of an engine: its layers, Reformats, names-only."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property

from qdqkit.core.text import plural
from qdqkit.trt.engine import EngineGraph, EngineLayer
from qdqkit.trt.engine_analysis import is_compute, quantized_engine


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
        return [layer for layer in self.graph.layers if is_compute(layer)]

    @cached_property
    def quantized(self) -> bool:
        return quantized_engine(self.graph)

    @staticmethod
    def counted(n: int, noun: str, verb: str = "") -> str:
        """``1 layer runs`` / ``2 layers run``."""
        text = plural(n, noun)
        if verb:
            text += f" {verb}s" if n == 1 else f" {verb}"
        return text
