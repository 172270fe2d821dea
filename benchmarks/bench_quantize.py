"""``qdqkit.quantize`` end to end against plain inference and onnxruntime's quantizer.

One run on a ResNet-50-shaped float model built in code, N calibration samples (default 64):
the floor is N plain onnxruntime inferences of the float model (default session options),
measured just before each run; then
the whole ``quantize`` (placement, calibration, Q/DQ insertion, FP16 remainder, prediction,
lint, writing) with each method, and onnxruntime's ``quantize_static`` (TensorRT-style QDQ
configuration) with MinMax and Entropy calibration on the same samples. Every run is a child
process so its peak RSS is its own. Goals: max <= 1.2x the floor, histogram methods <= 1.4x,
peak RSS < 1 GB and flat from 64 to 512 samples. After the runs, a lower bound for any
quantizer on this machine, measured the same way: the floor plus what no tool can skip (reading
the model, building an onnxruntime session, which the floor leaves out, and writing the INT8
model ``max`` wrote); for ``max``, the inferences with only the cheapest exact in-session max of
each observed tensor (the activations ``max`` quantized, read from its output); for the
histogram methods, the inferences that hand those tensors back to Python and one ``np.bincount``
over their values, spread over every core. On a machine other work shares, ``--repeat N``
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
    elif mode == "bound":
        result.update(_bound(path, samples, folder))
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


def _bound(path: str, samples: int, folder: str) -> dict[str, Any]:
    """What any quantizer pays beyond the floor (see the module's text), in seconds; the
    inferences are timed in rounds beside plain ones in this process, the least of each kept."""
    import onnxruntime as ort

    from qdqkit.core.numerics import available_cores

    clock = time.perf_counter
    start = clock()
    model = onnx.load(path)
    read = clock() - start
    start = clock()
    plain = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    bound: dict[str, Any] = {"read": read, "session": clock() - start, "write": 0.0}
    quantized = Path(folder) / "max.onnx"
    if not quantized.exists():
        bound["floor"] = _inferences(plain, samples)
        return bound
    # Writing what a quantizer writes: the INT8 model, a quarter the float one's size.
    int8 = onnx.load(str(quantized))
    start = clock()
    onnx.save(int8, str(Path(folder) / "bound_write.onnx"))
    bound["write"] = clock() - start
    inits = {i.name for i in int8.graph.initializer}
    observed = sorted({n.input[0] for n in int8.graph.node
                       if n.op_type == "QuantizeLinear" and n.input[0] not in inits})
    # The cheapest exact in-session max: GlobalMaxPool, which onnxruntime runs in its blocked
    # layout, so no tensor is reordered or copied out (a 4-D tensor; others ReduceMax).
    reducing = onnx.ModelProto()
    reducing.CopyFrom(model)
    ranks = {v.name: len(v.type.tensor_type.shape.dim) for v in
             onnx.shape_inference.infer_shapes(model).graph.value_info}
    for index, name in enumerate(observed):
        op = "GlobalMaxPool" if ranks.get(name) == 4 else "ReduceMax"
        reducing.graph.node.append(onnx.helper.make_node(op, [name], [f"bound_max{index}"]))
        reducing.graph.output.append(onnx.helper.make_empty_tensor_value_info(f"bound_max{index}"))
    copying = onnx.ModelProto()
    copying.CopyFrom(model)
    copying.graph.output.extend(onnx.helper.make_empty_tensor_value_info(n) for n in observed)
    sessions = {"floor": plain, "max_in_session": _session(reducing), "copy_out": _session(copying)}
    for _ in range(3):
        for key, session in sessions.items():
            bound[key] = min(bound.get(key, float("inf")), _inferences(session, samples))
    # The one pass a histogram cannot do without: counting precomputed bin indices.
    values = sessions["copy_out"].run(None, next(_samples(1)))[-len(observed):]
    bins = [np.minimum(np.abs(v.ravel()) * (2048 / (float(np.abs(v).max()) or 1.0)),
                       2047).astype(np.intp) for v in values]
    start = clock()
    for index in bins:
        np.bincount(index, minlength=2048)
    bound["count"] = (clock() - start) * samples / available_cores()
    bound["observed"] = len(observed)
    bound["values"] = sum(v.size for v in values)
    return bound


def _session(model: onnx.ModelProto) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _inferences(session: Any, samples: int) -> float:
    start = time.perf_counter()
    for feeds in _samples(samples):
        session.run(None, feeds)
    return time.perf_counter() - start


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
        if "max" in methods:
            bound = _run("bound", path, args.samples)
            floor_s = bound["floor"]
            fixed = bound["read"] + bound["session"] + bound["write"]
            print(f"lower bound for any quantizer (least of 3 rounds each): floor {floor_s:.2f} s "
                  f"+ reading {bound['read']:.2f} + a session {bound['session']:.2f} + writing "
                  f"{bound['write']:.2f} = {1 + fixed / floor_s:.2f}x the floor")
            if "max_in_session" in bound:
                least = bound["max_in_session"] + fixed
                print(f"{'':22s} max: the inferences with only an in-session max of each "
                      f"observed tensor {bound['max_in_session'] / floor_s:.2f}x the floor, + the "
                      f"fixed steps = {least / floor_s:.2f}x the floor")
                least = bound["copy_out"] + fixed + bound["count"]
                print(f"{'':22s} histograms: {bound['observed']} observed tensors "
                      f"({bound['values'] / 1e6:.1f}M values a sample) copied out "
                      f"{bound['copy_out'] / floor_s:.2f}x the floor, + the fixed steps, + one "
                      f"np.bincount per value on every core {bound['count']:.2f} s = "
                      f"{least / floor_s:.2f}x the floor")
        if args.rss_samples:
            r = _run("auto", path, args.rss_samples)
            print(f"qdqkit auto, {args.rss_samples} samples: {r['seconds']:.2f} s, "
                  f"peak RSS {r['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
