"""Cost of ``qdqkit verify`` against the two plain onnxruntime inferences it must run anyway.

A ResNet-50-shaped Q/DQ model as QAT exports spell it (float weights -> Q -> DQ per output channel
at max|w|/127; every Conv, MatMul and Add input and the output quantized per tensor; about 98 MiB)
is built in code and translated. Then, each in its own
child process so peak RSS is its own, with imports done before the clock starts:
- the floor: plain onnxruntime (default session options) on the Q/DQ model and on the Q/DQ-free
  model, N samples each (two sessions, 2N runs);
- ``verify`` on the same N random samples.
Goals: verify <= 1.5x the floor's time; verify's peak RSS above the interpreter's own after imports
< 3x the model file. Exit status 1 when a goal is missed.

    python benchmarks/bench_verify.py [--samples 4]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

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
start = time.perf_counter()
if mode == "floor":
    rng = np.random.default_rng(0)
    feeds = [{"input": rng.uniform(-1, 1, (1, 3, 224, 224)).astype(np.float32)}
             for _ in range(samples)]
    for path in (model, bundle + "/resnet50_qdq_noqdq.onnx"):
        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        for feed in feeds:
            session.run(None, feed)
        del session
else:
    result = verify(model, bundle, samples=samples)
    assert result.samples == samples and result.passed and not result.loss_sources, result.verdict
done = time.perf_counter()
print(json.dumps({"seconds": done - start, "idle_mb": idle,
                  "peak_mb": hwm()}))
"""


def measure(mode: str, model: Path, bundle: Path, samples: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, "-c", CHILD, mode, str(model), str(bundle), str(samples)],
                         check=True, capture_output=True, text=True)
    return dict(json.loads(out.stdout.splitlines()[-1]))


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
    floor = sorted(floors, key=lambda r: r["seconds"])[len(floors) // 2]
    check = sorted(verifies, key=lambda r: r["seconds"])[len(verifies) // 2]
    ratio = check["seconds"] / floor["seconds"]
    grown = check["peak_mb"] - check["idle_mb"]
    memory = grown / size_mb
    print(f"model file                 {size_mb:8.1f} MiB ({onnx.__name__} ResNet-50 shape, "
          f"{args.samples} samples)")
    print(f"plain onnxruntime, 2 models {floor['seconds']:7.2f} s   peak RSS "
          f"{floor['peak_mb']:.0f} MiB (idle {floor['idle_mb']:.0f})")
    print(f"qdqkit verify              {check['seconds']:8.2f} s   peak RSS "
          f"{check['peak_mb']:.0f} MiB (idle {check['idle_mb']:.0f})")
    print(f"time   {ratio:.2f}x the plain inferences (goal <= {TIME_GOAL}x)")
    print(f"memory {memory:.2f}x the model file above the idle interpreter "
          f"(goal < {MEMORY_GOAL}x; {grown:.0f} MiB)")
    failed = ratio > TIME_GOAL or memory >= MEMORY_GOAL
    print("FAIL" if failed else "PASS")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
