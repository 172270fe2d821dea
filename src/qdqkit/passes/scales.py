"""The scale table the translator's passes share: one INT8 scale per tensor, keyed by value.

Keying by ``ir.Value`` (not by name) means a pass that renames or re-points a tensor keeps its scale
attached; names are read only when the outputs are written. Insertion order is kept, which makes the
written outputs deterministic and in the reference's order (extracted first, then propagated).
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from dataclasses import dataclass

import onnx_ir as ir


class ScaleOrigin(enum.Enum):
    QDQ = "qdq"  # read from the model's own Q/DQ
    PROPAGATED = "propagated"  # copied or derived across a scale-preserving op
    UNARY = "unary"  # the DLA unary 1.0 scale on a Conv feeding an Add


@dataclass
class ScaleEntry:
    value: ir.Value
    scale: float
    origin: ScaleOrigin
    source: str  # the Q/DQ node, or the rule that produced it


class ScaleTable:
    def __init__(self) -> None:
        self._entries: dict[ir.Value, ScaleEntry] = {}

    def __contains__(self, value: object) -> bool:
        return value in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self) -> Iterator[ScaleEntry]:
        return iter(list(self._entries.values()))

    def get(self, value: ir.Value | None) -> float | None:
        entry = self._entries.get(value) if value is not None else None
        return entry.scale if entry is not None else None

    def entry(self, value: ir.Value) -> ScaleEntry | None:
        return self._entries.get(value)

    def set(self, value: ir.Value, scale: float, origin: ScaleOrigin, source: str) -> None:
        self._entries[value] = ScaleEntry(value, scale, origin, source)

    def move(self, old: ir.Value, new: ir.Value) -> None:
        """Re-key ``old``'s scale to ``new`` (a pass replaced one tensor by the other)."""
        entry = self._entries.pop(old, None)
        if entry is not None and new not in self._entries:
            entry.value = new
            self._entries[new] = entry

    def discard(self, value: ir.Value) -> None:
        self._entries.pop(value, None)
