"""Every code of the registry has a model (or engine) that triggers it and a clean twin that must not.

The table is keyed by code and the test is parametrized over the registry, so a new rule without
an entry here fails ``test_every_code_has_a_trigger_and_a_clean_twin``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from qdqkit.engine.report import report_engine
from qdqkit.examples.graph import GraphBuilder
from qdqkit.linting import lint
from qdqkit.rules import all_rules
from qdqkit.trt.engine import EngineGraph, EngineLayer, EngineTensor, LayerKind, Precision


@dataclass
class Model:
    """A graph to lint, with the lint options that matter for the rule."""

    graph: GraphBuilder
    options: dict[str, Any] = field(default_factory=dict)

    def codes(self) -> set[str]:
        return set(lint(self.graph.ir(), **self.options).codes())


@dataclass
class Engine:
    """An engine to report on."""

    graph: EngineGraph

    def codes(self) -> set[str]:
        return {finding.code for finding in report_engine(self.graph).findings}


@dataclass
class ResNet:
    """ResNet-18 in one of the Q/DQ placements of ``qdqkit.examples.resnet`` (batch 32)."""

    variant: str

    def codes(self) -> set[str]:
        import onnx_ir as ir

        from qdqkit.examples.resnet import resnet18_qdq

        return set(lint(ir.serde.deserialize_model(resnet18_qdq(self.variant))).codes())


Subject = Any  # Model, Engine, ResNet or Proto: anything with codes()


# ---------------------------------------------------------------- weighted ops
def _weighted(*, activation: bool = True, weight: bool = True, per_channel: bool = True,
              stored_int8: bool = False) -> Model:
    g = GraphBuilder()
    x = g.input("x", [1, 32, 8, 8])
    style = ("dq-only" if stored_int8 else "q-dq") if weight else "float"
    y = g.conv(g.qdq(x) if activation else x, 32, 32, weight=style,
               per_channel=per_channel, name="conv")
    g.output(g.conv(g.qdq(g.node("Relu", [y])), 32, 32, name="next"))
    return Model(g)


def _bias(style: str) -> Model:
    """A conv whose bias is float, Q/DQ'd (int8) or an int32 initializer behind a DQ."""
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 8, 8, 8]), name="in")
    bias = g.rng.normal(0, 0.1, 8).astype(np.float32)
    if style == "float":
        b = g.const(bias, "conv.bias")
    elif style == "q-dq":
        b = g.qdq(g.const(bias, "conv.bias"), float(np.abs(bias).max() / 127), name="bias")
    else:
        scale = np.full(8, 0.05 * 0.01, np.float32)  # input scale x weight scale, as ORT writes
        b = g.dequantize(g.const(np.rint(bias / scale).astype(np.int32), "conv.bias_int32"),
                         scale, np.zeros(8, np.int32), zp_dtype=np.int32, axis=0, name="bias_DQ")
    y = g.node("Conv", [x, g.weight((8, 8, 3, 3), name="conv.weight"), b], name="conv",
               kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    g.output(g.conv(g.qdq(g.node("Relu", [y])), 8, 8, name="next"))
    return Model(g)


def _epilogue(cut: str) -> Model:
    g = GraphBuilder()
    y = g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="conv")
    y = g.qdq(y, 0.2, name="a") if cut == "before_bn" else y
    y = g.bn(y, 32, name="bn")
    y = g.qdq(y, 0.2, name="b") if cut == "before_relu" else y
    g.output(g.conv(g.qdq(g.node("Relu", [y], name="relu"), 0.3), 32, 32, name="next"))
    return Model(g)


def _silu(inside: bool) -> Model:
    g = GraphBuilder()
    y = g.bn(g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="conv"), 32, name="bn")
    y = g.qdq(y, 0.2, name="silu") if inside else y
    m = g.node("Mul", [y, g.node("Sigmoid", [y], name="sig")], name="mul")
    g.output(g.conv(g.qdq(m, 0.2), 32, 32, name="next"))
    return Model(g)


def _hardswish_math(inside: bool) -> Model:
    """conv -> Q/DQ -> x * Clip(x + 3, 0, 6) / 6 -> Q/DQ -> conv; ``inside`` adds a Q/DQ on the
    Clip's output, between two ops of the one PointWise layer."""
    g = GraphBuilder()
    y = g.qdq(g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="conv"), 0.2, name="y")
    three, zero, six = (g.const(np.array(v, np.float32)) for v in (3.0, 0.0, 6.0))
    gate = g.node("Clip", [g.node("Add", [y, three], name="add3"), zero, six], name="clip")
    gate = g.qdq(gate, 6 / 127, name="gate") if inside else gate
    out = g.node("Div", [g.node("Mul", [y, gate], name="mul"), six], name="div")
    g.output(g.conv(g.qdq(out, 0.2), 32, 32, name="next"))
    return Model(g)


def _deconv(activation: bool) -> Model:
    g = GraphBuilder()
    w = g.weight((32, 32, 2, 2), axis=1)
    y = g.node("ConvTranspose", [g.qdq(g.input("x", [1, 32, 8, 8])), w], name="up",
             kernel_shape=[2, 2], strides=[2, 2])
    g.output(g.node("Relu", [y], name="act") if activation else y)
    return Model(g)


def _pad(qdq_after_pad: bool) -> Model:
    g = GraphBuilder()
    x = g.node("Relu", [g.qdq(g.input("x", [1, 32, 8, 8]))])
    pads = g.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))
    if qdq_after_pad:
        y = g.qdq(g.node("Pad", [x, pads], name="pad"), name="pad")
    else:
        y = g.node("Pad", [g.qdq(x, name="pad"), pads], name="pad")
    g.output(g.conv(y, 32, 32, name="conv"))
    return Model(g)


def _channels(count: int) -> Model:
    g = GraphBuilder()
    g.output(g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, count, name="conv"))
    return Model(g)


# ---------------------------------------------------------------- residual Adds
def _residual(*, skip: bool, conv_branch: bool, branch_scale: float = 0.3) -> Model:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 16, 16]), 0.1, name="in")
    y = g.node("Relu", [g.conv(x, 32, 32, name="conv1")])
    y = g.bn(g.conv(g.qdq(y, 0.2), 32, 32, name="conv2"), 32)
    if conv_branch:
        y = g.qdq(y, branch_scale, name="branch")
    identity = g.qdq("x", 0.1, name="skip") if skip else "x"
    out = g.node("Relu", [g.node("Add", [y, identity], name="add")], name="relu")
    g.output(g.conv(g.qdq(out, 0.2, name="out"), 32, 32, name="next"))
    return Model(g)


def _residual_reader(quantized: bool) -> Model:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 8, 8]), 0.1)
    y = g.bn(g.conv(x, 32, 32, name="conv"), 32)
    out = g.node("Relu", [g.node("Add", [y, g.qdq("x", 0.1, name="skip")], name="add")])
    g.output(g.conv(g.qdq(out, 0.2), 32, 32) if quantized else g.node("GlobalAveragePool", [out]))
    return Model(g)


def _tanh(output_quantized: bool) -> Model:
    g = GraphBuilder()
    y = g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="conv")
    t = g.node("Tanh", [g.qdq(y, 0.2)], name="tanh")
    g.output(g.conv(g.qdq(t, 0.3), 32, 32) if output_quantized else t)
    return Model(g)


# ---------------------------------------------------------------- Concat and pooling
def _concat(scales: tuple[float, float, float], *, mixed: bool = False) -> Model:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 16, 16]), 0.1)
    a = g.node("Relu", [g.conv(x, 32, 32, name="cv1")])
    b = g.node("Relu", [g.conv(x, 32, 32, name="cv2")])
    second = b if mixed else g.qdq(b, scales[1])
    cat = g.node("Concat", [g.qdq(a, scales[0]), second], name="cat", axis=1)
    g.output(g.conv(g.qdq(cat, scales[2]), 64, 32, name="cv3"))
    return Model(g)


def _maxpool(after: float) -> Model:
    g = GraphBuilder()
    y = g.node("Relu", [g.conv(g.qdq(g.input("x", [1, 32, 16, 16]), 0.1), 32, 32, name="cv1")])
    p = g.node("MaxPool", [g.qdq(y, 0.2)], name="pool", kernel_shape=[2, 2])
    g.output(g.conv(g.qdq(p, after), 32, 32, name="cv2"))
    return Model(g)


def _avgpool(quantized: bool) -> Model:
    g = GraphBuilder()
    y = g.node("Relu", [g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="conv")])
    y = g.qdq(y, 0.2) if quantized else y
    p = g.node("AveragePool", [y], name="pool", kernel_shape=[2, 2])
    g.output(g.conv(g.qdq(p, 0.2), 32, 32, name="next"))
    return Model(g)


# ---------------------------------------------------------------- the Q/DQ nodes themselves
def _activation_scales(per_channel: bool) -> Model:
    g = GraphBuilder()
    x = g.input("x", [1, 4, 8, 8])
    count = 4 if per_channel else 1
    s = g.const(np.full(count, 0.1, np.float32) if per_channel else np.array(0.1, np.float32))
    z = g.const(np.zeros(count, np.int8) if per_channel else np.array(0, np.int8))
    axis = {"axis": 1} if per_channel else {}
    y = g.node("QuantizeLinear", [g.node("Relu", [x]), s, z], name="pcq", **axis)
    g.output(g.node("DequantizeLinear", [y, s, z], **axis))
    return Model(g)


def _zero_point(zp: int, dtype: type = np.int8) -> Model:
    g = GraphBuilder()
    q = g.quantize(g.node("Relu", [g.input("x", [1, 4])]), 0.1, zp, name="zpq", zp_dtype=dtype)
    g.output(g.dequantize(q, 0.1, zp, zp_dtype=dtype))
    return Model(g)


def _quantizers_on_one_tensor(count: int) -> Model:
    g = GraphBuilder()
    x = g.node("Relu", [g.input("x", [1, 32, 8, 8])], name="r")
    outs = [g.conv(g.qdq(x, 0.1 * (i + 1)), 32, 32) for i in range(count)]
    g.output(g.node("Add", outs) if count == 2 else outs[0])
    return Model(g)


def _requantize(chain: bool) -> Model:
    g = GraphBuilder()
    y = g.qdq(g.node("Relu", [g.input("y", [1, 32, 8, 8])]), 0.1)
    y = g.dequantize(g.quantize(y, 0.3, name="requant"), 0.3) if chain else y
    g.output(g.conv(y, 32, 32))
    return Model(g)


def _input_q(on_input: bool) -> Model:
    g = GraphBuilder()
    x = g.input("x", [1, 32, 8, 8])
    x = g.qdq(x, name="in") if on_input else g.conv(x, 32, 32, weight="float")
    g.output(g.conv(x if on_input else g.qdq(g.node("Relu", [x])), 32, 32))
    return Model(g)


def _standalone_q(fused: bool) -> Model:
    g = GraphBuilder()
    x = g.qdq(g.input("x", [1, 32, 8, 8]))
    # Depthwise: its float math is a layer of its own (a GPU conv would take it as epilogue).
    y = g.conv(x, 32, 32, group=32, name="conv")
    y = g.node("Relu", [y], name="relu") if fused else g.node("Tanh", [g.node("Erf", [y])])
    y = g.qdq(y, 0.2, name="mid")
    if not fused:  # read in float too: not the Q 'next' needs after float math, a stray one
        g.output(g.node("Sigmoid", [y], name="float_reader"))
    g.output(g.conv(y, 32, 32, name="next"))
    return Model(g)


def _scale(runtime: bool) -> Model:
    g = GraphBuilder()
    x = g.input("x", [1, 4])
    scale = g.node("ReduceMax", [g.node("Abs", [x])], keepdims=0) if runtime else g.const(
        np.array(0.1, np.float32))
    g.output(g.node("DequantizeLinear", [g.node("QuantizeLinear", [x, scale], name="q"), scale]))
    return Model(g)


@dataclass
class Proto:
    """A hand-made ModelProto to lint (types GraphBuilder does not spell: FP8, INT4)."""

    model: Any
    options: dict[str, Any] = field(default_factory=dict)

    def lint(self) -> Any:
        import onnx_ir as ir

        return lint(ir.from_proto(self.model), **self.options)

    def codes(self) -> set[str]:
        return set(self.lint().codes())


def _typed_qdq(kind: str, **options: Any) -> Proto:
    """A conv with activation and weight Q/DQ in ``kind`` ("int8", "fp8", "int16"), or
    (``kind="int4"``) a MatMul whose constant weight is blocked INT4 behind a DQ and whose
    activation is float: weight-only quantization; ``"int4-activation"`` quantizes the activation
    to INT4 instead."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes: list[Any] = []
    inits: list[Any] = []
    if kind.startswith("int4"):
        w = np.clip(np.rint(rng.normal(0, 3, (64, 32))), -8, 7).astype(np.int8)
        inits += [helper.make_tensor("wq", TensorProto.INT4, [64, 32], w.reshape(-1).tolist()),
                  numpy_helper.from_array(np.full((2, 32), 0.02, np.float32), "ws"),
                  numpy_helper.from_array(np.float32(0.05), "s"),
                  helper.make_tensor("zp4", TensorProto.INT4, [], [0])]
        x = "x"
        if kind == "int4-activation":
            nodes += [helper.make_node("QuantizeLinear", ["x", "s", "zp4"], ["xq"], name="x_Q"),
                      helper.make_node("DequantizeLinear", ["xq", "s", "zp4"], ["xd"],
                                       name="x_DQ")]
            x = "xd"
        nodes += [helper.make_node("DequantizeLinear", ["wq", "ws"], ["wd"], name="w_DQ", axis=0,
                                   block_size=32),
                  helper.make_node("MatMul", [x, "wd"], ["y"], name="mm")]
        shapes, opset = ([1, 64], [1, 32]), 21
    else:
        zp_type = {"int8": TensorProto.INT8, "fp8": TensorProto.FLOAT8E4M3FN,
                   "int16": TensorProto.INT16}[kind]
        w = rng.normal(0, 0.1, (32, 32, 3, 3)).astype(np.float32)
        inits += [numpy_helper.from_array(np.float32(0.05), "s"),
                  numpy_helper.from_array(np.float32(0.01), "ws"), numpy_helper.from_array(w, "w"),
                  helper.make_tensor("zp", zp_type, [], [0])]
        nodes += [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["xq"], name="x_Q"),
                  helper.make_node("DequantizeLinear", ["xq", "s", "zp"], ["xd"], name="x_DQ"),
                  helper.make_node("QuantizeLinear", ["w", "ws", "zp"], ["wq"], name="w_Q"),
                  helper.make_node("DequantizeLinear", ["wq", "ws", "zp"], ["wd"], name="w_DQ"),
                  helper.make_node("Conv", ["xd", "wd"], ["y"], name="conv", pads=[1] * 4)]
        shapes, opset = ([1, 32, 8, 8], [1, 32, 8, 8]), 19
    graph = helper.make_graph(
        nodes, kind, [helper.make_tensor_value_info("x", TensorProto.FLOAT, shapes[0])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shapes[1])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model)
    return Proto(model, options)


# ---------------------------------------------------------------- model level and targets
def _float_model(quantized: bool) -> Model:
    g = GraphBuilder()
    x = g.input("x", [1, 32, 8, 8])
    g.output(g.conv(g.qdq(x) if quantized else x, 32, 32, weight="q-dq" if quantized else "float"))
    return Model(g)


def _plugin(custom: bool) -> Model:
    g = GraphBuilder()
    g.use_domain("trt.plugins", 1)
    y = g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32)
    domain = "trt.plugins" if custom else ""
    g.output(g.node("EfficientNMS_TRT" if custom else "Relu", [y], name="nms", domain=domain))
    return Model(g)


def _float_tail(**options: Any) -> Model:
    g = GraphBuilder()
    y = g.node("Relu", [g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32)])
    g.output(g.node("Softmax", [g.node("Erf", [y])], axis=1))
    return Model(g, options)


def _dla_friendly() -> Model:
    g = GraphBuilder()
    y = g.node("Relu", [g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32)])
    g.output(y)
    return Model(g, {"target": "dla"})


def _dla_dynamic_input() -> Model:
    g = GraphBuilder()
    y = g.node("Relu", [g.conv(g.qdq(g.input("x", ["N", 32, 8, 8])), 32, 32)])
    g.output(y)
    return Model(g, {"target": "dla"})


def _integer_op(integer: bool) -> Model:
    g = GraphBuilder()
    a, b = g.input("a", [2, 2]), g.input("b", [2, 2])
    g.output(g.node("MatMulInteger" if integer else "MatMul", [a, b], name="mm"))
    return Model(g)


# ---------------------------------------------------------------- engine level
def _t(name: str, precision: Precision = Precision.INT8) -> EngineTensor:
    return EngineTensor(name, precision)


def _layer(name: str, kind: LayerKind, ins: list[EngineTensor], outs: list[EngineTensor],
           origin: str | None = None) -> EngineLayer:
    return EngineLayer(name=name, kind=kind, inputs=ins, outputs=outs, origin=origin,
                       latency_ms=0.1)


def _engine(*, tail: Precision = Precision.INT8, skip: Precision = Precision.INT8,
            quantize_input: bool = False, layout_beside_qdq: bool = False,
            qdq_inside: bool = False, timed: bool = True, names_only: bool = False,
            unmatched: bool = False) -> Engine:
    F32 = Precision.FP32
    layers = []
    first = "x"
    if quantize_input:
        layers.append(_layer("x_Q", LayerKind.REFORMAT, [_t("x", F32)], [_t("xq")], "QDQ"))
        first = "xq"
    layers.append(_layer("conv1", LayerKind.CONVOLUTION, [_t(first)], [_t("a")]))
    layers.append(_layer("conv2 + add", LayerKind.CONVOLUTION, [_t("a"), _t(first, skip)],
                         [_t("b")]))
    current = "b"
    if qdq_inside:
        layers.append(_layer("b_DQ", LayerKind.REFORMAT, [_t("b")], [_t("bf", F32)], "QDQ"))
        current = "bf"
        if layout_beside_qdq:
            layers.append(_layer("Reformatting CopyNode bf", LayerKind.REFORMAT,
                                 [_t("bf", F32)], [_t("bf2", F32)], "layout"))
            current = "bf2"
    layers.append(_layer("tail", LayerKind.POOLING, [_t(current, tail)], [_t("y", tail)]))
    if not timed:
        for layer in layers:
            layer.latency_ms = None
    metadata: dict[str, Any] = {"names_only": names_only}
    if unmatched:
        metadata["unmatched_profile_records"] = ["ghost layer"]
    return Engine(EngineGraph(layers, inputs=[_t("x", F32 if quantize_input else Precision.INT8)],
                              outputs=[_t("y", tail)], source="constructed", metadata=metadata))


F16 = Precision.FP16
TRIGGER_AND_CLEAN: dict[str, tuple[Callable[[], Subject], Callable[[], Subject]]] = {
    "QDQ101": (lambda: _weighted(activation=False), lambda: _weighted()),
    "QDQ102": (lambda: _weighted(activation=False, weight=False), lambda: _weighted()),
    "QDQ103": (lambda: _epilogue("before_bn"), lambda: _epilogue("none")),
    "QDQ104": (lambda: _epilogue("before_relu"), lambda: _epilogue("none")),
    "QDQ105": (lambda: _silu(True), lambda: _silu(False)),
    "QDQ106": (lambda: _deconv(True), lambda: _deconv(False)),
    "QDQ107": (lambda: _pad(True), lambda: _pad(False)),
    "QDQ108": (lambda: _channels(72), lambda: _channels(64)),
    "QDQ201": (lambda: _residual(skip=False, conv_branch=False),
               lambda: _residual(skip=True, conv_branch=False)),
    "QDQ202": (lambda: _residual(skip=False, conv_branch=True),
               lambda: _residual(skip=True, conv_branch=False)),
    "QDQ203": (lambda: _residual(skip=True, conv_branch=True),
               lambda: _residual(skip=True, conv_branch=True, branch_scale=0.1)),
    "QDQ204": (lambda: _residual_reader(False), lambda: _residual_reader(True)),
    "QDQ205": (lambda: _tanh(False), lambda: _tanh(True)),
    "QDQ206": (lambda: _hardswish_math(True), lambda: _hardswish_math(False)),
    "QDQ301": (lambda: _concat((0.1, 0.2, 0.3)), lambda: _concat((0.2, 0.2, 0.2))),
    "QDQ302": (lambda: _concat((0.2, 0.2, 0.2), mixed=True), lambda: _concat((0.2, 0.2, 0.2))),
    "QDQ303": (lambda: _maxpool(0.25), lambda: _maxpool(0.2)),
    "QDQ304": (lambda: _avgpool(False), lambda: _avgpool(True)),
    "QDQ401": (lambda: _activation_scales(True), lambda: _activation_scales(False)),
    "QDQ402": (lambda: _zero_point(3), lambda: _zero_point(0)),
    "QDQ403": (lambda: _weighted(per_channel=False),
               lambda: _weighted(per_channel=False, stored_int8=True)),
    "QDQ413": (lambda: _weighted(per_channel=False, stored_int8=True),
               lambda: _weighted(stored_int8=True)),
    "QDQ404": (lambda: _quantizers_on_one_tensor(2), lambda: _quantizers_on_one_tensor(1)),
    "QDQ405": (lambda: _requantize(True), lambda: _requantize(False)),
    "QDQ406": (lambda: _input_q(True), lambda: _input_q(False)),
    "QDQ407": (lambda: _standalone_q(False), lambda: _standalone_q(True)),
    "QDQ408": (lambda: _scale(True), lambda: _scale(False)),
    "QDQ409": (lambda: _bias("q-dq"), lambda: _bias("float")),
    "QDQ410": (lambda: _typed_qdq("fp8", trt="8.6"), lambda: _typed_qdq("fp8", trt="10")),
    "QDQ411": (lambda: _typed_qdq("fp8", trt="10"), lambda: _typed_qdq("int8", trt="10")),
    "QDQ412": (lambda: _zero_point(0, np.uint8), lambda: _zero_point(0)),
    "QDQ501": (lambda: _float_model(False), lambda: _float_model(True)),
    "QDQ509": (lambda: ResNet("qat"), lambda: ResNet("qat-residual")),
    "QDQ502": (lambda: _plugin(True), lambda: _plugin(False)),
    "QDQ503": (lambda: _float_tail(trt="11"), lambda: _float_tail(trt="10")),
    "QDQ504": (lambda: _float_tail(target="dla"), lambda: _float_tail()),
    "QDQ505": (lambda: _float_tail(target="dla"), _dla_friendly),
    "QDQ506": (lambda: _integer_op(True), lambda: _integer_op(False)),
    "QDQ510": (_dla_dynamic_input, _dla_friendly),
    "QDQ601": (lambda: _engine(names_only=True), lambda: _engine()),
    "QDQ602": (lambda: _engine(unmatched=True), lambda: _engine()),
    "QDQ603": (lambda: _engine(tail=Precision.FP32), lambda: _engine(tail=F16)),
    "QDQ604": (lambda: _engine(tail=F16), lambda: _engine()),
    "QDQ605": (lambda: _engine(skip=F16), lambda: _engine()),
    "QDQ606": (lambda: _engine(qdq_inside=True), lambda: _engine()),
    "QDQ607": (lambda: _engine(qdq_inside=True, layout_beside_qdq=True),
               lambda: _engine(qdq_inside=True)),
    "QDQ608": (lambda: _engine(quantize_input=True), lambda: _engine(qdq_inside=True)),
    "QDQ609": (lambda: _engine(timed=False), lambda: _engine()),
}

CODES = [rule.code for rule in all_rules()]


def test_every_code_has_a_trigger_and_a_clean_twin() -> None:
    assert sorted(TRIGGER_AND_CLEAN) == CODES


@pytest.mark.parametrize("code", CODES)
def test_the_trigger_fires_and_the_clean_twin_does_not(code: str) -> None:
    if code not in TRIGGER_AND_CLEAN:
        pytest.fail(f"{code} has no trigger and clean twin in TRIGGER_AND_CLEAN")
    trigger, clean = TRIGGER_AND_CLEAN[code]
    assert code in trigger().codes()
    assert code not in clean().codes()


def test_an_int32_bias_is_named_as_such() -> None:
    findings = lint(_bias("int32").graph.ir()).findings("QDQ409")
    assert len(findings) == 1 and "int32" in findings[0].message
    assert findings[0].nodes == ["conv", "bias_DQ"] and findings[0].tensors


@pytest.mark.parametrize("pool,expected", [(True, set()), (False, {"QDQ104"})])
def test_a_batchnorm_after_a_conv_act_pool_chain_is_not_its_epilogue(
        pool: bool, expected: set[str]) -> None:
    # DenseNet's pre-activation: conv -> BN -> ReLU -> MaxPool, then BN -> ReLU -> conv. The pool
    # ends the first chain (ConvActPool), so the Q/DQ before the second BN splits nothing.
    g = GraphBuilder()
    y = g.bn(g.conv(g.qdq(g.input("x", [1, 32, 16, 16])), 32, 32, name="conv"), 32, name="bn")
    y = g.node("Relu", [y], name="relu")
    if pool:
        y = g.node("MaxPool", [y], name="pool", kernel_shape=[2, 2], strides=[2, 2])
    y = g.bn(g.qdq(y, 0.2, name="b"), 32, name="bn2")
    g.output(g.conv(g.qdq(g.node("Relu", [y], name="relu2"), 0.3), 32, 32, name="next"))
    assert Model(g).codes() & {"QDQ103", "QDQ104"} == expected


@pytest.mark.parametrize("group,expected", [(32, set()), (1, {"QDQ104"})])
def test_a_hardswish_a_depthwise_conv_cannot_take_is_not_its_epilogue(
        group: int, expected: set[str]) -> None:
    # x * HardSigmoid(x) reads the conv's output twice: a depthwise conv's layer stops at such a
    # shared tensor (C7), so the HardSwish is a PointWise layer of its own and the Q/DQ on its
    # input belongs there; a full conv takes the whole pointwise DAG, and the Q/DQ splits it.
    g = GraphBuilder()
    y = g.bn(g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, group=group, name="conv"), 32,
             name="bn")
    y = g.qdq(y, 0.2, name="b")
    y = g.node("Mul", [y, g.node("HardSigmoid", [y], name="hsig")], name="hswish")
    g.output(g.conv(g.qdq(y, 0.3), 32, 32, name="next"))
    assert Model(g).codes() & {"QDQ103", "QDQ104"} == expected


def _bias_outside(cut: str, copy: bool) -> GraphBuilder:
    """paddle2onnx's conv: Conv without bias -> Add(bias) -> [Identity] -> Relu, with a Q/DQ on
    the conv's output (``cut="conv"``), on the Add's (``cut="bias"``) or nowhere inside."""
    g = GraphBuilder()
    y = g.conv(g.qdq(g.input("x", [1, 32, 8, 8])), 32, 32, name="conv", bias=False)
    y = g.qdq(y, 0.2, name="conv_out") if cut == "conv" else y
    bias = g.qdq(g.const(np.linspace(-0.5, 0.5, 32, dtype=np.float32).reshape(1, 32, 1, 1)),
                 0.5 / 127, name="bias")
    y = g.node("Add", [y, bias], name="add")
    y = g.qdq(y, 0.2, name="add_out") if cut == "bias" else y
    y = g.node("Identity", [y], name="copy") if copy else y
    g.output(g.conv(g.qdq(g.node("Relu", [y], name="relu"), 0.3), 32, 32, name="next"))
    return g


@pytest.mark.parametrize("copy", [False, True])
@pytest.mark.parametrize("cut,expected", [("conv", {"QDQ103"}), ("bias", {"QDQ104"}),
                                          ("none", set())])
def test_a_q_before_a_bias_add_splits_the_conv_past_copies(
        cut: str, expected: set[str], copy: bool) -> None:
    # The bias Add (constant operand, itself behind Q/DQ as onnxruntime leaves it) fuses into the
    # conv's layer as BN does, and an Identity between changes nothing (fusion passes it).
    assert Model(_bias_outside(cut, copy)).codes() & {"QDQ103", "QDQ104"} == expected


def test_a_q_inside_a_pointwise_chain_is_found_past_an_identity() -> None:
    # Sigmoid's Q/DQ, then an Identity, then the Mul of the two: one PointWise layer either way.
    g = GraphBuilder()
    y = g.qdq(g.node("Tanh", [g.qdq(g.input("x", [1, 32, 8, 8]))], name="tanh"), 0.01, name="t")
    gate = g.node("Identity", [g.qdq(g.node("Sigmoid", [y], name="sig"), 1 / 127, name="s")],
                  name="copy")
    g.output(g.conv(g.qdq(g.node("Mul", [y, gate], name="mul"), 0.2), 32, 32, name="next"))
    assert "QDQ206" in Model(g).codes()


def test_fix_fuses_a_paddle_conv_bias_chain_and_keeps_its_values(tmp_path: Path) -> None:
    from qdqkit.examples.graph import run_model
    from qdqkit.fixing import fix

    g = _bias_outside("conv", True)
    path = g.save(tmp_path / "paddle.onnx")
    result = fix(path, output=tmp_path / "fixed.onnx")
    assert "QDQ103" in {action.code for action in result.actions}
    after = lint(str(tmp_path / "fixed.onnx"))
    assert not {"QDQ103", "QDQ104", "QDQ206"} & set(after.codes())
    assert any({"conv", "add", "copy", "relu"} <= set(layer.onnx_nodes)
               for layer in after.engine.layers)
    # The repaired model computes what the same chain without the inner Q/DQ computes (the same
    # weights: the builder draws them in the same order), by onnxruntime.
    x = np.random.default_rng(0).normal(0, 1, (1, 32, 8, 8)).astype(np.float32)
    want = run_model(_bias_outside("none", True).save(tmp_path / "clean.onnx"), {"x": x})[0]
    np.testing.assert_allclose(run_model(tmp_path / "fixed.onnx", {"x": x})[0], want,
                               rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind,options,code", [
    ("int4", {"trt": "8.6"}, "QDQ410"), ("int4", {"trt": "10", "target": "dla"}, "QDQ410"),
    ("int4-activation", {"trt": "10"}, "QDQ410"), ("int16", {"trt": "11"}, "QDQ410"),
    ("fp8", {"trt": "11"}, "QDQ411"), ("int4", {"trt": "10"}, "QDQ411")])
def test_other_qdq_types_are_named_by_what_tensorrt_builds(
        kind: str, options: dict[str, Any], code: str) -> None:
    result = _typed_qdq(kind, **options).lint()
    codes = set(result.codes())
    assert code in codes
    if kind == "int4-activation":  # the activation cannot be INT4; the weight can
        assert {n for f in result.findings("QDQ410") for n in f.nodes} == {"x_Q", "x_DQ"}
        assert [f.nodes for f in result.findings("QDQ411")] == [["w_DQ"]]
    # Nothing claims they are INT8 gone wrong: not half-quantized, not INT8 Reformats, and no
    # INT8-against-FP16 timing of layers predicted in float.
    assert not codes & {"QDQ101", "QDQ407", "QDQ509"}


def test_a_weight_only_int4_gemm_is_named_as_such() -> None:
    (finding,) = _typed_qdq("int4", trt="10").lint().findings("QDQ411")
    assert "weight-only" in finding.message and "'mm'" in finding.message
    assert finding.nodes == ["w_DQ"] and finding.tensors == ["wq"]


def test_an_int32_batchnorm_bias_is_a_quantized_bias_and_fix_floats_it() -> None:
    # onnxruntime's quantizer writes the bias of a BatchNormalization it leaves unfolded as an
    # int32 DQ too: QDQ409 (fixable), not QDQ410's build error.
    from qdqkit.fixing import fix

    g = GraphBuilder()
    y = g.conv(g.qdq(g.input("x", [1, 8, 8, 8]), name="in"), 8, 8, name="conv")
    scale = np.full(8, 1e-4, np.float32)
    bias = g.dequantize(g.const(np.arange(8, dtype=np.int32), "bn.bias_int32"), scale,
                        np.zeros(8, np.int32), zp_dtype=np.int32, axis=0, name="bias_DQ")
    ones, zeros = g.const(np.ones(8, np.float32)), g.const(np.zeros(8, np.float32))
    y = g.node("BatchNormalization", [y, ones, bias, zeros, ones], name="bn")
    g.output(g.conv(g.qdq(g.node("Relu", [y]), 0.1), 8, 8, name="next"))
    codes = Model(g).codes()
    assert "QDQ409" in codes and "QDQ410" not in codes
    fixed = fix(g.ir()).model
    assert fixed is not None
    assert not [n for n in fixed.graph if n.op_type == "DequantizeLinear"
                and n.inputs[0] is not None and n.inputs[0].dtype == ir.DataType.INT32]
    assert not set(lint(fixed).codes()) & {"QDQ409", "QDQ410"}


def test_an_int32_bias_shared_through_identities_goes_float_for_every_reader() -> None:
    # A PyTorch export shares one initializer among equal biases through Identity nodes, and
    # onnxruntime dequantizes the conv's bias in place: the Identities then read an int32 DQ,
    # which TensorRT cannot build (QDQ410). The bias goes float for them too, same values.
    from qdqkit.examples.graph import run_model
    from qdqkit.fixing import fix

    g = GraphBuilder(seed=0)
    x = g.input("x", [1, 8, 8, 8])
    weight = g.qdq(g.const(g.rng.normal(0, 0.1, (8, 8, 3, 3)).astype(np.float32)), 0.001,
                   name="w")
    bias = g.dequantize(g.const(np.arange(8, dtype=np.int32), "conv.bias_int32"),
                        np.full(8, 1e-3, np.float32), np.zeros(8, np.int32),
                        zp_dtype=np.int32, axis=0, name="bias_DQ")
    y = g.node("Conv", [g.qdq(x, name="in"), weight, bias], pads=[1, 1, 1, 1], name="conv")
    shared = g.node("Identity", [bias], name="shared_bias")
    g.output(g.node("Add", [g.node("ReduceMean", [y], axes=[2, 3], keepdims=0), g.node(
        "Unsqueeze", [shared, g.const(np.array([0], np.int64))])], name="out"))
    assert "QDQ410" in Model(g).codes()
    fixed = fix(g.ir(), rules=["QDQ409"]).model  # the bias alone: the values stay exact
    assert fixed is not None and "QDQ410" not in lint(fixed).codes()
    assert not [n for n in fixed.graph if n.op_type == "DequantizeLinear"
                and n.inputs[0] is not None and n.inputs[0].dtype == ir.DataType.INT32]
    feeds = {"x": g.rng.normal(size=(1, 8, 8, 8)).astype(np.float32)}
    np.testing.assert_allclose(run_model(fixed, feeds)[0], run_model(g.ir(), feeds)[0],
                               rtol=1e-5, atol=1e-6)


def test_onnxruntime_contrib_qlinear_ops_are_integer_operators() -> None:
    # QOperator output of onnxruntime's quantizer: QLinearConv (standard) beside contrib ops
    # (com.microsoft QLinearLeakyRelu, QLinearGlobalAveragePool) TensorRT's parser has no
    # importer for either; every one is named, not the standard ones only.
    g = GraphBuilder()
    g.use_domain("com.microsoft", 1)
    x = g.input("x", [1, 4, 8, 8])
    q = g.qdq(x, 0.05, name="in")
    scale, zero = g.const(np.array(0.05, np.float32)), g.const(np.array(0, np.int8))
    quantized = g.node("QuantizeLinear", [q, scale, zero], name="q_act")
    g.nodes.append(onnx.helper.make_node(
        "QLinearLeakyRelu", [quantized, scale, zero, scale, zero], ["leaky"], name="leaky",
        domain="com.microsoft", alpha=0.1))
    g.nodes.append(onnx.helper.make_node(
        "QLinearGlobalAveragePool", ["leaky", scale, zero, scale, zero], ["pooled"],
        name="pool", domain="com.microsoft", channels_last=0))
    g.output(g.node("DequantizeLinear", ["pooled", scale, zero], name="dq_out"))
    named = {f.nodes[0] for f in lint(g.ir()).findings("QDQ506")}
    assert named == {"leaky", "pool"}
