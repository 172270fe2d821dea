"""Speed and linearity of ``qdqkit fix`` (not part of the unit tests).

    python3 benchmarks/bench_fix.py [--runs N] [--bound 1.25]

Fixes onnxruntime-style Q/DQ stacks (Q/DQ on every conv output, inside every Conv -> Relu
epilogue, on both inputs of every residual Add and after it; int8 weights behind a DQ, int32
biases) at five sizes from about 4k to 20k nodes: every block carries five fixable findings.
Each size is fixed ``--runs`` times in a fresh process, sizes interleaved, the least CPU time and
the median wall time kept (see ``scaling``), and
printed next to a baseline measured in the same run: one ``lint`` of the same file, in a fresh
process too (``fix`` lints before, after each round and at the end); both in CPU time, which
other processes on a shared machine do not inflate as they do the wall clock.

Checks (the exit status is 1 when one fails, and the failing check says so):
1. linear time: fix's CPU time per node at every size is within ``--bound`` of its CPU time per
   node at the smallest size;
2. the 20k-node stack is fixed in under 5 s of CPU time (on a shared machine the wall clock also
   counts the time other processes held the CPU; both are printed), every fixable finding gone.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx

from qdqkit.examples.graph import GraphBuilder
from scaling import exit_status, least

BLOCKS = (240, 480, 720, 960, 1176)  # 17 nodes a block: about 4k, 8k, 12k, 16k and 20k nodes
LIMITED_BLOCKS, LIMITED_SECONDS = 1176, 5.0
CHANNELS = 16

CHILD = r"""
import json, sys, time
mode, model = sys.argv[1:3]
from qdqkit.fixing import fix
from qdqkit.linting import lint
start, cpu = time.perf_counter(), time.process_time()
if mode == "baseline":
    lint(model)
    left = -1
else:
    left = fix(model).fixable_after
print(json.dumps({"seconds": time.perf_counter() - start, "cpu_seconds": time.process_time() - cpu,
                  "left": left}))
"""


def ort_stack(blocks: int) -> onnx.ModelProto:
    """What onnxruntime's quantize_static (TensorRT preset) writes around residual blocks, built
    with the one graph builder: int8 conv weights behind a DQ, a float Gemm at the end."""
    net = GraphBuilder("ort_stack")

    def conv(x: str) -> str:
        return net.conv(x, CHANNELS, CHANNELS, 3, weight="dq-only", std=0.1)

    def block(x: str) -> str:
        y = net.qdq(net.node("Relu", [net.qdq(conv(x), 0.05)]), 0.03)
        y = net.qdq(conv(y), 0.05)
        y = net.qdq(net.node("Add", [y, x]), 0.06)
        return net.qdq(net.node("Relu", [y]), 0.04)

    y = net.qdq(net.input("input", [1, CHANNELS, 8, 8]), 0.04)
    for _ in range(blocks):
        y = block(y)
    y = net.qdq(net.node("Flatten", [net.node("GlobalAveragePool", [y])]), 0.02)
    net.output(net.gemm(y, CHANNELS, 10, weight="float", std=0.1), None)
    return net.proto()


def measure(mode: str, model: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD, mode, str(model)],
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--bound", type=float, default=1.25)
    args = parser.parse_args()
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as folder:
        paths, nodes = {}, {}
        for blocks in BLOCKS:
            model = ort_stack(blocks)
            paths[blocks] = Path(folder) / f"stack{blocks}.onnx"
            nodes[blocks] = len(model.graph.node)
            onnx.save(model, paths[blocks])
        runs: dict[tuple[str, int], list[dict[str, float]]] = {}
        for _ in range(args.runs):
            for blocks in BLOCKS:
                for mode in ("fix", "baseline"):
                    runs.setdefault((mode, blocks), []).append(measure(mode, paths[blocks]))

        def median(mode: str, blocks: int, key: str) -> float:
            return statistics.median(r[key] for r in runs[(mode, blocks)])

        def cpu_of(mode: str, blocks: int) -> float:
            return least(runs[(mode, blocks)], "cpu_seconds")

        base = cpu_of("fix", BLOCKS[0]) / nodes[BLOCKS[0]]
        print(f"{'nodes':>7} {'fix s':>7} {'fix cpu s':>9} {'lint cpu s':>10} {'fix/lint':>8} "
              f"{'cpu/node vs smallest':>21}")
        for blocks in BLOCKS:
            wall, cpu = median("fix", blocks, "seconds"), cpu_of("fix", blocks)
            lint_cpu = cpu_of("baseline", blocks)
            ratio = cpu / nodes[blocks] / base
            print(f"{nodes[blocks]:>7} {wall:>7.2f} {cpu:>9.2f} {lint_cpu:>10.2f} "
                  f"{cpu / lint_cpu:>8.2f} {ratio:>21.2f}")
            if ratio > args.bound:
                failures.append(f"not linear: {nodes[blocks]} nodes cost {ratio:.2f}x the "
                                f"smallest size's CPU time per node (bound {args.bound})")
            left = max(r["left"] for r in runs[("fix", blocks)])
            if left:
                failures.append(f"{nodes[blocks]} nodes: {int(left)} fixable findings left")
        limited = cpu_of("fix", LIMITED_BLOCKS)
        if limited > LIMITED_SECONDS:
            failures.append(f"{nodes[LIMITED_BLOCKS]} nodes took {limited:.2f} s of CPU time "
                            f"(limit {LIMITED_SECONDS} s)")
    return exit_status(failures)


if __name__ == "__main__":
    sys.exit(main())
