"""Small float models for the data and calibration tests, built in code."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def conv_relu_model(
    channels: int = 4, size: int | None = 8, batch: int | None = None, seed: int = 0
) -> onnx.ModelProto:
    """x[N,3,H,W] -> Conv -> Relu -> Conv -> Add(skip) -> GlobalAveragePool -> y."""
    rng = np.random.default_rng(seed)
    w1 = rng.normal(scale=0.5, size=(channels, 3, 3, 3)).astype(np.float32)
    w2 = rng.normal(scale=0.5, size=(channels, channels, 3, 3)).astype(np.float32)
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c2", "r1"], ["s"], name="add"),
        helper.make_node("GlobalAveragePool", ["s"], ["y"], name="gap"),
    ]
    dims: list[int | str | None] = [batch if batch else "N", 3, size or "H", size or "W"]
    graph = helper.make_graph(
        nodes,
        "calib",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w1, "w1"), numpy_helper.from_array(w2, "w2")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def two_input_model() -> onnx.ModelProto:
    """a[N,4] + b[N,4] -> y, with an int64 index input k[N] gathered from a constant."""
    table = np.arange(12, dtype=np.float32).reshape(3, 4)
    nodes = [
        helper.make_node("Add", ["a", "b"], ["y"], name="add"),
        helper.make_node("Gather", ["table", "k"], ["g"], name="gather", axis=0),
    ]
    graph = helper.make_graph(
        nodes,
        "two",
        [
            helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 4]),
            helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 4]),
            helper.make_tensor_value_info("k", TensorProto.INT64, ["N"]),
        ],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("g", TensorProto.FLOAT, None),
        ],
        [numpy_helper.from_array(table, "table")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def quantized_input_model(scale: float = 0.05) -> onnx.ModelProto:
    """x -> QuantizeLinear(scale, int8 zero point) -> DequantizeLinear -> Relu -> y."""
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["xq"], name="q"),
        helper.make_node("DequantizeLinear", ["xq", "s", "zp"], ["xd"], name="dq"),
        helper.make_node("Relu", ["xd"], ["y"], name="relu"),
    ]
    graph = helper.make_graph(
        nodes,
        "q",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [
            numpy_helper.from_array(np.array(scale, np.float32), "s"),
            numpy_helper.from_array(np.array(0, np.int8), "zp"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def plugin_model() -> onnx.ModelProto:
    """x -> Relu -> r; r -> EfficientNMS_TRT (custom domain) -> n -> Relu -> m; r -> Neg -> z."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("EfficientNMS_TRT", ["r"], ["n"], name="nms", domain="trt.plugins"),
        helper.make_node("Relu", ["n"], ["m"], name="after_nms"),
        helper.make_node("Neg", ["r"], ["z"], name="neg"),
    ]
    graph = helper.make_graph(
        nodes,
        "plugin",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 6])],
        [
            helper.make_tensor_value_info("m", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, None),
        ],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("trt.plugins", 1)],
    )
    model.ir_version = 8
    return model
