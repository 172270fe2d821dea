"""End-to-end timing of an engine run, from whichever file recorded it.

Per-layer profile times add up to more than a real inference (profiling serializes the layers and
adds per-layer overhead), so a fair "A vs B" compares the end-to-end median too. trtexec reports it
in three places, all accepted here:

1. its log: ``GPU Compute Time: min = .. ms, max = .. ms, mean = .. ms, median = .. ms, ...``;
2. ``--exportTimes`` JSON: one record per inference (``computeMs`` / ``latencyMs``);
3. the ``*.profile.metadata.json`` summary that engine-explorer scripts write from that log:
   ``{"performance_summary": {"GPU Compute Time": [min, max, mean, median, percentile], ...}}``.
"""

from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qdqkit.core.errors import EngineFileError
from qdqkit.trt.engine import EngineGraph

END_TO_END_KEY = "end_to_end"

_LOG_LINE = re.compile(
    r"(GPU Compute Time|Latency): min = ([\d.eE+-]+) ms, max = ([\d.eE+-]+) ms, "
    r"mean = ([\d.eE+-]+) ms, median = ([\d.eE+-]+) ms"
)
# Order of the five numbers in a performance-summary list: min, max, mean, median, percentile.
_SUMMARY_MEDIAN, _SUMMARY_MEAN, _SUMMARY_MIN, _SUMMARY_MAX = 3, 2, 0, 1


@dataclass
class EndToEndTiming:
    """Whole-inference time of one engine run, in milliseconds."""

    median_ms: float
    mean_ms: float | None
    min_ms: float | None
    max_ms: float | None
    measure: str  # "GPU Compute Time" or "Latency"
    source: str


def _from_summary(summary: dict[str, Any], source: str) -> EndToEndTiming | None:
    for measure in ("GPU Compute Time", "Latency"):
        values = summary.get(measure)
        if isinstance(values, list) and len(values) >= 4 and all(
            isinstance(v, (int, float)) for v in values
        ):
            return EndToEndTiming(
                median_ms=float(values[_SUMMARY_MEDIAN]), mean_ms=float(values[_SUMMARY_MEAN]),
                min_ms=float(values[_SUMMARY_MIN]), max_ms=float(values[_SUMMARY_MAX]),
                measure=measure, source=source,
            )
    return None


def _from_times(records: list[Any], source: str) -> EndToEndTiming | None:
    for key, measure in (("computeMs", "GPU Compute Time"), ("latencyMs", "Latency")):
        values = [float(r[key]) for r in records if isinstance(r, dict) and isinstance(
            r.get(key), (int, float))]
        if values:
            return EndToEndTiming(
                median_ms=statistics.median(values), mean_ms=statistics.fmean(values),
                min_ms=min(values), max_ms=max(values), measure=measure, source=source,
            )
    spans = [float(r["endComputeMs"]) - float(r["startComputeMs"]) for r in records
             if isinstance(r, dict) and "endComputeMs" in r and "startComputeMs" in r]
    if spans:
        return EndToEndTiming(statistics.median(spans), statistics.fmean(spans), min(spans),
                              max(spans), "GPU Compute Time", source)
    return None


def _from_log(text: str, source: str) -> EndToEndTiming | None:
    found = {m.group(1): m for m in _LOG_LINE.finditer(text)}
    match = found.get("GPU Compute Time") or found.get("Latency")
    if match is None:
        return None
    low, high, mean, median = (float(match.group(i)) for i in range(2, 6))
    return EndToEndTiming(median, mean, low, high, match.group(1), source)


def parse_timing(text: str, source: str) -> EndToEndTiming:
    """Parse any of the three timing sources (see the module docstring)."""
    timing: EndToEndTiming | None
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        timing = _from_log(text, source)
    else:
        if isinstance(data, dict):
            summary = data.get("performance_summary", data)
            timing = _from_summary(summary, source) if isinstance(summary, dict) else None
        elif isinstance(data, list):
            timing = _from_times(data, source)
        else:
            timing = None
    if timing is None:
        raise EngineFileError(
            f"{source}: no end-to-end timing found; expected a trtexec log (with 'GPU Compute "
            "Time: ... median = ...'), --exportTimes JSON or a performance_summary JSON"
        )
    return timing


def read_timing(path: str | Path) -> EndToEndTiming:
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        raise EngineFileError(f"{path}: no such file (expected end-to-end timing)") from None
    except OSError as exc:
        raise EngineFileError(f"{path}: cannot read it: {exc}") from None
    return parse_timing(text, str(path))


def timing_beside(profile: Path) -> Path | None:
    """``X.profile.metadata.json`` next to ``X.profile.json``, when it exists."""
    candidate = profile.with_name(profile.name.removesuffix(".json") + ".metadata.json")
    return candidate if candidate.is_file() else None


def end_to_end_of(graph: EngineGraph) -> EndToEndTiming | None:
    value = graph.metadata.get(END_TO_END_KEY)
    return value if isinstance(value, EndToEndTiming) else None
