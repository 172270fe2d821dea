"""``qdqkit.quantize`` end to end against plain inference and onnxruntime's quantizer.

One run on a ResNet-50-shaped float model built in code, N calibration samples (default 64):
the floor is N plain onnxruntime inferences of the float model (default session options),
measured just before each run; then
the whole ``quantize`` (placement, calibration, Q/DQ insertion, FP16 remainder, prediction,
lint, writing) with each method, and onnxruntime's ``quantize_static`` (TensorRT-style QDQ
configuration) with MinMax and Entropy calibration on the same samples. Every run is a child
process so its peak RSS is its own. Goals: max <= 1.2x the floor, histogram methods <= 1.4x,
peak RSS < 1 GB and flat from 64 to 512 samples. On a machine other work shares, ``--repeat N``
runs every pair N times and reports the pair with the median ratio. Each line also gives the
median CPU seconds of the run's child process (all threads, start-up included), which load from
other work moves far less than wall time.

    python benchmarks/bench_quantize.py [--samples 64] [--rss-samples 512] [--skip-ort] [--repeat 1]
        [--methods max,percentile,entropy,mse,auto]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_calibration import resnet50_shaped

METHODS = ("max", "percentile", "entropy", "mse", "auto")
ORT_METHODS = ("MinMax", "Entropy")


def _samples(count: int) -> Iterator[dict[str, np.ndarray]]:
    """Seeded image-like inputs, made one at a time so the data itself costs no memory."""
    rng = np.random.default_rng(0)
    for _ in range(count):
        yield {"input": rng.standard_normal((1, 3, 224, 224), dtype=np.float32)}


def _child(mode: str, path: str, samples: int, folder: str) -> dict[str, Any]:
    result: dict[str, Any] = {}
    if mode == "floor":
        import onnxruntime as ort

        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        start = time.perf_counter()
        for feeds in _samples(samples):
            session.run(None, feeds)
        result["seconds"] = time.perf_counter() - start
    elif mode.startswith("ort-"):
        from peers import ort_quantize_static

        start = time.perf_counter()
        ort_quantize_static(Path(path), Path(folder) / f"{mode}.onnx", _samples(samples), mode[4:])
        result["seconds"] = time.perf_counter() - start
    else:
        from qdqkit import quantize

        start = time.perf_counter()
        done = quantize(path, _samples(samples), output=Path(folder) / f"{mode}.onnx",
                        method=mode)
        result["seconds"] = time.perf_counter() - start
        result["phases"] = done.phases
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["peak_rss_mb"] = usage.ru_maxrss / 1024
    # CPU seconds of the whole child (all threads): steadier than wall time when other work
    # shares the cores, though it counts the fixed start-up too.
    result["cpu_seconds"] = usage.ru_utime + usage.ru_stime
    return result


def _run(mode: str, path: Path, samples: int) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--child", mode, "--model", str(path),
                          "--samples", str(samples), "--folder", str(path.parent)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--rss-samples", type=int, default=512,
                        help="also run `auto` with this many samples (RSS flatness); 0 skips")
    parser.add_argument("--skip-ort", action="store_true", help="leave out onnxruntime")
    parser.add_argument("--repeat", type=int, default=1,
                        help="paired runs per mode; the median ratio is reported")
    parser.add_argument("--methods", default=",".join(METHODS),
                        help=f"comma-separated qdqkit methods to run (default {','.join(METHODS)})")
    parser.add_argument("--child")
    parser.add_argument("--model")
    parser.add_argument("--folder")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.model, args.samples, args.folder)))
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "resnet50_shaped.onnx"
        onnx.save(resnet50_shaped(), path)
        # Each run is paired with a floor measured just before it, and the ratio is to that floor:
        # on a shared machine the load drifts within minutes, and a ratio to one early floor
        # would measure the drift.
        methods = [m for m in args.methods.split(",") if m]
        unknown = [m for m in methods if m not in METHODS]
        if unknown:
            parser.error(f"unknown method '{unknown[0]}': use {', '.join(METHODS)}")
        modes = [*methods, *(() if args.skip_ort else (f"ort-{m}" for m in ORT_METHODS))]
        for mode in modes:
            pairs = []
            for _ in range(max(1, args.repeat)):
                floor = _run("floor", path, args.samples)
                pairs.append((floor, _run(mode, path, args.samples)))
            pairs.sort(key=lambda pair: pair[1]["seconds"] / pair[0]["seconds"])
            floor, r = pairs[len(pairs) // 2]
            label = f"onnxruntime {mode[4:]}" if mode.startswith("ort-") else f"qdqkit {mode}"
            goal = "" if mode.startswith("ort-") else (
                " (goal <= 1.2x)" if mode == "max" else " (goal <= 1.4x)")
            cpus = sorted(p[1]["cpu_seconds"] for p in pairs)
            cpu = cpus[len(cpus) // 2]
            print(f"{label:22s} {r['seconds']:7.2f} s  floor {floor['seconds']:6.2f} s  "
                  f"{r['seconds'] / floor['seconds']:5.2f}x{goal}  CPU {cpu:5.1f} s  peak RSS "
                  f"{r['peak_rss_mb']:6.0f} MB (floor {floor['peak_rss_mb']:.0f} MB)", flush=True)
            if "phases" in r:
                # Where the run goes: the passes over the data beside the floor they cannot beat,
                # and the fixed steps around them.
                phases = r["phases"]
                passes = phases.get("calibration passes", 0.0)
                steps = ", ".join(f"{name} {value:.2f}" for name, value in phases.items()
                                  if value >= 0.005)
                print(f"{'':22s} where it goes (s): {steps}; the passes alone "
                      f"{passes / floor['seconds']:.2f}x the floor", flush=True)
        if args.rss_samples:
            r = _run("auto", path, args.rss_samples)
            print(f"qdqkit auto, {args.rss_samples} samples: {r['seconds']:.2f} s, "
                  f"peak RSS {r['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
