"""Models and model checks that several test folders share, built with ``GraphBuilder``."""

from __future__ import annotations

from typing import Literal

import numpy as np
import onnx
import onnx_ir as ir

from qdqkit.examples.graph import GraphBuilder, ScaleSpelling

QDQ_OPS = ("QuantizeLinear", "DequantizeLinear")


def qdq_conv_model(
    *,
    scale_as: ScaleSpelling = "initializer",
    weight_style: Literal["q-dq", "dq-only"] = "q-dq",
    zero_point: int | None = 0,
    tf_weight_path: bool = False,
) -> onnx.ModelProto:
    """x -> Q -> DQ -> Conv(W) -> y with the activation scale spelled as asked.

    The weight is per output channel (max|w|/127), as float -> Q -> DQ or int8 -> DQ, optionally
    behind an Identity the way TensorFlow exports route weights.
    """
    g = GraphBuilder("test")
    w = np.random.default_rng(0).normal(size=(4, 3, 3, 3)).astype(np.float32)
    w_scale = (np.abs(w.reshape(4, -1)).max(axis=1) / 127).astype(np.float32)
    x = g.input("x", [1, 3, 8, 8])
    params = [g.scale(0.02, scale_as)]
    if zero_point is not None:
        params.append(g.const(np.array(zero_point, np.int8), "zp"))
    xq = g.node("QuantizeLinear", [x, *params], name="q_x", out="xq")
    xdq = g.node("DequantizeLinear", [xq, *params], name="dq_x", out="xdq")
    w_params = [g.const(w_scale, "w_scale"), g.const(np.zeros(4, np.int8), "w_zp")]
    if weight_style == "q-dq":
        wq = g.node("QuantizeLinear", [g.const(w, "w"), *w_params], name="q_w", out="wq", axis=0)
    else:
        wq = g.const(np.clip(np.rint(w / w_scale.reshape(4, 1, 1, 1)), -127, 127).astype(np.int8),
                     "wq")
    conv_w = g.node("DequantizeLinear", [wq, *w_params], name="dq_w", out="wdq", axis=0)
    if tf_weight_path:
        conv_w = g.node("Identity", [conv_w], name="w_identity", out="w_path")
    g.node("Conv", [xdq, conv_w], name="conv", out="y", pads=[1, 1, 1, 1])
    g.output("y", [1, 4, 8, 8])
    return g.proto()


def ops(model: ir.Model) -> list[str]:
    return [n.op_type for n in model.graph]


def qdq_count(model: onnx.ModelProto) -> int:
    return sum(n.op_type in QDQ_OPS for n in model.graph.node)


def every_node_is_accounted_for(model: ir.Model) -> list[str]:
    """Nodes that are in no predicted layer, not elided and not folded as constants."""
    from qdqkit.trt.predict import run_prediction

    prediction = run_prediction(model)
    engine = prediction.engine
    covered = {n for layer in engine.layers for n in layer.onnx_nodes}
    covered |= set(engine.metadata["elided_nodes"])
    covered |= {n.name for n in prediction.facts.folded_nodes}
    return [n.name or n.op_type for n in model.graph if n.name not in covered]


def windowed_audio_model() -> onnx.ModelProto:
    """An audio front end: a 64-sample window over a waveform of symbolic length."""
    g = GraphBuilder("window", seed=0)
    x = g.input("wave", ["batch", "samples"])
    framed = g.node("Unsqueeze", [x, g.const(np.array([1], np.int64))])
    kernel = g.const(g.rng.normal(0, 0.1, (32, 1, 64)).astype(np.float32))
    g.node("Conv", [framed, kernel], out="spec", strides=[16])
    g.output("spec", ["batch", 32, "frames"])
    return g.proto()


def padded_channels_last_input_model(*, input_cast: bool = False) -> onnx.ModelProto:
    """A TensorFlow-style front: an NHWC input of one channel, zero-padded, reshaped to NCHW and
    read by a conv (a keyword-spotting embedding writes it so); with ``input_cast`` the input is
    cast to float16 first, as a float16 remainder does."""
    g = GraphBuilder("padded_input", seed=0)
    x = g.input("x", [1, 64, 32, 1])
    if input_cast:
        x = g.node("Cast", [x], out="x_fp16", to=int(onnx.TensorProto.FLOAT))
    padded = g.node("Pad", [x, g.const(np.array([0, 1, 1, 0, 0, 1, 1, 0], np.int64))],
                    out="padded")
    nchw = g.node("Reshape", [padded, g.const(np.array([1, 1, 66, 34], np.int64))], out="nchw")
    y = g.node("Relu", [g.conv(nchw, 1, 32, weight="float", name="c1")])
    g.node("Relu", [g.conv(y, 32, 32, weight="float", name="c2")], out="out")
    g.output("out", [1, 32, 66, 34])
    return g.proto()
