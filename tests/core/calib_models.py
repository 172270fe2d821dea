"""Small float models for the data and calibration tests, built with the one graph builder."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto

from qdqkit.examples.graph import GraphBuilder


def conv_relu_model(
    channels: int = 4, size: int | None = 8, batch: int | None = None, seed: int = 0
) -> onnx.ModelProto:
    """x[N,3,H,W] -> Conv -> Relu -> Conv -> Add(skip) -> GlobalAveragePool -> y."""
    g = GraphBuilder("calib", opset=17)
    rng = np.random.default_rng(seed)
    w1 = g.const(rng.normal(scale=0.5, size=(channels, 3, 3, 3)).astype(np.float32), "w1")
    w2 = g.const(rng.normal(scale=0.5, size=(channels, channels, 3, 3)).astype(np.float32), "w2")
    x = g.input("x", [batch if batch else "N", 3, size or "H", size or "W"])
    c1 = g.node("Conv", [x, w1], name="conv1", out="c1", pads=[1, 1, 1, 1])
    r1 = g.node("Relu", [c1], name="relu1", out="r1")
    c2 = g.node("Conv", [r1, w2], name="conv2", out="c2", pads=[1, 1, 1, 1])
    s = g.node("Add", [c2, r1], name="add", out="s")
    g.output(g.node("GlobalAveragePool", [s], name="gap", out="y"))
    return g.proto()


def two_input_model() -> onnx.ModelProto:
    """a[N,4] + b[N,4] -> y, with an int64 index input k[N] gathered from a constant."""
    g = GraphBuilder("two", opset=17)
    table = g.const(np.arange(12, dtype=np.float32).reshape(3, 4), "table")
    a, b = g.input("a", ["N", 4]), g.input("b", ["N", 4])
    k = g.input("k", ["N"], TensorProto.INT64)
    g.output(g.node("Add", [a, b], name="add", out="y"))
    g.output(g.node("Gather", [table, k], name="gather", out="g", axis=0))
    return g.proto()


def quantized_input_model(scale: float = 0.05) -> onnx.ModelProto:
    """x -> QuantizeLinear(scale, int8 zero point) -> DequantizeLinear -> Relu -> y."""
    g = GraphBuilder("q", opset=17)
    s = g.const(np.array(scale, np.float32), "s")
    zp = g.const(np.array(0, np.int8), "zp")
    x = g.input("x", [1, 64])
    xq = g.node("QuantizeLinear", [x, s, zp], name="q", out="xq")
    xd = g.node("DequantizeLinear", [xq, s, zp], name="dq", out="xd")
    g.output(g.node("Relu", [xd], name="relu", out="y"))
    return g.proto()


def plugin_model() -> onnx.ModelProto:
    """x -> Relu -> r; r -> EfficientNMS_TRT (custom domain) -> n -> Relu -> m; r -> Neg -> z."""
    g = GraphBuilder("plugin", opset=17)
    g.use_domain("trt.plugins", 1)
    x = g.input("x", ["N", 6])
    r = g.node("Relu", [x], name="relu", out="r")
    n = g.node("EfficientNMS_TRT", [r], name="nms", out="n", domain="trt.plugins")
    g.output(g.node("Relu", [n], name="after_nms", out="m"))
    g.output(g.node("Neg", [r], name="neg", out="z"))
    return g.proto()


LSTM_HIDDEN = 6


def lstm_state_model(*, gain: bool = True, batch: int | str = "batch") -> onnx.ModelProto:
    """Silero VAD's inputs in small: x[batch, 8] and state[2, batch, 6] (a bidirectional LSTM's
    initial_h, batched on axis 1) -> Y_h[2, batch, 6], times a scalar gain[] when ``gain``."""
    g = GraphBuilder("lstm", opset=17)
    rng = np.random.default_rng(0)
    hidden = LSTM_HIDDEN
    w = g.const(rng.normal(scale=0.5, size=(2, 4 * hidden, 8)).astype(np.float32), "w")
    r = g.const(rng.normal(scale=0.5, size=(2, 4 * hidden, hidden)).astype(np.float32), "r")
    x = g.input("x", [batch, 8])
    state = g.input("state", [2, batch, hidden])
    seq = g.node("Unsqueeze", [x, g.const(np.array([0], np.int64), "axes")], name="seq",
                 out="seq")
    g.node("LSTM", [seq, w, r, "", "", state], name="lstm", out="lstm_y", outputs=2,
           direction="bidirectional", hidden_size=hidden)
    if gain:
        g.output(g.node("Mul", ["lstm_y1", g.input("gain", [])], name="mul", out="y"))
    else:
        g.output("lstm_y1")
    return g.proto()
