"""Accuracy proof: float vs ``qdqkit quantize`` vs onnxruntime ``quantize_static`` on real models.

Each model is quantized by both tools on the same calibration samples, in the same run, and all
three are run the way ``qdqkit verify`` emulates TensorRT: onnxruntime on the CPU with graph
optimizations off, FP16 remainders upcast to FP32 (so the comparison measures quantization, not
fp16 kernels). Reported per model: the task metric, the output SNR against the float model, and
the INT8 share of MACs in the engine TensorRT 11 would build (qdqkit's predictor, for both
outputs). onnxruntime runs in the configuration its documentation gives for TensorRT: QDQ,
symmetric int8 activations and weights, per-channel weights, a Q/DQ pair on each weight and a
dedicated pair per consumer, MinMax calibration.

    pip install Pillow      # rendering the labelled data; DejaVu fonts: apt-get install fonts-dejavu-core
    python benchmarks/accuracy/run.py [--models mnist,ppocr_rec] [--calib 32] [--eval 200] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from benchmarks.accuracy.fetch import DEFAULT_CACHE
from benchmarks.accuracy.tasks import TASKS, Outputs, Task, build
from benchmarks.peers import at_opset13, ort_quantize_static

from qdqkit import quantize
from qdqkit.core.numerics import ErrorAccumulator, make_session
from qdqkit.core.upcast import upcast_float16
from qdqkit.linting import lint


def _run_all(session: Any, task: Task) -> list[Outputs]:
    return [list(session.run(None, feeds)) for feeds in task.evaluate]


def _emulated(path: Path) -> Any:
    import onnx_ir as ir

    model = ir.load(str(path))
    upcast_float16(model)
    return make_session(model)


def _snr(outs: list[Outputs], ref: list[Outputs]) -> float:
    """SNR of the first output (scores/probabilities/maps) over the whole evaluation set."""
    acc = ErrorAccumulator()
    for got, want in zip(outs, ref, strict=True):
        acc.add(want[0], got[0])
    return acc.result().snr_db


def _int8_share(path: Path, sample: dict[str, np.ndarray]) -> float:
    """INT8 share of MACs in the predicted engine at the evaluated input shapes (symbolic
    dimensions counted as 1 would weigh the layers wrongly)."""
    shapes = ",".join(f"{name}:{'x'.join(str(d) for d in array.shape)}"
                      for name, array in sample.items())
    share = lint(str(path), trt="11", shapes=shapes).summary.int8_mac_share
    return 100.0 * (share or 0.0)


def evaluate(task: Task, folder: Path, method: str, ort_method: str) -> list[dict[str, Any]]:
    reference = _run_all(make_session(str(task.model)), task)
    rows = [{"model": task.name, "tool": "float", "metric": task.metric,
             "value": task.score(reference, task.labels, reference), "snr_db": None,
             "int8_mac_pct": 0.0, "seconds": None}]
    ours = folder / "qdqkit.onnx"
    start = time.perf_counter()
    quantize(str(task.model), task.calib, output=ours, method=method)
    ours_s = time.perf_counter() - start
    theirs = folder / "ort.onnx"
    start = time.perf_counter()
    ort_quantize_static(at_opset13(task.model, folder), theirs, task.calib, ort_method)
    theirs_s = time.perf_counter() - start
    for tool, path, seconds in ((f"qdqkit {method}", ours, ours_s),
                                (f"onnxruntime {ort_method}", theirs, theirs_s)):
        outs = _run_all(_emulated(path), task)
        rows.append({"model": task.name, "tool": tool, "metric": task.metric,
                     "value": task.score(outs, task.labels, reference),
                     "snr_db": _snr(outs, reference), "int8_mac_pct": _int8_share(path, task.calib[0]),
                     "seconds": seconds})
    return rows


def _table(rows: list[dict[str, Any]]) -> str:
    lines = ["| model | tool | metric | value | output SNR dB | INT8 MACs % | quantize s |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        snr = "" if r["snr_db"] is None else f"{r['snr_db']:.1f}"
        secs = "" if r["seconds"] is None else f"{r['seconds']:.1f}"
        mac = "" if r["tool"] == "float" else f"{r['int8_mac_pct']:.1f}"
        lines.append(f"| {r['model']} | {r['tool']} | {r['metric']} | {r['value']:.2f} | {snr} "
                     f"| {mac} | {secs} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default=",".join(TASKS))
    parser.add_argument("--calib", type=int, default=32, help="calibration samples per model")
    parser.add_argument("--eval", type=int, default=200, help="evaluation samples per model")
    parser.add_argument("--method", default="auto", help="qdqkit calibration method")
    parser.add_argument("--ort-method", default="MinMax", help="onnxruntime CalibrationMethod")
    parser.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    names = [name for name in args.models.split(",") if name]
    unknown = [name for name in names if name not in TASKS]
    if unknown:
        parser.error(f"unknown model '{unknown[0]}': use {', '.join(TASKS)}")
    rows: list[dict[str, Any]] = []
    for name in names:
        task = build(name, args.cache, args.calib, args.eval)
        with tempfile.TemporaryDirectory() as folder:
            result = evaluate(task, Path(folder), args.method, args.ort_method)
        rows += result
        print(f"{task.name}: done", file=sys.stderr)
    print(json.dumps(rows, indent=1) if args.json else _table(rows))


if __name__ == "__main__":
    main()
