"""Is a TensorRT pipeline bound by the host or the device? Read from what ``trtexec`` exports.

Two sources, both accepted:

1. ``--exportTimes`` JSON: one record per iteration. TensorRT 8 to 10 write ``startEnqMs``,
   ``endEnqMs``, ``startH2dMs``, ``endH2dMs``, ``startComputeMs``, ``endComputeMs``,
   ``startD2hMs``, ``endD2hMs``, ``h2dMs``, ``computeMs``, ``d2hMs``, ``latencyMs`` (8.x adds
   ``endToEndMs``); TensorRT 7 spelled the copies ``startInMs``/``inMs`` and ``startOutMs``/``outMs``.
2. The ``*.profile.metadata.json`` performance summary (``"Enqueue Time"``, ``"H2D Latency"``,
   ``"GPU Compute Time"``, ``"D2H Latency"`` as [min, max, mean, median, percentile]).

The verdict, from medians: with per-iteration timestamps, the GPU's busy fraction (summed compute
over the span from the first compute start to the last compute end) decides: at least 90% busy is
device-bound. Otherwise, or without timestamps, the copies (H2D + D2H) longer than the compute make
it transfer-bound, an enqueue at least as long as the compute host-bound, else device-bound.
"""

from __future__ import annotations

import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qdqkit.core.errors import QdqkitError

DEVICE_BUSY = 0.9
# (phase, start key, end key, duration keys) in the newest spelling first.
_PHASES = (
    ("enqueue", ("startEnqMs",), ("endEnqMs",), ()),
    ("h2d", ("startH2dMs", "startInMs"), ("endH2dMs", "endInMs"), ("h2dMs", "inMs")),
    ("compute", ("startComputeMs",), ("endComputeMs",), ("computeMs",)),
    ("d2h", ("startD2hMs", "startOutMs"), ("endD2hMs", "endOutMs"), ("d2hMs", "outMs")),
)
_SUMMARY = {"enqueue": "Enqueue Time", "h2d": "H2D Latency", "compute": "GPU Compute Time",
            "d2h": "D2H Latency"}


@dataclass(frozen=True)
class PhaseTime:
    """One phase of an iteration, in milliseconds."""

    phase: str  # enqueue, h2d, compute, d2h
    median_ms: float
    mean_ms: float
    max_ms: float


@dataclass
class PipelineTiming:
    source: str
    iterations: int | None  # None for a summary
    phases: list[PhaseTime]
    gpu_busy: float | None  # summed compute / compute span; None without timestamps
    bound: str  # "device", "host" or "transfer"
    reason: str
    notes: list[str] = field(default_factory=list)

    def phase(self, name: str) -> PhaseTime | None:
        return next((p for p in self.phases if p.phase == name), None)


def _first(record: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    for key in keys:
        value = record.get(key)
        if isinstance(value, (int, float)):
            return float(value)
    return None


def _from_records(records: list[Any], source: str) -> PipelineTiming:
    rows = [r for r in records if isinstance(r, dict)]
    if not rows or _first(rows[0], ("startComputeMs", "computeMs")) is None:
        raise QdqkitError(f"{source}: not a trtexec --exportTimes file (no computeMs records)")
    phases: list[PhaseTime] = []
    for phase, starts, ends, durations in _PHASES:
        values = []
        for row in rows:
            start, end = _first(row, starts), _first(row, ends)
            value = end - start if start is not None and end is not None else _first(row, durations)
            if value is not None:
                values.append(value)
        if values:
            phases.append(PhaseTime(phase, statistics.median(values), statistics.fmean(values),
                                    max(values)))
    spans = [(float(r["startComputeMs"]), float(r["endComputeMs"])) for r in rows
             if isinstance(r.get("startComputeMs"), (int, float))
             and isinstance(r.get("endComputeMs"), (int, float))]
    busy = None
    if len(spans) >= 2:
        wall = max(e for _s, e in spans) - min(s for s, _e in spans)
        busy = min(1.0, sum(e - s for s, e in spans) / wall) if wall > 0 else None
    bound, reason = _verdict(phases, busy)
    return PipelineTiming(source, len(rows), phases, busy, bound, reason)


def _from_summary(summary: dict[str, Any], source: str) -> PipelineTiming:
    phases = []
    for phase, key in _SUMMARY.items():
        values = summary.get(key)
        if isinstance(values, list) and len(values) >= 4:
            phases.append(PhaseTime(phase, float(values[3]), float(values[2]), float(values[1])))
    if not any(p.phase == "compute" for p in phases):
        raise QdqkitError(f"{source}: the performance summary has no 'GPU Compute Time'")
    bound, reason = _verdict(phases, None)
    return PipelineTiming(source, None, phases, None, bound, reason,
                          ["a summary has no per-iteration timestamps: the verdict compares "
                           "median enqueue, copy and compute times"])


def _verdict(phases: list[PhaseTime], busy: float | None) -> tuple[str, str]:
    median = {p.phase: p.median_ms for p in phases}
    compute = median.get("compute", 0.0)
    copies = median.get("h2d", 0.0) + median.get("d2h", 0.0)
    enqueue = median.get("enqueue")
    if busy is not None and busy >= DEVICE_BUSY:
        return "device", (f"the GPU computes {busy:.0%} of the time: it is the bottleneck; make "
                          "the engine faster (precision, fusion)")
    idle = "" if busy is None else f"the GPU is busy only {busy:.0%} of the time; "
    if copies > compute:
        return "transfer", (f"{idle}host/device copies take {copies:.3f} ms against "
                            f"{compute:.3f} ms of compute: keep data on the GPU or overlap copies")
    if enqueue is not None and enqueue >= compute:
        return "host", (f"{idle}enqueueing takes {enqueue:.3f} ms against {compute:.3f} ms of "
                        "compute: the CPU cannot feed the GPU (try CUDA graphs, --useCudaGraph, "
                        "or more streams)")
    if busy is not None:
        return "host", (f"{idle}the GPU waits between iterations: the host side (data, "
                        "synchronization, enqueue) sets the pace")
    return "device", (f"compute ({compute:.3f} ms) outweighs enqueue "
                      f"({enqueue if enqueue is not None else 0:.3f} ms) and copies "
                      f"({copies:.3f} ms): the GPU is the bottleneck")


def read_trtexec_times(path: str | Path) -> PipelineTiming:
    """Parse an ``--exportTimes`` JSON or a ``profile.metadata.json`` summary (module doc)."""
    file = Path(path)
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise QdqkitError(f"{file}: no such file") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise QdqkitError(f"{file}: not readable JSON ({exc}); give trtexec's --exportTimes "
                          "output or a profile.metadata.json") from None
    if isinstance(data, list):
        return _from_records(data, str(file))
    if isinstance(data, dict):
        summary = data.get("performance_summary", data)
        if isinstance(summary, dict):
            return _from_summary(summary, str(file))
    raise QdqkitError(f"{file}: neither trtexec --exportTimes records nor a performance summary")
