"""Every placement story of the rule base, built in code: the bad graph is caught, the good one not."""

from __future__ import annotations

import numpy as np

from qdqkit.examples.graph import GraphBuilder
from qdqkit.linting import lint
from qdqkit.linting.catalog import Severity
from qdqkit.trt.engine import Precision


def codes(g: GraphBuilder, **kwargs: object) -> set[str]:
    return set(lint(g.ir(), **kwargs).codes())  # type: ignore[arg-type]


# ---------------------------------------------------------------- YOLO: Concat and SPPF MaxPool
def _c2f(scales: tuple[float, float, float]) -> GraphBuilder:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 16, 16]), 0.1)
    a = g.node("Relu", [g.conv(x, 32, 32, name="cv1")])
    b = g.node("Relu", [g.conv(x, 32, 32, name="cv2")])
    cat = g.node("Concat", [g.qdq(a, scales[0]), g.qdq(b, scales[1])], name="cat", axis=1)
    g.output(g.conv(g.qdq(cat, scales[2]), 64, 32, name="cv3"))
    return g


def test_concat_with_different_scales_is_reported_with_its_requantize_layers() -> None:
    result = lint(_c2f((0.1, 0.2, 0.3)).ir())
    [finding] = result.findings("QDQ301")
    assert "cat" in finding.message and "3 different scales" in finding.message
    requantize = [layer for layer in result.engine.reformats() if "requantize for cat" in layer.name]
    assert len(requantize) == 2 and finding.cost.startswith("+2 Reformat layers")


def test_concat_with_one_shared_scale_is_clean() -> None:
    result = lint(_c2f((0.2, 0.2, 0.2)).ir())
    assert "QDQ301" not in result.codes()
    assert "cat" in result.engine.metadata["elided_nodes"]


def test_concat_mixing_int8_and_float_inputs_is_an_error() -> None:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 16, 16]))
    a = g.node("Relu", [g.conv(x, 32, 32)])
    b = g.node("Relu", [g.conv(x, 32, 32)])
    cat = g.node("Concat", [g.qdq(a, 0.2), b], name="cat", axis=1)
    g.output(g.conv(g.qdq(cat, 0.2), 64, 32))
    result = lint(g.ir())
    [finding] = result.findings("QDQ302")
    assert finding.severity == Severity.ERROR and "1 INT8 and 1 float" in finding.message
    assert result.exit_code == 1


def _sppf(after: float) -> GraphBuilder:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 16, 16]), 0.1)
    y = g.node("Relu", [g.conv(x, 32, 32, name="cv1")])
    y_q = g.qdq(y, 0.2)
    p1 = g.node("MaxPool", [y_q], name="pool1", kernel_shape=[5, 5], pads=[2, 2, 2, 2])
    p1_q = g.qdq(p1, after)
    p2 = g.node("MaxPool", [p1_q], name="pool2", kernel_shape=[5, 5], pads=[2, 2, 2, 2])
    cat = g.node("Concat", [y_q, p1_q, g.qdq(p2, after)], name="cat", axis=1)
    g.output(g.conv(g.qdq(cat, 0.2), 96, 32, name="cv2"))
    return g


def test_sppf_maxpool_scale_mismatch() -> None:
    result = lint(_sppf(0.25).ir())
    assert {f.message.split("'")[1] for f in result.findings("QDQ303")} == {"pool1"}
    assert "QDQ301" in result.codes()
    clean = lint(_sppf(0.2).ir())
    assert not {"QDQ303", "QDQ301"} & set(clean.codes())
    pools = [layer for layer in clean.engine.layers if layer.name.startswith("pool")]
    assert [layer.precision for layer in pools] == [Precision.INT8, Precision.INT8]


# ---------------------------------------------------------------- residual Adds
def _residual(*, skip: bool, conv_branch: bool) -> GraphBuilder:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 16, 16]), 0.1, name="in")
    y = g.node("Relu", [g.conv(x, 32, 32, name="conv1")])
    y = g.bn(g.conv(g.qdq(y, 0.2), 32, 32, name="conv2"), 32)
    if conv_branch:
        y = g.qdq(y, 0.3, name="branch")
    identity = g.qdq("x", 0.1, name="skip") if skip else "x"
    out = g.node("Relu", [g.node("Add", [y, identity], name="add")], name="relu")
    g.output(g.conv(g.qdq(out, 0.2, name="out"), 32, 32, name="next"))
    return g


def test_residual_add_with_float_skip_runs_the_block_fp16() -> None:
    result = lint(_residual(skip=False, conv_branch=False).ir())
    [finding] = result.findings("QDQ201")
    assert "skip input 'x' is float" in finding.message
    assert "+1 Reformat layer (out_Q)" in finding.cost and "writes FP16" in finding.cost


def test_residual_add_quantized_on_the_conv_branch_is_the_wrong_branch() -> None:
    result = lint(_residual(skip=False, conv_branch=True).ir())
    [finding] = result.findings("QDQ202")
    assert "branch_Q" in finding.nodes and "conv2" in finding.message
    assert "QDQ201" not in result.codes()


def test_residual_add_quantized_only_on_the_skip_fuses_int8() -> None:
    result = lint(_residual(skip=True, conv_branch=False).ir())
    assert not {"QDQ201", "QDQ202", "QDQ204"} & set(result.codes())
    block = next(layer for layer in result.engine.layers if "add" in layer.onnx_nodes)
    assert {"conv2", "add", "relu"} <= set(block.onnx_nodes)
    assert block.output_precision == Precision.INT8
    assert [t.precision for t in block.inputs] == [Precision.INT8, Precision.INT8]


def test_add_with_two_quantized_inputs_of_different_scales() -> None:
    result = lint(_residual(skip=True, conv_branch=True).ir())
    assert {"QDQ202", "QDQ203"} <= set(result.codes())


def test_residual_int8_but_unquantized_reader_dequantizes_the_skip() -> None:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 8, 8]), 0.1)
    y = g.bn(g.conv(x, 32, 32, name="conv"), 32)
    out = g.node("Relu", [g.node("Add", [y, g.qdq("x", 0.1, name="skip")], name="add")])
    g.output(g.node("GlobalAveragePool", [out], name="gap"))
    result = lint(g.ir())
    [finding] = result.findings("QDQ204")
    assert "skip_DQ" in finding.nodes and finding.cost.startswith("+1 Reformat layer (skip_DQ)")


# ---------------------------------------------------------------- conv epilogues
def _silu(inside: bool) -> GraphBuilder:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 8, 8]))
    y = g.bn(g.conv(x, 32, 32, name="conv"), 32, name="bn")
    if inside:
        y = g.qdq(y, 0.2, name="silu")
    s = g.node("Sigmoid", [y], name="sig")
    m = g.node("Mul", [y, s], name="mul")
    g.output(g.conv(g.qdq(m, 0.2), 32, 32, name="next"))
    return g


def test_qdq_inside_silu_breaks_the_epilogue() -> None:
    result = lint(_silu(inside=True).ir())
    [finding] = result.findings("QDQ105")
    assert {"silu_Q", "silu_DQ", "sig", "mul"} <= set(finding.nodes)
    clean = lint(_silu(inside=False).ir())
    assert "QDQ105" not in clean.codes()
    conv = next(layer for layer in clean.engine.layers if "conv" in layer.onnx_nodes)
    assert {"bn", "sig", "mul"} <= set(conv.onnx_nodes)
    assert conv.output_precision == Precision.INT8


def test_q_between_conv_and_bn_and_between_bn_and_relu() -> None:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 8, 8]))
    y = g.bn(g.qdq(g.conv(x, 32, 32, name="conv1"), 0.2, name="a"), 32, name="bn1")
    y = g.node("Relu", [y], name="relu1")
    z = g.bn(g.conv(g.qdq(y, 0.2), 32, 32, name="conv2"), 32, name="bn2")
    z = g.node("Relu", [g.qdq(z, 0.3, name="b")], name="relu2")
    g.output(z)
    result = lint(g.ir())
    assert [f.nodes[:2] for f in result.findings("QDQ103")] == [["a_Q", "a_DQ"]]
    assert [f.nodes[:2] for f in result.findings("QDQ104")] == [["b_Q", "b_DQ"]]


def test_convtranspose_followed_by_relu() -> None:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 8, 8]))
    w = g.weight((32, 32, 2, 2), axis=1)
    y = g.node("ConvTranspose", [x, w], name="up", kernel_shape=[2, 2], strides=[2, 2])
    g.output(g.node("Relu", [y], name="act"))
    [finding] = lint(g.ir()).findings("QDQ106")
    assert finding.nodes == ["up", "act"]
    plain = GraphBuilder()
    y = plain.node("ConvTranspose", [plain.qdq(plain.input("x", [1, 32, 8, 8])),
                                   plain.weight((32, 32, 2, 2), axis=1)],
                 kernel_shape=[2, 2], strides=[2, 2])
    plain.output(y)
    assert "QDQ106" not in codes(plain)


def test_72_channel_conv_forces_padding_for_int8_tensor_cores() -> None:
    def conv_model(channels: int) -> GraphBuilder:
        g = GraphBuilder()
        g.output(g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, channels, name="conv"))
        return g

    [finding] = lint(conv_model(72).ir()).findings("QDQ108")
    assert "72 output channels" in finding.message and "72 -> 96" in finding.cost
    assert "QDQ108" not in codes(conv_model(64))


def test_qdq_between_pad_and_conv() -> None:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 8, 8]))
    p = g.node("Pad", [g.node("Relu", [x]), g.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))],
             name="pad")
    g.output(g.conv(g.qdq(p, name="pad"), 32, 32, name="conv"))
    [finding] = lint(g.ir()).findings("QDQ107")
    assert finding.nodes[:3] == ["pad", "pad_Q", "pad_DQ"]


# ---------------------------------------------------------------- weighted ops
def test_half_quantized_and_unquantized_weighted_ops() -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 32, 8, 8])
    y = g.node("Relu", [g.conv(x, 32, 32, name="float_act")])
    y = g.conv(g.qdq(y), 32, 32, name="float_weight", weight="float")
    y = g.conv(g.qdq(g.node("Relu", [y])), 32, 32, name="good")
    g.output(g.conv(g.node("Relu", [y]), 32, 32, name="plain", weight="float"))
    result = lint(g.ir())
    assert sorted(f.nodes[0] for f in result.findings("QDQ101")) == ["float_act", "float_weight"]
    assert [f.nodes[0] for f in result.findings("QDQ102")] == ["plain"]


def test_per_tensor_weights_are_info() -> None:
    g = GraphBuilder()
    g.output(g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, per_channel=False, name="conv"))
    result = lint(g.ir())
    assert [f.severity for f in result.findings("QDQ403")] == [Severity.INFO]
    assert result.exit_code == 0


# ---------------------------------------------------------------- the Q/DQ nodes themselves
def test_per_channel_activation_and_nonzero_zero_point_are_errors() -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 4, 8, 8])
    s = g.const(np.full(4, 0.1, np.float32))
    z = g.const(np.zeros(4, np.int8))
    y = g.node("DequantizeLinear", [g.node("QuantizeLinear", [x, s, z], name="pcq", axis=1), s, z],
             axis=1)
    g.output(g.dequantize(g.quantize(y, 0.1, 3, name="zpq"), 0.1, 3))
    result = lint(g.ir())
    assert next(f.nodes for f in result.findings("QDQ401")) == ["pcq"]
    assert "zpq" in {f.nodes[0] for f in result.findings("QDQ402")}
    assert result.exit_code == 1


def test_several_q_on_one_tensor_and_requantize_chains() -> None:
    g = GraphBuilder()
    x = g.node("Relu", [g.input("x", [1, 32, 8, 8])], name="r")
    a = g.conv(g.qdq(x, 0.1), 32, 32)
    b = g.conv(g.qdq(x, 0.2), 32, 32)
    g.output(g.node("Add", [a, b]))
    dq = g.qdq(g.input("y", [1, 32, 8, 8]), 0.1)
    g.output(g.conv(g.dequantize(g.quantize(dq, 0.3, name="requant"), 0.3), 32, 32))
    result = lint(g.ir())
    [several] = result.findings("QDQ404")
    assert several.severity == Severity.WARNING and "2 scales" in several.message
    [chain] = result.findings("QDQ405")
    assert "requant" in chain.nodes and "requantizes" in chain.message
    requantize = [layer for layer in result.engine.layers if layer.name == "requant"]
    assert [layer.inputs[0].precision for layer in requantize] == [Precision.INT8]
    assert [f.severity for f in result.findings("QDQ406")] == [Severity.INFO]


def test_network_input_q_is_info_only() -> None:
    g = GraphBuilder()
    g.output(g.conv(g.qdq(g.input("x", [1, 32, 8, 8]), name="in"), 32, 32))
    result = lint(g.ir())
    # One tiny convolution: the input Quantize costs more than INT8 saves (QDQ509, a warning).
    assert result.codes() == ["QDQ406", "QDQ509"] and result.exit_code == 0


def test_int8_inputs_with_float_output_and_float_pool_between_int8() -> None:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 8, 8]))
    y = g.node("Relu", [g.conv(x, 32, 32, name="conv")])
    p = g.node("AveragePool", [y], name="pool", kernel_shape=[2, 2])
    t = g.node("Tanh", [g.qdq(g.conv(g.qdq(p), 32, 32), 0.2)], name="tanh")
    g.output(t)
    result = lint(g.ir())
    assert [f.nodes[0] for f in result.findings("QDQ304")] == ["pool"]
    assert [f.nodes[0] for f in result.findings("QDQ205")] == ["tanh"]


# ---------------------------------------------------------------- model level and targets
def test_custom_domain_ops_are_opaque_float_plugins() -> None:
    g = GraphBuilder()
    g.use_domain("trt.plugins", 1)
    y = g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32)
    g.output(g.node("EfficientNMS_TRT", [y], name="nms", domain="trt.plugins"))
    result = lint(g.ir())
    [finding] = result.findings("QDQ502")
    assert "opaque float plugin" in finding.message
    nms = next(layer for layer in result.engine.layers if layer.name == "nms")
    assert nms.kind.value == "Plugin" and nms.precision.is_float


def test_float_model_is_said_to_be_float() -> None:
    g = GraphBuilder()
    g.output(g.conv(g.input("x", [1, 32, 8, 8]), 32, 32, weight="float"))
    result = lint(g.ir())
    assert result.codes() == ["QDQ501"] and not result.quantized and result.exit_code == 0


def test_trt11_flags_the_fp32_remainder_and_dla_flags_qdq_and_fallback() -> None:
    g = GraphBuilder()
    y = g.node("Relu", [g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32)])
    g.output(g.node("Softmax", [g.node("Erf", [y])], axis=1))
    assert "QDQ503" in codes(g, trt="11") and "QDQ503" not in codes(g, trt="10")
    assert {"QDQ504", "QDQ505"} <= codes(g, target="dla")


def test_integer_operators_and_runtime_scales_are_errors() -> None:
    g = GraphBuilder()
    x = g.input("x", [1, 4])
    scale = g.node("Abs", [x])
    g.output(g.node("QuantizeLinear", [x, g.node("ReduceMax", [scale], keepdims=0)], name="dyn"))
    g.output(g.node("MatMulInteger", [g.input("a", [2, 2]), g.input("b", [2, 2])], name="mmi"))
    result = lint(g.ir())
    assert {"QDQ408", "QDQ506"} <= set(result.codes()) and result.exit_code == 1
