"""Fit the latency cost model's constants to the five real ResNet-18 engines on an A100.

    python3 benchmarks/fit_cost_model.py

Each engine is timed twice, from its ONNX model (the prediction ``lint`` makes: the Q/DQ variants
of ``qdqkit.examples.resnet`` and the same graph without Q/DQ built FP32 and FP16) and from the
real ``--exportLayerInfo`` graph, and compared with the end-to-end median ``trtexec`` measured. A
coordinate search over the six constants of ``trt.cost_model.CostConstants`` minimizes the worst
relative error, with every wrong ordering of the five engines counted as a miss. Prints the fitted
constants, the stored ``FITTED`` constants and both tables; exits 1 when ``FITTED`` breaks the
ordering or the 25% band.
"""

from __future__ import annotations

import dataclasses
import math
import sys
from pathlib import Path

from qdqkit.examples.resnet import BUILDS, resnet18_builds
from qdqkit.trt.cost_model import FITTED, CostConstants, estimate_latency
from qdqkit.trt.engine import EngineGraph
from qdqkit.trt.engine_json import read_engine_graph
from qdqkit.trt.engine_timing import end_to_end_of
from qdqkit.trt.gpus import find_gpu

FIXTURES = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "trex-resnet18-a100"
ENGINES = BUILDS
BAND = 0.25
# Physical ranges: no kernel reaches its peak, and a kernel in a CUDA graph costs at least about
# a microsecond of launch and tail (a fit left free drives it to zero on five engines).
BOUNDS = {"layer_overhead_us": (1.0, 10.0)}


def real_engines() -> dict[str, EngineGraph]:
    found = {}
    for name in ENGINES:
        graph = next((FIXTURES / name).glob("*.graph.json"))
        profile = graph.with_name(graph.name.replace(".graph.json", ".profile.json"))
        found[name] = read_engine_graph(graph, profile)
    return found


def measured(real: dict[str, EngineGraph]) -> dict[str, float]:
    times = {}
    for name, engine in real.items():
        timing = end_to_end_of(engine)
        assert timing is not None, name
        times[name] = timing.median_ms
    return times


def predictions(engines: dict[str, EngineGraph], constants: CostConstants) -> dict[str, float]:
    gpu = find_gpu("A100")
    return {n: estimate_latency(e, gpu, constants=constants).total_ms for n, e in engines.items()}


def loss(sets: list[dict[str, EngineGraph]], truth: dict[str, float], c: CostConstants) -> float:
    worst, misses = 0.0, 0
    order = sorted(truth, key=truth.__getitem__)
    for engines in sets:
        times = predictions(engines, c)
        worst = max(worst, *(abs(math.log(times[n] / truth[n])) for n in truth))
        misses += sorted(times, key=times.__getitem__) != order
    return worst + misses


def fit(sets: list[dict[str, EngineGraph]], truth: dict[str, float]) -> CostConstants:
    best = FITTED
    best_loss = loss(sets, truth, best)
    for step in (0.2, 0.1, 0.05, 0.02):
        improved = True
        while improved:
            improved = False
            for f in dataclasses.fields(CostConstants):
                for sign in (1, -1):
                    value = getattr(best, f.name) * (1 + sign * step)
                    low, high = BOUNDS.get(f.name, (0.05, 0.95))
                    if not low <= value <= high:
                        continue
                    trial = dataclasses.replace(best, **{f.name: round(value, 3)})
                    trial_loss = loss(sets, truth, trial)
                    if trial_loss < best_loss - 1e-9:
                        best, best_loss, improved = trial, trial_loss, True
    return best


def report(sets: dict[str, dict[str, EngineGraph]], truth: dict[str, float],
           c: CostConstants) -> bool:
    good = True
    order = sorted(truth, key=truth.__getitem__)
    for label, engines in sets.items():
        times = predictions(engines, c)
        print(f"  from {label}:")
        for name in ENGINES:
            error = times[name] / truth[name] - 1
            good &= abs(error) <= BAND
            print(f"    {name:18s} predicted {times[name]:.3f} ms  measured {truth[name]:.3f} ms"
                  f"  {error:+.1%}")
        ordered = sorted(times, key=times.__getitem__) == order
        good &= ordered
        print(f"    order {'right' if ordered else 'WRONG'}")
    return good


def main() -> int:
    real = real_engines()
    truth = measured(real)
    sets = {"ONNX (lint)": resnet18_builds(), "real engine graphs": real}
    fitted = fit(list(sets.values()), truth)
    print("fitted:", fitted)
    report(sets, truth, fitted)
    print("stored FITTED:", FITTED)
    return 0 if report(sets, truth, FITTED) else 1


if __name__ == "__main__":
    sys.exit(main())
