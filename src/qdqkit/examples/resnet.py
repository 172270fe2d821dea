"""ResNet-18 as pytorch-quantization exports it for TensorRT, in three Q/DQ placements.

The graph mirrors an eval-mode export with BatchNorm folded into the convolutions (opset 13, batch
32, 224x224): every quantized convolution and the classifier have their own input quantizer (a
QuantizeLinear -> DequantizeLinear pair per consumer, per tensor) and a per-output-channel weight
quantizer (float weight -> Q -> DQ, axis 0). Placements:

* ``"qat"``: only the inputs of the convolutions and of the classifier are quantized;
* ``"qat-residual"``: also the identity (skip) input of every residual Add;
* ``"qat-residual-qgap"``: also the input of the global average pool.

Nodes are named like a torch.onnx 1.x export (``Conv_12``), weights by module
(``layer2.1.conv1.weight``). Weights are random (He-initialised); activation scales are
max-calibrated from one float run in onnxruntime at batch 1, the way a max calibrator would.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from qdqkit.core.qdq_math import implicit_weight_scales
from qdqkit.examples.builder import measure_amax

if TYPE_CHECKING:
    from qdqkit.trt.engine import EngineGraph

VARIANTS = ("qat", "qat-residual", "qat-residual-qgap")
BUILDS = ("fp32", "fp16", *VARIANTS)  # the five engines of the example, as their folders name them


@dataclass
class _Graph:
    rng: np.random.Generator
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    inits: dict[str, np.ndarray] = field(default_factory=dict)
    quantizers: list[tuple[str, str]] = field(default_factory=list)  # (tensor, quantizer name)

    def node(self, op: str, inputs: list[str], name: str, **attrs: Any) -> str:
        self.nodes.append(helper.make_node(op, inputs, [f"{name}_out"], name=name, **attrs))
        return f"{name}_out"

    def quantized(self, tensor: str, quantizer: str) -> str:
        """The dequantized copy of ``tensor`` one quantizer makes (its own Q/DQ pair)."""
        self.quantizers.append((tensor, quantizer))
        return f"{quantizer}_dq"

    def weight(self, name: str, shape: tuple[int, ...]) -> str:
        fan_in = int(np.prod(shape[1:]))
        w = self.rng.normal(0.0, np.sqrt(2.0 / fan_in), size=shape).astype(np.float32)
        self.inits[f"{name}.weight"] = w
        scale = np.maximum(implicit_weight_scales(w, 0), 1e-8 / 127.0)
        self.inits[f"{name}.weight_scale"] = scale.astype(np.float32)
        self.inits[f"{name}.weight_zp"] = np.zeros(shape[0], np.int8)
        self.nodes.append(helper.make_node(
            "QuantizeLinear", [f"{name}.weight", f"{name}.weight_scale", f"{name}.weight_zp"],
            [f"{name}.weight_q"], name=f"{name}.weight_Q", axis=0))
        self.nodes.append(helper.make_node(
            "DequantizeLinear", [f"{name}.weight_q", f"{name}.weight_scale", f"{name}.weight_zp"],
            [f"{name}.weight_dq"], name=f"{name}.weight_DQ", axis=0))
        self.inits[f"{name}.bias"] = self.rng.normal(0.0, 0.05, shape[0]).astype(np.float32)
        return f"{name}.weight_dq"

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int, name: str) -> str:
        w = self.weight(name, (cout, cin, k, k))
        xq = self.quantized(x, f"{name}.input_quantizer")
        return self.node("Conv", [xq, w, f"{name}.bias"], name, kernel_shape=[k, k],
                         strides=[stride, stride], pads=[k // 2] * 4)


def _basic_block(g: _Graph, x: str, cin: int, cout: int, stride: int, name: str, variant: str) -> str:
    y = g.conv(x, cin, cout, 3, stride, f"{name}.conv1")
    y = g.node("Relu", [y], f"{name}.relu1")
    y = g.conv(y, cout, cout, 3, 1, f"{name}.conv2")
    identity = x
    if stride != 1 or cin != cout:
        identity = g.conv(x, cin, cout, 1, stride, f"{name}.downsample.0")
    if variant != "qat":
        identity = g.quantized(identity, f"{name}.residual_quantizer")
    y = g.node("Add", [y, identity], f"{name}.add")
    return g.node("Relu", [y], f"{name}.relu2")


def _float_graph(variant: str, seed: int) -> _Graph:
    if variant not in VARIANTS:
        raise ValueError(f"unknown ResNet-18 Q/DQ variant '{variant}': use one of {VARIANTS}")
    g = _Graph(np.random.default_rng(seed))
    y = g.conv("input", 3, 64, 7, 2, "conv1")
    y = g.node("Relu", [y], "relu")
    y = g.node("MaxPool", [y], "maxpool", kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    channels = 64
    for stage, width in enumerate((64, 128, 256, 512), start=1):
        for index in range(2):
            stride = 2 if stage > 1 and index == 0 else 1
            y = _basic_block(g, y, channels, width, stride, f"layer{stage}.{index}", variant)
            channels = width
    if variant == "qat-residual-qgap":
        y = g.quantized(y, "avgpool.input_quantizer")
    y = g.node("GlobalAveragePool", [y], "avgpool")
    y = g.node("Flatten", [y], "flatten", axis=1)
    w = g.weight("fc", (1000, 512))
    xq = g.quantized(y, "fc.input_quantizer")
    g.nodes.append(helper.make_node("Gemm", [xq, w, "fc.bias"], ["logits"], name="fc", transB=1))
    return g


def _model(g: _Graph, batch: int, with_qdq: bool, amax: dict[str, float]) -> onnx.ModelProto:
    nodes: list[onnx.NodeProto] = []
    inits = dict(g.inits)
    rename: dict[str, str] = {}
    for tensor, quantizer in g.quantizers:
        if with_qdq:
            inits[f"{quantizer}_scale"] = np.array(amax[tensor] / 127.0, np.float32)
            inits[f"{quantizer}_zp"] = np.array(0, np.int8)
            params = [f"{quantizer}_scale", f"{quantizer}_zp"]
            nodes.append(helper.make_node("QuantizeLinear", [tensor, *params], [f"{quantizer}_q"],
                                          name=f"{quantizer}_Q"))
            nodes.append(helper.make_node("DequantizeLinear", [f"{quantizer}_q", *params],
                                          [f"{quantizer}_dq"], name=f"{quantizer}_DQ"))
        else:
            rename[f"{quantizer}_dq"] = tensor
    for node in g.nodes:
        if not with_qdq and node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            rename[node.output[0]] = node.input[0]
            continue
        copy = onnx.NodeProto()
        copy.CopyFrom(node)
        for i, name in enumerate(copy.input):
            while name in rename:
                name = rename[name]
            copy.input[i] = name
        nodes.append(copy)
    nodes = _in_order(nodes)
    if with_qdq:
        # Name nodes the way torch.onnx (1.x) does, OpType_<position>; weights keep module names.
        for index, node in enumerate(nodes):
            node.name = f"{node.op_type}_{index}"
    graph = helper.make_graph(
        nodes, "resnet18",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [batch, 3, 224, 224])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 1000])],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    model.producer_name = "pytorch"
    return model


def _in_order(nodes: list[onnx.NodeProto]) -> list[onnx.NodeProto]:
    """Each Q/DQ pair right before its first reader, the way an exporter emits it."""
    produced = {out: node for node in nodes for out in node.output}
    ordered: list[onnx.NodeProto] = []
    placed: set[int] = set()

    def place(node: onnx.NodeProto) -> None:
        if id(node) in placed:
            return
        placed.add(id(node))
        for name in node.input:
            if name in produced:
                place(produced[name])
        ordered.append(node)

    for node in nodes:
        place(node)
    return ordered


def resnet18_qdq(variant: str = "qat", *, batch: int = 32, seed: int = 0) -> onnx.ModelProto:
    """ResNet-18 with the Q/DQ placement ``variant`` (see the module docstring)."""
    g = _float_graph(variant, seed)
    tensors = sorted({tensor for tensor, _ in g.quantizers})
    amax = measure_amax(_model(g, 1, False, {}), tensors, samples=1, seed=seed)
    return _model(g, batch, True, amax)


def resnet18_float(*, batch: int = 32, size: int = 224, seed: int = 0) -> onnx.ModelProto:
    """The same ResNet-18 without any Q/DQ (what a quantizer starts from), at ``size`` pixels."""
    model = _model(_float_graph("qat", seed), batch, False, {})
    dims = model.graph.input[0].type.tensor_type.shape.dim
    dims[2].dim_value = dims[3].dim_value = size
    return model


def resnet18_builds() -> dict[str, EngineGraph]:
    """The engines qdqkit predicts for the example's five builds (TensorRT 8.6, batch 32): the
    float model built FP32 and FP16, and each Q/DQ placement as it is."""
    import onnx_ir as ir

    from qdqkit.linting.latency import float_build
    from qdqkit.trt.engine import Precision
    from qdqkit.trt.predict import predict_engine

    model = ir.serde.deserialize_model(resnet18_qdq("qat"))
    found = {"fp32": float_build(model, "8.6", Precision.FP32),
             "fp16": float_build(model, "8.6", Precision.FP16)}
    for variant in VARIANTS:
        found[variant] = predict_engine(ir.serde.deserialize_model(resnet18_qdq(variant)))
    return found
