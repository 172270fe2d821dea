"""Speed, memory and linearity of ``qdqkit lint`` (not part of the unit tests).

    python3 benchmarks/bench_lint.py [--runs N] [--bound 1.1]

Lints the pytorch-quantization-style residual Q/DQ stacks of ``bench_translate`` (activation scales
in Constant nodes, float weights -> Q -> DQ per channel, Conv -> BatchNormalization -> Relu,
residual Add, 16 channels) at five sizes from about 5k to 40k nodes, and a ResNet-50 with Q/DQ
before every conv. Each size is linted ``--runs`` times in a fresh process (so one point's memory or
collector state cannot leak into the next), sizes interleaved so a burst of load on the machine
spreads over all of them; per size the least CPU time and the median wall time and memory are
kept (see ``scaling``). Every figure is printed next to a baseline
measured in the same run: a plain ``onnx.load`` of the same file, in a fresh process too.

Checks (the exit status is 1 when one fails, and the failing check says so):
1. linear time: lint's CPU time per node at every size is within ``--bound`` (1.1x) of its CPU time
   per node at the smallest size (CPU time, not wall time, because on a shared machine the wall
   clock also counts the time other processes held the CPU; both are printed);
2. linear memory: peak RSS above the interpreter's own, per MB of model file, within the same bound;
3. ResNet-50 lints in under 0.5 s and the 21.5k-node stack in under 5 s;
4. linear work: Python function calls per node (one profiled run per size) within 1% of the
   smallest size's, so a growth of time per node that the call count does not show is the
   memory hierarchy, not the code (see ``scaling``).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx

from qdqkit.examples.graph import GraphBuilder
from scaling import CALLS_SNIPPET, exit_status, linearity, median, size_points, work_linearity

# Residual blocks per size: 21 nodes a block, so about 5k, 10k, 15k, 21.5k and 40k nodes.
BLOCKS = (240, 480, 720, 1024, 1900)
LIMITED_BLOCKS, LIMITED_SECONDS = 1024, 5.0
RESNET50_SECONDS = 0.5
RESNET50 = 0  # the key of the ResNet-50 point among the sizes

CHILD = r"""
import json, resource, sys, time
mode, model = sys.argv[1:3]
start = time.perf_counter()
import onnx
if mode == "lint":
    from qdqkit.linting import lint
imported, cpu = time.perf_counter(), time.process_time()
idle_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
if mode == "calls":
    from qdqkit.linting import lint
    COUNT
if mode == "baseline":
    onnx.load(model)
else:
    lint(model)
done, cpu_done = time.perf_counter(), time.process_time()
print(json.dumps({"seconds": done - imported, "cpu_seconds": cpu_done - cpu,
                  "import_seconds": imported - start, "idle_mb": idle_mb,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""".replace("COUNT", CALLS_SNIPPET.format(call="lint(model)").replace("\n", "\n    "))
# Built in a child too: on Linux a child's ru_maxrss starts from its parent's RSS at fork time,
# so the parent must stay small for the memory figure to mean anything.
BUILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import onnx
from bench_lint import resnet50
from bench_translate import qat_stack
blocks = int(sys.argv[2])
model = qat_stack(blocks, 16) if blocks else resnet50()
onnx.save(model, sys.argv[3])
print(len(model.graph.node))
"""


def resnet50() -> onnx.ModelProto:
    """ResNet-50 with Q/DQ before every conv input and weight (per output channel), built with the
    one graph builder: scales are initializers, conv and Gemm weights float -> Q -> DQ."""
    net = GraphBuilder("bench")

    def conv(x: str, cin: int, cout: int, k: int, stride: int = 1, relu: bool = True) -> str:
        y = net.conv(net.qdq(x, 0.02), cin, cout, k, stride=stride, std=0.05)
        return net.node("Relu", [y]) if relu else y

    y = conv(net.input("input", [1, 3, 224, 224]), 3, 64, 7, 2)
    y = net.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512), strict=True)):
        for index in range(blocks):
            stride = 2 if stage > 0 and index == 0 else 1
            h = conv(y, cin, width, 1)
            h = conv(h, width, width, 3, stride)
            h = conv(h, width, width * 4, 1, relu=False)
            skip = conv(y, cin, width * 4, 1, stride, relu=False) if index == 0 else y
            y = net.node("Relu", [net.node("Add", [h, net.qdq(skip, 0.02)])])
            cin = width * 4
    y = net.node("Flatten", [net.node("GlobalAveragePool", [net.qdq(y, 0.02)])])
    y = net.gemm(net.qdq(y, 0.02), 2048, 1000, std=0.02)
    net.output(y, None)
    return net.proto()


def build(blocks: int, path: Path) -> int:
    """Write the stack of ``blocks`` residual blocks (0: ResNet-50) to ``path``; its node count."""
    done = subprocess.run([sys.executable, "-c", BUILD, str(Path(__file__).parent), str(blocks),
                           str(path)], capture_output=True, text=True, check=True)
    return int(done.stdout.strip())


def measure(mode: str, model: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, "-c", CHILD, mode, str(model)],
                          capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3, help="runs per size (least CPU time kept)")
    parser.add_argument("--bound", type=float, default=1.1,
                        help="largest allowed growth of time per node and memory per MB")
    args = parser.parse_args()
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        sizes = {}
        for blocks in (RESNET50, *BLOCKS):
            path = tmp / f"deep_{blocks}.onnx"
            sizes[blocks] = (path, build(blocks, path))
        runs: dict[int, list[dict[str, float]]] = {b: [] for b in sizes}
        bases: dict[int, list[dict[str, float]]] = {b: [] for b in sizes}
        for _ in range(args.runs):
            for blocks, (path, _) in sizes.items():
                bases[blocks].append(measure("baseline", path))
                runs[blocks].append(measure("lint", path))

        print(f"lint, {args.runs} runs per size (wall time and memory: median; CPU time: "
              "least; baseline: onnx.load of the same file)")
        path, nodes = sizes[RESNET50]
        seconds, base = median(runs[RESNET50], "seconds"), median(bases[RESNET50], "seconds")
        print(f"  ResNet-50 Q/DQ ({nodes} nodes): {seconds:.3f} s (limit {RESNET50_SECONDS} s), "
              f"{seconds / base:.1f}x onnx.load ({base:.3f} s)")
        if seconds >= RESNET50_SECONDS:
            failures.append(f"ResNet-50 lints in {seconds:.2f} s (limit {RESNET50_SECONDS} s)")

        points = size_points({b: sizes[b] for b in BLOCKS}, runs, bases)
        for blocks, p in zip(BLOCKS, points, strict=True):
            print(f"  {p.nodes:6d} nodes, {p.file_mb:4.1f} MB: {p.seconds:5.2f} s ({p.cpu:5.2f} s "
                  f"CPU = {p.per_node * 1e6:5.1f} us/node, {p.time_growth:.2f}x the smallest), "
                  f"{p.seconds / p.base_seconds:.1f}x onnx.load ({p.base_seconds:.2f} s); peak RSS "
                  f"{p.peak_mb:3.0f} MB = {p.peak_mb / p.file_mb:.1f}x the file, "
                  f"{p.peak_mb / p.base_peak_mb:.2f}x onnx.load ({p.base_peak_mb:.0f} MB), "
                  f"{p.mb_per_file:.1f} MB per MB above idle ({p.memory_growth:.2f}x the smallest)")
            if blocks == LIMITED_BLOCKS and p.seconds >= LIMITED_SECONDS:
                failures.append(f"{p.nodes} nodes lint in {p.seconds:.2f} s "
                                f"(limit {LIMITED_SECONDS} s)")
        failures += linearity(points, args.bound, baseline="onnx.load")
        failures += work_linearity({b: int(measure("calls", sizes[b][0])["calls"]) for b in BLOCKS},
                                   {b: sizes[b][1] for b in BLOCKS})
    return exit_status(failures)


if __name__ == "__main__":
    sys.exit(main())
