"""Benchmark ``qdqkit lint``: ResNet-50 (< 0.5 s), a 20k-node model (< 5 s), linear in graph size.

Every figure is printed next to a baseline measured in the same run on the same file: a plain
``onnx.load`` (what any tool pays to read the model at all). Run: ``python3 benchmarks/bench_lint.py``.
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from qdqkit.linting import lint


class _Net:
    """QAT-style Q/DQ graphs written directly with onnx.helper (scales are constants)."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.rng = np.random.default_rng(0)
        self.count = 0

    def _id(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}_{self.count}"

    def node(self, op: str, inputs: list[str], **attrs: object) -> str:
        name = self._id(op)
        self.nodes.append(helper.make_node(op, inputs, [name + "_out"], name=name, **attrs))  # type: ignore[arg-type]
        return name + "_out"

    def const(self, array: np.ndarray) -> str:
        name = self._id("c")
        self.inits.append(numpy_helper.from_array(array, name))
        return name

    def qdq(self, x: str, axis: int | None = None, channels: int = 1) -> str:
        shape = (channels,) if axis is not None else ()
        s = self.const(np.full(shape, 0.02, np.float32))
        z = self.const(np.zeros(shape, np.int8))
        extra = {"axis": axis} if axis is not None else {}
        return self.node("DequantizeLinear", [self.node("QuantizeLinear", [x, s, z], **extra), s, z],
                         **extra)

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, relu: bool = True) -> str:
        w = self.const((self.rng.standard_normal((cout, cin, k, k)) * 0.05).astype(np.float32))
        y = self.node("Conv", [self.qdq(x), self.qdq(w, axis=0, channels=cout),
                               self.const(np.zeros(cout, np.float32))],
                      kernel_shape=[k, k], pads=[k // 2] * 4, strides=[stride, stride])
        return self.node("Relu", [y]) if relu else y

    def model(self, shape: list[int], out: str) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, "bench", [helper.make_tensor_value_info("input", TensorProto.FLOAT, shape)],
            [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        model.ir_version = 8
        return model


def resnet50() -> onnx.ModelProto:
    net = _Net()
    y = net.conv("input", 3, 64, 7, 2)
    y = net.node("MaxPool", [y], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    cin = 64
    for stage, (blocks, width) in enumerate(zip((3, 4, 6, 3), (64, 128, 256, 512), strict=True)):
        for index in range(blocks):
            stride = 2 if stage > 0 and index == 0 else 1
            h = net.conv(y, cin, width, 1)
            h = net.conv(h, width, width, 3, stride)
            h = net.conv(h, width, width * 4, 1, relu=False)
            skip = net.conv(y, cin, width * 4, 1, stride, relu=False) if index == 0 else y
            y = net.node("Relu", [net.node("Add", [h, net.qdq(skip)])])
            cin = width * 4
    y = net.node("Flatten", [net.node("GlobalAveragePool", [net.qdq(y)])])
    w = net.const((net.rng.standard_normal((1000, 2048)) * 0.02).astype(np.float32))
    y = net.node("Gemm", [net.qdq(y), net.qdq(w, axis=0, channels=1000),
                          net.const(np.zeros(1000, np.float32))], transB=1)
    return net.model([1, 3, 224, 224], y)


def chain(blocks: int) -> onnx.ModelProto:
    """A long stack of small residual blocks: 15 nodes per block."""
    net = _Net()
    y = net.conv("input", 32, 32, 3)
    for _ in range(blocks):
        h = net.conv(net.conv(y, 32, 32, 3), 32, 32, 3, relu=False)
        y = net.node("Relu", [net.node("Add", [h, net.qdq(y)])])
    return net.model([1, 32, 8, 8], y)


def _median_seconds(fn: object, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(model: onnx.ModelProto, folder: Path, name: str, repeat: int) -> tuple[int, float, float]:
    path = folder / f"{name}.onnx"
    onnx.save(model, path)
    baseline = _median_seconds(lambda: onnx.load(path), repeat)
    seconds = _median_seconds(lambda: lint(path), repeat)
    return len(model.graph.node), seconds, baseline


def main() -> int:
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        nodes, seconds, baseline = measure(resnet50(), folder, "resnet50", repeat=5)
        ok &= seconds < 0.5
        print(f"ResNet-50 Q/DQ ({nodes} nodes): lint {seconds:.3f} s "
              f"(limit 0.5 s); onnx.load {baseline:.3f} s; ratio {seconds / baseline:.1f}x")
        rows = []
        for blocks in (340, 680, 1360):
            nodes, seconds, baseline = measure(chain(blocks), folder, f"chain{blocks}", repeat=3)
            rows.append((nodes, seconds, baseline))
            print(f"chain of {blocks} blocks ({nodes} nodes): lint {seconds:.3f} s; "
                  f"onnx.load {baseline:.3f} s; ratio {seconds / baseline:.1f}x; "
                  f"{seconds / nodes * 1e6:.1f} us/node")
        big_nodes, big_seconds, _ = rows[-1]
        ok &= big_nodes >= 20_000 and big_seconds < 5.0
        growth = (rows[-1][1] / rows[0][1]) / (rows[-1][0] / rows[0][0])
        load_growth = (rows[-1][2] / rows[0][2]) / (rows[-1][0] / rows[0][0])
        ok &= growth < 1.5
        print(f"time per node from {rows[0][0]} to {rows[-1][0]} nodes grows {growth:.2f}x "
              f"(1.0 = linear); onnx.load's grows {load_growth:.2f}x")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
