"""Cost of ``qdqkit verify`` against the two plain onnxruntime inferences it must run anyway.

A ResNet-50-shaped Q/DQ model as QAT exports spell it (float weights -> Q -> DQ per output channel
at max|w|/127; every Conv, MatMul and Add input and the output quantized per tensor; about 98 MiB)
is built in code and translated. Then, each in its own
child process so peak RSS is its own, with imports done before the clock starts:
- the floor: plain onnxruntime (default session options) on the Q/DQ model, then on the Q/DQ-free
  model, N samples each, the first session freed before the second is built, as verify runs them;
- ``verify`` on the same N random samples.
Wall time and CPU time (all threads of the child) are both measured, since the machine may be
shared: wall time alone swings with other load, CPU time does not see waiting. The median of
``--runs`` interleaved runs is taken for each.
Goals: verify <= 1.5x the floor's wall time and CPU time; verify's peak RSS above the interpreter's
own after imports < 3x the model file. Exit status 1 when a goal is missed.

    python benchmarks/bench_verify.py [--samples 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))

TIME_GOAL = 1.5
MEMORY_GOAL = 3.0


def build(folder: Path) -> Path:
    """The ResNet-50-shaped model of ``bench_calibration``, quantized the way QAT exports are."""
    import onnx_ir as ir

    from bench_calibration import resnet50_shaped
    from qdqkit.passes.insert_qdq import ActivationQdq, InsertQdq, WeightQdq

    proto = resnet50_shaped()
    proto.graph.input[0].type.tensor_type.shape.dim[0].dim_value = 1
    model = ir.serde.deserialize_model(proto)
    weighted = [n for n in model.graph if n.op_type in ("Conv", "MatMul")]
    inputs = list(dict.fromkeys(
        [n.inputs[0] for n in weighted if n.inputs[0] is not None]
        + [v for n in model.graph if n.op_type == "Add" for v in n.inputs if v is not None]
        + list(model.graph.outputs)))
    rng = np.random.default_rng(0)
    InsertQdq([ActivationQdq(v, float(rng.uniform(0.01, 0.05))) for v in inputs],
              [WeightQdq(n, keep_float=True) for n in weighted])(model)
    path = folder / "resnet50_qdq.onnx"
    ir.save(model, path)
    return path


CHILD = r"""
import json, sys, time
mode, model, bundle, samples = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
import numpy as np, onnxruntime as ort
from qdqkit.verification import verify
def hwm():
    # VmHWM starts afresh at exec; ru_maxrss would carry the parent's peak over.
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
idle = hwm()
start, cpu = time.perf_counter(), time.process_time()
phases = []
if mode == "floor":
    rng = np.random.default_rng(0)
    feeds = [{"input": rng.uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)}
             for _ in range(samples)]
    for path in (model, bundle + "/resnet50_qdq_noqdq.onnx"):
        began = time.perf_counter()
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        for feed in feeds:
            session.run(None, feed)
        del session
        phases.append(time.perf_counter() - began)
else:
    result = verify(model, bundle, samples=samples)
    assert result.samples == samples and result.passed and not result.loss_sources, result.verdict
done, cpu_done = time.perf_counter(), time.process_time()
print(json.dumps({"seconds": done - start, "cpu": cpu_done - cpu, "idle_mb": idle,
                  "peak_mb": hwm(), "phases": phases}))
"""


def measure(mode: str, model: Path, bundle: Path, samples: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(model), str(bundle), str(samples)],
                         check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout.splitlines()[-1]))


def median(runs: list[dict[str, Any]], key: str) -> float:
    return float(np.median([r[key] for r in runs]))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=4)
    parser.add_argument("--runs", type=int, default=3, help="median of this many runs each")
    args = parser.parse_args()
    from qdqkit.translation import translate

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        model = build(folder)
        translate(model, folder / "out")
        size_mb = model.stat().st_size / 2**20
        floors, verifies = [], []
        for _ in range(args.runs):  # interleaved, so a burst of load spreads over both
            floors.append(measure("floor", model, folder / "out", args.samples))
            verifies.append(measure("verify", model, folder / "out", args.samples))
    floor_s, check_s = median(floors, "seconds"), median(verifies, "seconds")
    floor_cpu, check_cpu = median(floors, "cpu"), median(verifies, "cpu")
    ratio, cpu_ratio = check_s / floor_s, check_cpu / floor_cpu
    qdq_s = float(np.median([r["phases"][0] for r in floors]))
    noqdq_s = float(np.median([r["phases"][1] for r in floors]))
    floor_peak, check_peak = median(floors, "peak_mb"), median(verifies, "peak_mb")
    idle = median(verifies, "idle_mb")
    grown = check_peak - idle
    memory = grown / size_mb
    print(f"model file                  {size_mb:7.1f} MiB ({onnx.__name__} ResNet-50 shape, "
          f"{args.samples} samples, median of {args.runs} runs)")
    print(f"plain onnxruntime, 2 models {floor_s:7.2f} s wall {floor_cpu:6.2f} s CPU   peak RSS "
          f"{floor_peak:.0f} MiB (idle {median(floors, 'idle_mb'):.0f})")
    print(f"  Q/DQ model                {qdq_s:7.2f} s wall")
    print(f"  Q/DQ-free model           {noqdq_s:7.2f} s wall")
    print(f"qdqkit verify               {check_s:7.2f} s wall {check_cpu:6.2f} s CPU   peak RSS "
          f"{check_peak:.0f} MiB (idle {idle:.0f})")
    print(f"time   {ratio:.2f}x wall, {cpu_ratio:.2f}x CPU the plain inferences "
          f"(goal <= {TIME_GOAL}x)")
    print(f"memory {memory:.2f}x the model file above the idle interpreter "
          f"(goal < {MEMORY_GOAL}x; {grown:.0f} MiB; plain inferences "
          f"{(floor_peak - median(floors, 'idle_mb')) / size_mb:.2f}x)")
    failed = ratio > TIME_GOAL or cpu_ratio > TIME_GOAL or memory >= MEMORY_GOAL
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
