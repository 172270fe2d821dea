"""``trtexec --exportProfile`` timings, matched to engine layers by name.

The file is a list: first ``{"count": N}`` (how many runs were profiled, not a layer), then one
record per layer with ``name`` and ``timeMs`` (all runs), ``averageMs``, ``medianMs`` (TensorRT
8.2+) and ``percentage``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qdqkit.core.errors import EngineFileError
from qdqkit.trt.engine import EngineGraph, EngineLayer


@dataclass
class LayerTiming:
    """One ``--exportProfile`` record."""

    name: str
    median_ms: float | None
    average_ms: float | None
    time_ms: float | None
    percentage: float | None

    @property
    def best_ms(self) -> float | None:
        """Median when the exporter wrote it (TensorRT 8.2+), else the average."""
        return self.median_ms if self.median_ms is not None else self.average_ms


def _number(path: Path, where: str, record: dict[str, Any], key: str) -> float | None:
    value = record.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise EngineFileError(f"{path}: {where}: {key} is not a number")
    return float(value)


def parse_profile(data: object, source: str | Path) -> list[LayerTiming]:
    """Layer records of already-parsed ``--exportProfile`` JSON, in file order."""
    path = Path(source)
    if isinstance(data, dict) and "Layers" in data:
        raise EngineFileError(
            f"{path}: this is an --exportLayerInfo file (the engine graph), not --exportProfile "
            "timings"
        )
    if not isinstance(data, list):
        raise EngineFileError(f"{path}: expected the list that trtexec --exportProfile writes")
    timings = []
    for index, record in enumerate(data):
        if not isinstance(record, dict):
            raise EngineFileError(
                f"{path}: record {index} is {type(record).__name__}, expected an object"
            )
        if "name" not in record:
            if "count" in record:  # the run-count header, not a layer
                continue
            raise EngineFileError(f"{path}: record {index} has no name")
        where = f"record {index} ({record['name']!r})"
        timing = LayerTiming(
            name=str(record["name"]),
            median_ms=_number(path, where, record, "medianMs"),
            average_ms=_number(path, where, record, "averageMs"),
            time_ms=_number(path, where, record, "timeMs"),
            percentage=_number(path, where, record, "percentage"),
        )
        if timing.best_ms is None:
            raise EngineFileError(f"{path}: {where} has no medianMs or averageMs")
        timings.append(timing)
    return timings


def attach_profile(graph: EngineGraph, timings: list[LayerTiming], source: str) -> None:
    """Set each layer's latency from the profile record of the same name.

    Records that match no layer are kept in ``metadata`` so reports can say the files disagree.
    """
    by_name: dict[str, list[EngineLayer]] = {}
    for layer in graph.layers:
        by_name.setdefault(layer.name, []).append(layer)
    unmatched = []
    for timing in timings:
        candidates = by_name.get(timing.name)
        if not candidates:
            unmatched.append(timing.name)
            continue
        # Duplicate names (loops, repeated subgraphs) are matched in order of appearance.
        layer = candidates.pop(0) if len(candidates) > 1 else candidates[0]
        layer.latency_ms = timing.best_ms
    graph.metadata["profile"] = source
    graph.metadata["unmatched_profile_records"] = unmatched
