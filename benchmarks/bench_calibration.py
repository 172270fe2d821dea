"""Calibration cost against plain inference, on a ResNet-50-shaped float model built in code.

The floor is N plain onnxruntime inferences of the float model (default session options). Then
the one calibration pass observes every Conv input: with running max only, and with the 2048-bin
histograms (then ``auto``, which evaluates every amax method). Each mode runs in its own child
process so its peak RSS is its own. Goals: max <= 1.2x the floor, histograms <= 1.4x, peak RSS
< 1 GB and flat from 64 to 512 samples.

    python benchmarks/bench_calibration.py [--samples 64] [--rss-samples 512]
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

STAGES = ((3, 64), (4, 128), (6, 256), (3, 512))  # (bottleneck blocks, width): ResNet-50


class _Builder:
    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.count = 0

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, relu: bool = True) -> str:
        """Conv with its BatchNormalization folded into weight and bias, then ReLU."""
        self.count += 1
        name = f"conv{self.count}"
        w = self.rng.normal(scale=np.sqrt(2.0 / (cin * k * k)), size=(cout, cin, k, k))
        self.inits += [numpy_helper.from_array(w.astype(np.float32), f"{name}.w"),
                       numpy_helper.from_array(np.zeros(cout, np.float32), f"{name}.b")]
        pad = k // 2
        self.nodes.append(helper.make_node(
            "Conv", [x, f"{name}.w", f"{name}.b"], [f"{name}.out"], name=name,
            kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4))
        if not relu:
            return f"{name}.out"
        self.nodes.append(helper.make_node("Relu", [f"{name}.out"], [f"{name}.relu"]))
        return f"{name}.relu"


def resnet50_shaped() -> onnx.ModelProto:
    b = _Builder()
    x = b.conv("input", 3, 64, 7, stride=2)
    b.nodes.append(helper.make_node("MaxPool", [x], ["pool"], kernel_shape=[3, 3], strides=[2, 2],
                                    pads=[1, 1, 1, 1]))
    x, cin = "pool", 64
    for stage, (blocks, width) in enumerate(STAGES):
        for block in range(blocks):
            stride = 2 if block == 0 and stage > 0 else 1
            y = b.conv(x, cin, width, 1)
            y = b.conv(y, width, width, 3, stride=stride)
            y = b.conv(y, width, width * 4, 1, relu=False)
            skip = b.conv(x, cin, width * 4, 1, stride=stride, relu=False) if block == 0 else x
            out = f"s{stage}b{block}"
            b.nodes += [helper.make_node("Add", [y, skip], [out + ".add"]),
                        helper.make_node("Relu", [out + ".add"], [out])]
            x, cin = out, width * 4
    fc = b.rng.normal(scale=0.02, size=(2048, 1000)).astype(np.float32)
    b.inits.append(numpy_helper.from_array(fc, "fc.w"))
    b.nodes += [helper.make_node("GlobalAveragePool", [x], ["gap"]),
                helper.make_node("Flatten", ["gap"], ["flat"]),
                helper.make_node("MatMul", ["flat", "fc.w"], ["logits"])]
    graph = helper.make_graph(
        b.nodes, "resnet50_shaped",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, None)], b.inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _child(mode: str, path: str, samples: int) -> dict[str, float]:
    from qdqkit.core.activations import ActivationRunner, observe_activations
    from qdqkit.core.calibration import calibrate
    from qdqkit.core.data import open_data

    model = onnx.load(path)
    data = open_data("random", model, limit=samples)
    result: dict[str, float] = {}
    if mode == "floor":
        import onnxruntime as ort

        session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
        start = time.perf_counter()
        for feeds in data:
            session.run(None, feeds)
        result["seconds"] = time.perf_counter() - start
    else:
        conv_inputs = list(dict.fromkeys(n.input[0] for n in model.graph.node if n.op_type == "Conv"))
        runner = ActivationRunner(model, conv_inputs)
        start = time.perf_counter()
        observers = observe_activations(runner, data, histogram=mode != "max")
        result["seconds"] = time.perf_counter() - start
        start = time.perf_counter()
        # auto evaluates max, percentile, entropy and mse on every tensor: the costliest method.
        for observer in observers.values():
            calibrate(observer, "max" if mode == "max" else "auto")
        result["methods_seconds"] = time.perf_counter() - start
        result["tensors"] = len(observers)
    result["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return result


def _run(mode: str, path: Path, samples: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--child", mode, "--model", str(path),
                          "--samples", str(samples)], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=64)
    parser.add_argument("--rss-samples", type=int, default=0,
                        help="also run the histogram mode with this many samples (RSS flatness)")
    parser.add_argument("--child", choices=("floor", "max", "histogram"))
    parser.add_argument("--model")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(args.child, args.model, args.samples)))
        return
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "resnet50_shaped.onnx"
        onnx.save(resnet50_shaped(), path)
        floor = _run("floor", path, args.samples)
        print(f"floor: {args.samples} plain onnxruntime inferences  {floor['seconds']:.2f} s  "
              f"peak RSS {floor['peak_rss_mb']:.0f} MB")
        for mode in ("max", "histogram"):
            r = _run(mode, path, args.samples)
            print(f"{mode:9s}: observe {int(r['tensors'])} conv inputs {r['seconds']:.2f} s "
                  f"({r['seconds'] / floor['seconds']:.2f}x floor), amax methods "
                  f"{r['methods_seconds']:.2f} s, total "
                  f"{(r['seconds'] + r['methods_seconds']) / floor['seconds']:.2f}x, "
                  f"peak RSS {r['peak_rss_mb']:.0f} MB")
        if args.rss_samples:
            r = _run("histogram", path, args.rss_samples)
            print(f"histogram with {args.rss_samples} samples: {r['seconds']:.2f} s, "
                  f"peak RSS {r['peak_rss_mb']:.0f} MB")


if __name__ == "__main__":
    main()
