"""What the size-sweep benchmarks (lint, translate, fix) share: figures of repeated child runs,
per-size figures against the smallest size, the linearity verdict and the exit status.

A child run reports ``seconds``, ``cpu_seconds``, ``peak_mb`` and ``idle_mb`` (the interpreter's
own RSS before the work); a baseline run (``onnx.load`` and the like) reports the same keys.
Linearity is judged on CPU time per node (wall time also counts other processes on a shared
machine) and on peak RSS above idle per MB of model file.

Per size, the CPU time kept is the least of the runs, the wall time and memory their medians.
On a shared virtual machine, CPU time is not free of other work either: a neighbour on the same
physical core slows every instruction, and the same 21.5k-node translate took between 1.6 and
2.4 CPU seconds in eight back-to-back runs. That noise only ever adds time, so the least of
several runs is the closest to what the code itself costs, and a growth that is really there
still shows in it (it is in every run).

CPU time per node also grows with the heap: a graph of 40k nodes is millions of small Python
objects, and past the caches every pointer followed costs more, so time per node can grow with
size although the work per node does not. The work itself is counted too: Python function
calls per node (cProfile's count, one profiled run per size), which no other process and no cache
moves. An algorithm that rescans per node multiplies that count, so ``work_linearity`` holds it
to 1% and fails otherwise; where time per node grows but calls per node do not, the growth is
the memory hierarchy, not the code.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from pathlib import Path

Runs = list[dict[str, float]]


def median(runs: Runs, key: str) -> float:
    return statistics.median(r[key] for r in runs)


def least(runs: Runs, key: str) -> float:
    return min(r[key] for r in runs)


@dataclass(frozen=True)
class SizePoint:
    """The medians at one size, and how they compare with the smallest size."""

    nodes: int
    file_mb: float
    seconds: float
    cpu: float  # the least CPU seconds of the runs
    peak_mb: float
    base_seconds: float
    base_peak_mb: float
    per_node: float  # CPU seconds per node
    mb_per_file: float  # peak RSS above idle per MB of file
    time_growth: float  # per_node against the smallest size's
    memory_growth: float  # mb_per_file against the smallest size's
    base_growth: float  # the baseline's CPU per node against its own at the smallest size


def size_points(sizes: dict[int, tuple[Path, int]], runs: dict[int, Runs],
                bases: dict[int, Runs]) -> list[SizePoint]:
    """One point per entry of ``sizes`` (key -> (model file, node count)), in their order; the
    first entry is the smallest size, the one the others are compared with."""
    points: list[SizePoint] = []
    first: SizePoint | None = None
    base_first = 0.0
    for key, (path, nodes) in sizes.items():
        file_mb = path.stat().st_size / 2**20
        cpu = least(runs[key], "cpu_seconds")
        per_node = cpu / nodes
        peak = median(runs[key], "peak_mb")
        mb_per_file = (peak - median(runs[key], "idle_mb")) / file_mb
        base_per_node = least(bases[key], "cpu_seconds") / nodes
        if first is None:
            base_first = base_per_node
        point = SizePoint(
            nodes=nodes, file_mb=file_mb, seconds=median(runs[key], "seconds"), cpu=cpu,
            peak_mb=peak, base_seconds=median(bases[key], "seconds"),
            base_peak_mb=median(bases[key], "peak_mb"), per_node=per_node,
            mb_per_file=mb_per_file,
            time_growth=per_node / first.per_node if first else 1.0,
            memory_growth=mb_per_file / first.mb_per_file if first else 1.0,
            base_growth=base_per_node / base_first if base_first else 1.0)
        first = first or point
        points.append(point)
    return points


def linearity(points: list[SizePoint], bound: float, baseline: str = "") -> list[str]:
    """Print the worst growth of time and memory against ``bound``; the failures, if any.
    ``baseline`` names the baseline whose own growth is printed beside (none when empty)."""
    worst_time = max(p.time_growth for p in points)
    worst_memory = max(p.memory_growth for p in points)
    beside = (f"; {baseline}'s in the same runs: {max(p.base_growth for p in points):.2f}x"
              if baseline else "")
    print(f"  CPU time per node, worst / smallest size: {worst_time:.2f}x (bound {bound}x)"
          f"{beside}")
    print(f"  RSS growth per MB of file, worst / smallest size: {worst_memory:.2f}x "
          f"(bound {bound}x)")
    failures = []
    if worst_time > bound:
        failures.append(f"time per node grows {worst_time:.2f}x (> {bound}x): not linear")
    if worst_memory > bound:
        failures.append(f"memory per MB grows {worst_memory:.2f}x (> {bound}x): not linear")
    return failures


WORK_BOUND = 1.01  # calls per node: deterministic, so the bound is tight

# The child-side count: ``CALLS_SNIPPET.format(call="translate(model, out)")`` profiles one call.
CALLS_SNIPPET = """
import cProfile, pstats
profile = cProfile.Profile()
profile.enable()
{call}
profile.disable()
print(json.dumps({{"calls": pstats.Stats(profile).total_calls}}))
sys.exit(0)
"""


def work_linearity(calls: dict[int, int], nodes: dict[int, int], bound: float = WORK_BOUND
                   ) -> list[str]:
    """Print Python calls per node at each size and the worst growth against the smallest size
    (the first entry); the failure, if any."""
    per_node = {key: calls[key] / nodes[key] for key in calls}
    first = next(iter(per_node.values()))
    worst = max(value / first for value in per_node.values())
    shown = ", ".join(f"{nodes[k]}: {v:.1f}" for k, v in per_node.items())
    print(f"  Python calls per node ({shown}), worst / smallest size: {worst:.3f}x "
          f"(bound {bound}x)")
    if worst > bound:
        return [f"calls per node grow {worst:.3f}x (> {bound}x): the work is not linear"]
    return []


def exit_status(failures: list[str]) -> int:
    """Print each failure; 1 when there is one (so a script or CI can act), else 0."""
    for failure in failures:
        print(f"FAILED: {failure}")
    return 1 if failures else 0
