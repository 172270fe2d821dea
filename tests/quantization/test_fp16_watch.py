"""The FP16 watch list: tensors inside a fused layer are not observed, block boundaries are.

Truth: the fusion rules of ``trt.predict.fusion`` as the documented TensorRT fusions (a conv with
its BatchNormalization and activation is one layer; a residual Add's inputs and any tensor with
two readers are written to memory), and the ranges of the float model run by onnxruntime.
"""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.shapes import infer_value_types
from qdqkit.examples.graph import GraphBuilder
from qdqkit.quantization import quantize
from qdqkit.quantization.fp16_watch import fp16_watch
from tests.quantization.float_models import calibration_batches, resnet


def _chain(scale: float = 1.0) -> GraphBuilder:
    """x -> Conv -> BN -> Relu -> Conv -> Add(skip = first Relu) -> Relu -> y."""
    g = GraphBuilder("chain", seed=0, opset=19)
    x = g.input("x", [1, 8, 8, 8])
    c1 = g.conv(x, 8, 8, weight="float", name="conv1", std=0.3 * scale)
    b1 = g.bn(c1, 8, name="bn1")
    r1 = g.node("Relu", [b1], name="relu1", out="r1")
    c2 = g.conv(r1, 8, 8, weight="float", name="conv2")
    s = g.node("Add", [c2, r1], name="add", out="s")
    g.node("Relu", [s], name="relu2", out="y")
    g.output("y", [1, 8, 8, 8])
    return g


def test_only_tensors_inside_a_fused_layer_are_left_unwatched() -> None:
    model = ir.from_proto(_chain().proto())
    plan = fp16_watch(model, infer_value_types(model), quantized={"x", "r1"})
    conv1, bn1 = model.graph.node("conv1").outputs[0].name, model.graph.node("bn1").outputs[0].name
    conv2 = model.graph.node("conv2").outputs[0].name
    # conv1 -> bn1 -> relu1 is one layer: its two inner tensors stay inside it.
    assert set(plan.stand_ins) == {conv1, bn1, "s"}
    # conv2's output is the residual Add's input; r1 has two readers; y is the network output.
    assert conv2 in plan.tensors and "r1" in plan.tensors and "y" in plan.tensors
    assert not set(plan.tensors) & set(plan.stand_ins)
    # The stand-in of an inner tensor is the hull of its layer's watched boundary.
    ranges = plan.ranges({"r1": (0.0, 5.0), "x": (-1.0, 1.0), "y": (0.0, 9.0)})
    assert ranges[conv1] == ranges[bn1] == (-1.0, 5.0)
    assert ranges["s"][1] == 9.0


def test_a_quantization_point_or_a_wide_constant_keeps_a_tensor_watched() -> None:
    g = _chain()
    proto = g.proto()
    model = ir.from_proto(proto)
    conv1 = model.graph.node("conv1").outputs[0].name
    assert conv1 in fp16_watch(model, infer_value_types(model), {conv1}).tensors
    bias = next(t for t in proto.graph.initializer if t.name == "conv1.bias")
    bias.float_data[:] = []
    bias.raw_data = np.full(8, 1e5, np.float32).tobytes()
    wide = ir.from_proto(proto)
    plan = fp16_watch(wide, infer_value_types(wide), set())
    assert conv1 in plan.tensors and not plan.stand_ins.keys() & {conv1}


def test_a_layer_whose_boundary_overflows_is_kept_fp32_whole() -> None:
    g = _chain(scale=3000.0)
    batch = {"x": np.full((1, 8, 8, 8), 50.0, np.float32)}
    result = quantize(g.proto(), [batch], trt="11", method="max", exclude=["Conv"])
    kept = set(result.fp32_nodes)
    # Every conv is float (excluded) and conv1's layer writes beyond 65504: the whole layer,
    # not only the node whose observed tensor overflows, stays FP32.
    assert {"conv1", "bn1", "relu1"} <= kept, result.fp32_nodes


def test_stand_ins_keep_nothing_fp32_where_nothing_overflows() -> None:
    builder = resnet()
    result = quantize(builder.proto(), calibration_batches(builder, 2), trt="11")
    assert result.fp32_nodes == {}
    assert result.options["float_remainder"] == "fp16"
