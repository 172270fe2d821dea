"""``trtexec --exportProfile`` timings, matched to engine layers by name.

The file is a list: first ``{"count": N}`` (how many runs were profiled, not a layer), then one
record per layer with ``name`` and ``timeMs`` (all runs), ``averageMs``, ``medianMs`` (TensorRT
8.2+) and ``percentage``.

A layer's time is its record's ``averageMs``: every TensorRT writes it, so summed layer times of
exports of any version compare the same statistic. ``medianMs`` stands in only for a record that
lacks the average. ``LayerTiming`` alone makes that choice; everything else asks it.
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
        """The layer's time: the average, else the median (``None`` when the record has neither)."""
        return self.average_ms if self.average_ms is not None else self.median_ms

    @property
    def measure(self) -> str | None:
        """The profile field ``best_ms`` reads, as reports name it."""
        if self.average_ms is not None:
            return "averageMs"
        return "medianMs" if self.median_ms is not None else None


def profile_measure(timings: list[LayerTiming]) -> str:
    """The fields the layer times of ``timings`` were read from: ``averageMs`` unless some record
    lacks it, then every field used (``averageMs or medianMs``). A profile without records names
    the field every export has."""
    used = {t.measure for t in timings if t.measure is not None}
    return " or ".join(sorted(used)) if used else "averageMs"


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


def refuse_foreign_profile(
    graph: EngineGraph, timings: list[LayerTiming], profile: str | Path, layer_info: str | Path
) -> None:
    """Refuse a profile whose records mostly name no layer of ``graph`` (read from ``layer_info``).

    Such a profile times another engine: every figure drawn from the few records that match would
    mislead, so reading stops here. Fewer unmatched records stay in ``metadata`` for the
    profile-mismatch rule (QDQ602) to report.
    """
    unmatched = len(graph.metadata.get("unmatched_profile_records") or [])
    if unmatched * 2 > len(timings):
        raise EngineFileError(
            f"{profile}: the profile is of another engine: {unmatched} of its {len(timings)} "
            f"records name no layer of {layer_info}; pass the --exportProfile file of the "
            "same trtexec run as the --exportLayerInfo file")
