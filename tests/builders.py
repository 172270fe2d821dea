"""Tiny graph builders for tests that need an exact, hand-written Q/DQ spelling."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def make_model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    initializers: dict[str, np.ndarray] | None = None,
    opset: int = 13,
) -> onnx.ModelProto:
    inits = [numpy_helper.from_array(np.asarray(v), k) for k, v in (initializers or {}).items()]
    graph = helper.make_graph(nodes, "test", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset < 19 else 9
    return model


def fvalue(name: str, shape: list[int] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def qdq_conv_model(
    *,
    scale_as: str = "initializer",
    weight_style: str = "q-dq",
    zero_point: int | None = 0,
    tf_weight_path: bool = False,
) -> onnx.ModelProto:
    """x -> Q -> DQ -> Conv(W) -> y with the activation scale spelled as asked."""
    rng = np.random.default_rng(0)
    w = rng.normal(size=(4, 3, 3, 3)).astype(np.float32)
    w_scale = (np.abs(w.reshape(4, -1)).max(axis=1) / 127).astype(np.float32)
    inits: dict[str, np.ndarray] = {}
    nodes: list[onnx.NodeProto] = []
    if scale_as == "initializer":
        inits["s"] = np.array(0.02, np.float32)
        scale_name = "s"
    elif scale_as == "constant":
        nodes.append(
            helper.make_node(
                "Constant", [], ["s"], value=numpy_helper.from_array(np.array(0.02, np.float32))
            )
        )
        scale_name = "s"
    elif scale_as == "identity":
        inits["s0"] = np.array(0.02, np.float32)
        nodes.append(helper.make_node("Identity", ["s0"], ["s"]))
        scale_name = "s"
    elif scale_as == "cast":
        inits["s0"] = np.array(0.02, np.float16)
        nodes.append(helper.make_node("Cast", ["s0"], ["s"], to=TensorProto.FLOAT))
        scale_name = "s"
    else:
        raise ValueError(scale_as)
    q_in = ["x", scale_name]
    if zero_point is not None:
        inits["zp"] = np.array(zero_point, np.int8)
        q_in.append("zp")
    nodes += [
        helper.make_node("QuantizeLinear", q_in, ["xq"], name="q_x"),
        helper.make_node("DequantizeLinear", ["xq", *q_in[1:]], ["xdq"], name="dq_x"),
    ]
    inits["w_scale"] = w_scale
    inits["w_zp"] = np.zeros(4, np.int8)
    if weight_style == "q-dq":
        inits["w"] = w
        nodes += [
            helper.make_node(
                "QuantizeLinear", ["w", "w_scale", "w_zp"], ["wq"], name="q_w", axis=0
            ),
            helper.make_node(
                "DequantizeLinear", ["wq", "w_scale", "w_zp"], ["wdq"], name="dq_w", axis=0
            ),
        ]
    elif weight_style == "dq-only":
        inits["wq"] = np.clip(np.rint(w / w_scale.reshape(4, 1, 1, 1)), -127, 127).astype(np.int8)
        nodes.append(
            helper.make_node(
                "DequantizeLinear", ["wq", "w_scale", "w_zp"], ["wdq"], name="dq_w", axis=0
            )
        )
    else:
        raise ValueError(weight_style)
    conv_w = "wdq"
    if tf_weight_path:
        nodes.append(helper.make_node("Identity", ["wdq"], ["w_path"], name="w_identity"))
        conv_w = "w_path"
    nodes.append(helper.make_node("Conv", ["xdq", conv_w], ["y"], name="conv", pads=[1, 1, 1, 1]))
    return make_model(nodes, [fvalue("x", [1, 3, 8, 8])], [fvalue("y", [1, 4, 8, 8])], inits)
