"""Benchmark ``qdqkit engine``: read + report + draw an engine of 840+ layers in under 3 s.

    python3 benchmarks/bench_engine.py [--layers N]

The engine is the synthetic TensorRT 8.x export of ``qdqkit.engine.synthetic`` (residual stages
with Q/DQ and layout Reformats, plus a per-layer profile) written to a temporary folder. Every figure
is printed with its ratio to a baseline measured in the same run on the same files: a plain
``json.load`` of the graph and profile JSON, the least any tool pays to look at them. Each step is
the median of several runs. Exits 1 if read + report + draw take 3 s or more, or if matching
against a renamed copy is not linear (four times the layers must take less than eight times the
time).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from qdqkit.engine.diff import diff_engines
from qdqkit.engine.draw import draw_engine
from qdqkit.engine.report import report_engine
from qdqkit.engine.synthetic import synthetic_engine
from qdqkit.trt.engine import EngineGraph
from qdqkit.trt.engine_json import parse_engine_graph, read_engine_graph
from qdqkit.trt.engine_matching import match_layers

BUDGET_S = 3.0
RUNS = 5
LINEAR_BOUND = 8.0  # time(4N) / time(N) for matching


def _renamed(graph_json: dict[str, Any]) -> dict[str, Any]:
    """The same engine with every layer and tensor renamed: only structure can match it."""
    count = len(graph_json["Layers"])
    tensors: dict[str, str] = {}

    def tensor(t: dict[str, Any]) -> dict[str, Any]:
        return {**t, "Name": tensors.setdefault(t["Name"], f"t{len(tensors)}")}

    layers = [{**la, "Name": f"net/op_{(i * 7919) % count}",
               "Inputs": [tensor(t) for t in la["Inputs"]],
               "Outputs": [tensor(t) for t in la["Outputs"]]}
              for i, la in enumerate(graph_json["Layers"])]
    return {"Layers": layers, "Bindings": [tensors.get(b, b) for b in graph_json["Bindings"]]}


def _match_seconds(layers: int) -> float:
    graph_json, _ = synthetic_engine(layers)
    a = parse_engine_graph(graph_json, "a.json")
    b = parse_engine_graph(_renamed(graph_json), "b.json")
    times = []
    for _ in range(RUNS):  # the fastest run: least disturbed by other work on the machine
        start = time.perf_counter()
        match_layers(a, b)
        times.append(time.perf_counter() - start)
    return min(times)


def _median_time(step: Callable[[], object]) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=860)
    layers = parser.parse_args().layers

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        graph_json, profile_json = synthetic_engine(layers)
        graph_file, profile_file = folder / "big.graph.json", folder / "big.profile.json"
        graph_file.write_text(json.dumps(graph_json, indent=2))
        profile_file.write_text(json.dumps(profile_json, indent=2))
        html_file, svg_file = folder / "big.html", folder / "big.svg"

        def baseline() -> None:
            json.loads(graph_file.read_text())
            json.loads(profile_file.read_text())

        def read() -> EngineGraph:
            return read_engine_graph(graph_file, profile=profile_file)

        graph = read()
        renamed = parse_engine_graph(_renamed(graph_json), "renamed.json")
        steps: list[tuple[str, Callable[[], object]]] = [
            ("baseline: json.load graph + profile", baseline),
            ("read (graph + profile)", read),
            ("report", lambda: report_engine(graph)),
            ("draw HTML", lambda: draw_engine(graph, html_file)),
            ("draw SVG", lambda: draw_engine(graph, svg_file)),
            ("diff against itself", lambda: diff_engines(graph, graph)),
            ("diff against a renamed copy", lambda: diff_engines(graph, renamed)),
        ]
        timed = {name: _median_time(step) for name, step in steps}

        total = _median_time(lambda: (report_engine(g := read()), draw_engine(g, html_file)))
        sizes = (graph_file.stat().st_size, html_file.stat().st_size)

    base = timed["baseline: json.load graph + profile"]
    print(f"engine: {layers} layers (synthetic), graph JSON {sizes[0] / 1e6:.2f} MB, "
          f"HTML drawing {sizes[1] / 1e6:.2f} MB; median of {RUNS} runs")
    print(f"{'step':<38} {'seconds':>8} {'x baseline':>11}")
    for name, seconds in timed.items():
        print(f"{name:<38} {seconds:8.4f} {seconds / base:11.1f}")
    print(f"{'read + report + draw HTML':<38} {total:8.4f} {total / base:11.1f}   "
          f"(budget {BUDGET_S:.0f} s)")
    small, big = _match_seconds(layers), _match_seconds(4 * layers)
    growth = big / small
    print(f"match a renamed copy: {layers} layers {small:.4f} s, {4 * layers} layers {big:.4f} s: "
          f"x{growth:.1f} for x4 layers (bound x{LINEAR_BOUND:.0f})")
    return 0 if total < BUDGET_S and growth < LINEAR_BOUND else 1


if __name__ == "__main__":
    sys.exit(main())
