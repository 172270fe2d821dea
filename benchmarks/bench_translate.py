"""Speed, memory, linearity and determinism of ``qdqkit translate`` (not part of the unit tests).

    python3 benchmarks/bench_translate.py [--runs N] [--bound 1.1] [--wide]

Builds pytorch-quantization-style residual Q/DQ stacks (activation scales in Constant nodes, float
weights -> Q -> DQ per channel, Conv -> BatchNormalization -> Relu, residual Add, 16 channels) at
five sizes from about 5k to 40k nodes. Each size is translated ``--runs`` times in a fresh process,
sizes interleaved so a burst of load on the machine spreads over all of them; per size the least
CPU time and the median wall time and memory are kept (see ``scaling``). Every figure is printed
next to a baseline measured in the same run: plain ``onnx.load`` + ``onnx.save`` of the same file,
in a fresh process too.

Checks (the exit status is 1 when one fails, and the failing check says so):
1. linear time: translate's CPU time per node at every size is within ``--bound`` (1.1x) of its
   CPU time per node at the smallest size (CPU time, not wall time, because on a shared machine the
   wall clock also counts the time other processes held the CPU; both are printed);
2. linear memory: peak RSS above the interpreter's own, per MB of model file, within the same bound;
3. determinism: every run of a size writes byte-identical files;
4. linear work: Python function calls per node (one profiled run per size) within 1% of the
   smallest size's (see ``scaling``).
Printed beside check 1: each phase's CPU time per node at the smallest and the largest size, and
how much a bare walk slows per node between them, over the loaded onnx-ir graph and over the same
graph as onnx's protobuf messages: the share of the growth that the CPU caches cause, and what a
compact representation would trade for it.
Also printed: whole-process ``qdqkit translate`` (a new process, imports included, Python's
bytecode kept between runs as an installed package keeps it) at 21.5k nodes against its 1.4 s goal
(100x faster than the reference translator's recorded 136 s), where that time goes (imports,
onnx-ir load, the passes, the write, freeing the graph), and with ``--wide`` the peak RSS of a
300 MB-weight model.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from scaling import CALLS_SNIPPET, exit_status, linearity, median, size_points, work_linearity

# Residual blocks per size: 21 nodes a block, so about 5k, 10k, 15k, 21.5k and 40k nodes.
BLOCKS = (240, 480, 720, 1024, 1900)
WHOLE_PROCESS_BLOCKS = 1024
# NVIDIA's qdq_translator.py on this 21.5k-node stack, recorded (it needs onnx-graphsurgeon and
# onnxoptimizer, and its O(#Q x #nodes) input rewiring takes minutes, so it is not rerun here).
REFERENCE_SECONDS = 136.0
WHOLE_PROCESS_GOAL_S = 1.4  # about 100x faster than the reference

CHILD = r"""
import json, resource, sys, time
mode, model, out = sys.argv[1:4]
start = time.perf_counter()
import onnx
if mode == "translate":
    from qdqkit.translation import translate
imported, cpu = time.perf_counter(), time.process_time()
idle_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
if mode == "calls":
    from qdqkit.translation import translate
    COUNT
if mode == "baseline":
    onnx.save(onnx.load(model), out + "/baseline.onnx")
else:
    translate(model, out)
done, cpu_done = time.perf_counter(), time.process_time()
print(json.dumps({"seconds": done - imported, "cpu_seconds": cpu_done - cpu,
                  "import_seconds": imported - start, "idle_mb": idle_mb,
                  "peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
""".replace("COUNT", CALLS_SNIPPET.format(call="translate(model, out)").replace("\n", "\n    "))
# Where the whole-process time goes, phase by phase, in a fresh process, the steps ``translate``
# takes (cyclic GC paused as there; "free" is the young-generation collection that frees the
# dropped graph once the collector is back on, as after the API's ``translate`` returns: the
# ``qdqkit`` process leaves it to its exit instead, see core.gc_pause).
PHASES = r"""
import gc, json, sys, time
from pathlib import Path
clock = time.process_time if sys.argv[3:] == ["cpu"] else time.perf_counter
start = clock()
from qdqkit.core.model_io import load_model
from qdqkit.translation.api import TranslateOptions, translate_model
from qdqkit.translation.writer import OutputPaths, write_outputs
marks = {"imports": clock() - start}
gc.disable()
path, out = Path(sys.argv[1]), Path(sys.argv[2])
t = clock(); model = load_model(path, lazy_weights=True, validate=True); marks["load"] = clock() - t
t = clock()
result = translate_model(model, TranslateOptions(), validated=True)
marks["passes"] = clock() - t
t = clock()
write_outputs(OutputPaths.for_model(out, path.stem), model, result.scales, result.fp16_nodes,
              "8600", (path,))
marks["write"] = clock() - t
t = clock(); del model, result; gc.enable(); gc.collect(0); marks["free"] = clock() - t
print(json.dumps(marks))
"""
# The memory hierarchy's share of the growth, measured on the same files: the least CPU time per
# node of a bare walk over the loaded graph (each node's type and its inputs' producers), work
# whose algorithm is linear by construction; what it gains per node from the smallest size to the
# largest, any pass over the graph gains once the graph outgrows the CPU caches.
WALK = r"""
import gc, json, sys, time
from pathlib import Path
from qdqkit.core.model_io import load_model
gc.disable()
graph = load_model(Path(sys.argv[1]), lazy_weights=True).graph
best = float("inf")
for _ in range(7):
    start = time.process_time()
    for node in graph:
        node.op_type
        for value in node.inputs:
            if value is not None:
                value.producer()
    best = min(best, time.process_time() - start)
import onnx
proto = onnx.load(sys.argv[1], load_external_data=False).graph
best_proto = float("inf")
for _ in range(7):
    start = time.process_time()
    producer = {}
    for index, node in enumerate(proto.node):
        node.op_type
        for name in node.input:
            producer.get(name)
        for name in node.output:
            producer[name] = index
    best_proto = min(best_proto, time.process_time() - start)
print(json.dumps({"per_node": best / len(graph), "proto_per_node": best_proto / len(proto.node)}))
"""
# Built in a child too: on Linux a child's ru_maxrss starts from its parent's RSS at fork time,
# so the parent must stay small for the memory figure to mean anything.
BUILD = r"""
import sys
sys.path.insert(0, sys.argv[1])
import onnx
from bench_translate import qat_stack
model = qat_stack(int(sys.argv[2]), int(sys.argv[3]))
onnx.save(model, sys.argv[4])
print(len(model.graph.node))
"""


def qat_stack(blocks: int, width: int, seed: int = 0) -> onnx.ModelProto:
    rng = np.random.default_rng(seed)
    nodes: list[onnx.NodeProto] = []
    inits: list[onnx.TensorProto] = []

    def act_qdq(x: str, tag: str, amax: float) -> str:
        scale = numpy_helper.from_array(np.array(amax / 127, np.float32))
        zero = numpy_helper.from_array(np.array(0, np.int8))
        nodes.append(helper.make_node("Constant", [], [f"{tag}_s"], name=f"{tag}_s", value=scale))
        nodes.append(helper.make_node("Constant", [], [f"{tag}_z"], name=f"{tag}_z", value=zero))
        nodes.append(helper.make_node("QuantizeLinear", [x, f"{tag}_s", f"{tag}_z"], [f"{tag}_q"],
                                      name=f"{tag}_Q"))
        nodes.append(helper.make_node("DequantizeLinear", [f"{tag}_q", f"{tag}_s", f"{tag}_z"],
                                      [f"{tag}_dq"], name=f"{tag}_DQ"))
        return f"{tag}_dq"

    def conv_bn(x: str, tag: str, relu: bool) -> str:
        w = rng.normal(0, 0.05, size=(width, width, 3, 3)).astype(np.float32)
        ws = (np.abs(w.reshape(width, -1)).max(axis=1) / 127).astype(np.float32)
        inits.append(numpy_helper.from_array(w, f"{tag}.weight"))
        inits.append(numpy_helper.from_array(ws, f"{tag}.wscale"))
        zero = numpy_helper.from_array(np.zeros(width, np.int8))
        nodes.append(helper.make_node("Constant", [], [f"{tag}.wzero"], name=f"{tag}.wzero",
                                      value=zero))
        for name, values in (("gamma", rng.uniform(0.5, 1.5, width)), ("beta", np.zeros(width)),
                             ("mean", np.zeros(width)), ("var", np.ones(width))):
            inits.append(numpy_helper.from_array(values.astype(np.float32), f"{tag}.{name}"))
        wq = [f"{tag}.weight", f"{tag}.wscale", f"{tag}.wzero"]
        nodes.append(helper.make_node("QuantizeLinear", wq, [f"{tag}_wq"], name=f"{tag}_wQ", axis=0))
        nodes.append(helper.make_node("DequantizeLinear", [f"{tag}_wq", *wq[1:]], [f"{tag}_wdq"],
                                      name=f"{tag}_wDQ", axis=0))
        nodes.append(helper.make_node("Conv", [x, f"{tag}_wdq"], [f"{tag}_conv"], name=f"{tag}",
                                      pads=[1, 1, 1, 1]))
        bn_in = [f"{tag}_conv", f"{tag}.gamma", f"{tag}.beta", f"{tag}.mean", f"{tag}.var"]
        nodes.append(helper.make_node("BatchNormalization", bn_in, [f"{tag}_bn"], name=f"{tag}_bn"))
        if not relu:
            return f"{tag}_bn"
        nodes.append(helper.make_node("Relu", [f"{tag}_bn"], [f"{tag}_relu"], name=f"{tag}_relu"))
        return f"{tag}_relu"

    x = "input"
    for b in range(blocks):
        y = conv_bn(act_qdq(x, f"b{b}.in", 4.0), f"b{b}.c1", relu=True)
        y = conv_bn(act_qdq(y, f"b{b}.mid", 4.0), f"b{b}.c2", relu=False)
        nodes.append(helper.make_node("Add", [y, x], [f"b{b}_add"], name=f"b{b}_add"))
        nodes.append(helper.make_node("Relu", [f"b{b}_add"], [f"b{b}_out"], name=f"b{b}_out"))
        x = f"b{b}_out"
    graph = helper.make_graph(
        nodes, "qat_stack",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, width, 8, 8])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, width, 8, 8])], inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def build(blocks: int, width: int, path: Path) -> int:
    done = subprocess.run([sys.executable, "-c", BUILD, str(Path(__file__).parent), str(blocks),
                           str(width), str(path)], capture_output=True, text=True, check=True)
    return int(done.stdout.strip())


def measure(mode: str, model: Path, out: Path) -> dict[str, float]:
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-c", CHILD, mode, str(model), str(out)],
                          capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def phase_times(model: Path, out: Path, cpu: bool = False) -> dict[str, float]:
    out.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-c", PHASES, str(model), str(out)] + ["cpu"] * cpu,
                          capture_output=True, text=True, check=True)
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def _walk(model: Path) -> tuple[float, float]:
    """Least CPU seconds per node of a bare walk: over the onnx-ir graph, over the protobuf."""
    done = subprocess.run([sys.executable, "-c", WALK, str(model)], capture_output=True,
                          text=True, check=True)
    found = json.loads(done.stdout.strip().splitlines()[-1])
    return float(found["per_node"]), float(found["proto_per_node"])


def installed_env(pycache: Path) -> dict[str, str]:
    """The environment of a process that runs as an installed package does: Python's bytecode is
    kept (in ``pycache``, outside the source tree), so after a first run no module is compiled
    again. ``pip install`` writes it at install time; with ``PYTHONDONTWRITEBYTECODE`` set (as on
    some CI machines) an editable install would compile every module on every run instead."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def _least(found: list[dict[str, float]], key: str) -> float:
    return min(f[key] for f in found)


def whole_process(argv: list[str], env: dict[str, str] | None = None) -> tuple[float, float]:
    """Wall and CPU (user + system) seconds of one run of ``argv`` in a new process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, capture_output=True, check=True, env=env)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(folder.glob("*")):
        h.update(path.name.encode() + path.read_bytes())
    return h.hexdigest()[:16]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3, help="runs per size (least CPU time kept)")
    parser.add_argument("--bound", type=float, default=1.1,
                        help="largest allowed growth of time and memory per node")
    parser.add_argument("--wide", action="store_true", help="also the 300 MB-weight model")
    args = parser.parse_args()
    failures: list[str] = []
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        sizes = {}
        for blocks in BLOCKS:
            path = tmp / f"deep_{blocks}.onnx"
            sizes[blocks] = (path, build(blocks, 16, path))
        runs: dict[int, list[dict[str, float]]] = {b: [] for b in BLOCKS}
        bases: dict[int, list[dict[str, float]]] = {b: [] for b in BLOCKS}
        for i in range(args.runs):
            for blocks, (path, _) in sizes.items():
                bases[blocks].append(measure("baseline", path, tmp / f"base_{blocks}_{i}"))
                runs[blocks].append(measure("translate", path, tmp / f"out_{blocks}_{i}"))

        print(f"translate, {args.runs} runs per size (wall time and memory: median; CPU time: "
              "least; baseline: onnx load+save of the same file)")
        points = size_points(sizes, runs, bases)
        for blocks, p in zip(sizes, points, strict=True):
            same = len({digest(tmp / f"out_{blocks}_{i}") for i in range(args.runs)}) == 1
            if not same:
                failures.append(f"{p.nodes} nodes: runs wrote different files")
            print(f"  {p.nodes:6d} nodes, {p.file_mb:5.1f} MB: {p.seconds:5.2f} s ({p.cpu:5.2f} s "
                  f"CPU = {p.per_node * 1e6:5.1f} us/node, {p.time_growth:.2f}x the smallest), "
                  f"{p.seconds / p.base_seconds:.2f}x onnx load+save ({p.base_seconds:.2f} s); "
                  f"peak RSS {p.peak_mb:4.0f} MB = {p.peak_mb / p.file_mb:.1f}x the file, "
                  f"{p.peak_mb / p.base_peak_mb:.2f}x load+save ({p.base_peak_mb:.0f} MB); "
                  f"identical: {same}")
        failures += linearity(points, args.bound)
        calls = {b: int(measure("calls", path, tmp / f"calls_{b}")["calls"])
                 for b, (path, _) in sizes.items()}
        failures += work_linearity(calls, {b: n for b, (_, n) in sizes.items()})

        ends = (BLOCKS[0], BLOCKS[-1])
        phase_cpu = {b: [phase_times(sizes[b][0], tmp / f"cpu_{b}_{i}", cpu=True)
                         for i in range(args.runs)] for b in ends}
        small, large = (points[0].nodes, points[-1].nodes)
        print(f"  CPU per node by phase, {small} -> {large} nodes (least of {args.runs}): " + ", ".join(
            f"{key} {_least(phase_cpu[ends[0]], key) / small * 1e6:.1f} -> "
            f"{_least(phase_cpu[ends[1]], key) / large * 1e6:.1f} us "
            f"({_least(phase_cpu[ends[1]], key) / large / (_least(phase_cpu[ends[0]], key) / small):.2f}x)"
            for key in phase_cpu[ends[0]][0] if key != "imports"))
        walks = {b: [_walk(sizes[b][0]) for _ in range(args.runs)] for b in ends}
        for kind, i in (("the loaded onnx-ir graph", 0), ("onnx's protobuf messages", 1)):
            first, last = (min(w[i] for w in walks[b]) for b in ends)
            print(f"  a bare walk over {kind}: {first * 1e6:.2f} us/node at {small} nodes, "
                  f"{last * 1e6:.2f} at {large} = {last / first:.2f}x")
        print("  (linear work that slows per node as the graph outgrows the CPU caches; the "
              "protobuf keeps its growth small but costs more per node touched)")
        path, nodes = sizes[WHOLE_PROCESS_BLOCKS]
        translate = [sys.executable, "-m", "qdqkit", "translate", "-i", str(path), "-o",
                     str(tmp / "whole")]
        load_save = [sys.executable, "-c", "import onnx, sys; "
                     "onnx.save(onnx.load(sys.argv[1]), sys.argv[2])", str(path),
                     str(tmp / "whole.onnx")]
        env = installed_env(tmp / "pycache")
        first_run = whole_process(translate, env)[0]  # writes the bytecode, as an install does
        whole_process(load_save, env)
        timed = [whole_process(translate, env) for _ in range(args.runs)]
        timed_base = [whole_process(load_save, env) for _ in range(args.runs)]
        whole, whole_cpu = (statistics.median(t[i] for t in timed) for i in (0, 1))
        whole_base = statistics.median(t[0] for t in timed_base)
        imports = median(runs[WHOLE_PROCESS_BLOCKS], "import_seconds")
        met = "met" if whole < WHOLE_PROCESS_GOAL_S else "NOT met"
        print(f"whole process at {nodes} nodes: qdqkit translate {whole:.2f} s, {whole_cpu:.2f} s "
              f"CPU (goal {WHOLE_PROCESS_GOAL_S} s, about the reference's {REFERENCE_SECONDS:.0f} s / "
              f"100: {met}; {REFERENCE_SECONDS / whole:.0f}x faster than the reference; imports "
              f"{imports:.2f} s) vs python + onnx load+save {whole_base:.2f} s = "
              f"{whole / whole_base:.2f}x; bytecode kept as an install keeps it (the first run, "
              f"compiling it: {first_run:.2f} s)")
        phases = [phase_times(path, tmp / f"phases_{i}") for i in range(args.runs)]
        print("  where it goes (median): " + ", ".join(
            f"{key} {median(phases, key):.2f} s" for key in phases[0]
        ))

        if args.wide:
            print("memory (wide Q/DQ stack, 512 channels, 16 blocks)")
            wide = tmp / "wide.onnx"
            build(16, 512, wide)
            size_mb = wide.stat().st_size / 2**20
            base = measure("baseline", wide, tmp / "base_wide")
            result = measure("translate", wide, tmp / "out_wide")
            print(f"  file {size_mb:.0f} MB: translate peak RSS {result['peak_mb']:.0f} MB in "
                  f"{result['seconds']:.1f} s; onnx load+save peak {base['peak_mb']:.0f} MB "
                  f"({result['peak_mb'] / base['peak_mb']:.2f}x)")
    return exit_status(failures)


if __name__ == "__main__":
    sys.exit(main())
