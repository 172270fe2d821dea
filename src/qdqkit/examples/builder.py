"""Build small, realistic Q/DQ models in code (for the demo, the tests and the benchmarks).

``NetBuilder`` writes a float network with onnx.helper and marks where activations are quantized;
``build_qdq`` then runs the float model once in onnxruntime on seeded inputs to measure each marked
tensor's max |x| (as a max calibrator would) and inserts Q/DQ in the chosen producer's style:

* ``"trt"``: pytorch-quantization / TensorRT QAT style: float weight -> Q -> DQ per output channel,
  activation Q -> DQ per tensor, int8 with explicit zero zero points, scales as initializers.
* ``"modelopt"``: opset 19, the float part and the scales in fp16 (I/O fp32 behind Casts), DQ-only
  int8 weights without zero points.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


@dataclass
class NetBuilder:
    name: str = "net"
    opset: int = 13
    seed: int = 0
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    initializers: list[onnx.TensorProto] = field(default_factory=list)
    inputs: list[onnx.ValueInfoProto] = field(default_factory=list)
    outputs: list[onnx.ValueInfoProto] = field(default_factory=list)
    quantized_tensors: list[str] = field(default_factory=list)  # activation tensors to Q/DQ
    quantized_weights: dict[str, int] = field(default_factory=dict)  # weight name -> channel axis
    _count: int = 0

    def __post_init__(self) -> None:
        self.rng = np.random.default_rng(self.seed)

    def _name(self, prefix: str) -> str:
        self._count += 1
        return f"{prefix}_{self._count}"

    # ---------------------------------------------------------------- graph pieces
    def input(self, name: str, shape: list[int]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        return name

    def output(self, name: str, shape: list[int | str] | None = None) -> None:
        self.outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))

    def const(self, name: str, array: np.ndarray) -> str:
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op: str, inputs: list[str], name: str | None = None, **attrs: Any) -> str:
        name = name or self._name(op.lower())
        out = f"{name}_out"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def quantize(self, tensor: str) -> str:
        """Mark ``tensor`` to be fake-quantized (Q -> DQ inserted by ``build_qdq``)."""
        if tensor not in self.quantized_tensors:
            self.quantized_tensors.append(tensor)
        return tensor

    def conv(
        self,
        x: str,
        cin: int,
        cout: int,
        k: int = 3,
        stride: int = 1,
        *,
        bn: bool = True,
        relu: bool = True,
        quantize_input: bool = True,
        name: str | None = None,
        group: int = 1,
    ) -> str:
        name = name or self._name("conv")
        fan_in = cin // group * k * k
        w = self.rng.normal(0, np.sqrt(2.0 / fan_in), size=(cout, cin // group, k, k)).astype(
            np.float32
        )
        wname = self.const(f"{name}.weight", w)
        self.quantized_weights[wname] = 0
        if quantize_input:
            self.quantize(x)
        inputs = [x, wname]
        if not bn:
            inputs.append(
                self.const(f"{name}.bias", self.rng.normal(0, 0.1, cout).astype(np.float32))
            )
        y = self.node(
            "Conv",
            inputs,
            name=name,
            kernel_shape=[k, k],
            strides=[stride, stride],
            pads=[k // 2] * 4,
            group=group,
        )
        if bn:
            y = self.batchnorm(y, cout, name=f"{name}_bn")
        if relu:
            y = self.node("Relu", [y], name=f"{name}_relu")
        return y

    def batchnorm(self, x: str, channels: int, name: str) -> str:
        scale = self.const(f"{name}.gamma", self.rng.uniform(0.5, 1.5, channels).astype(np.float32))
        bias = self.const(f"{name}.beta", self.rng.normal(0, 0.1, channels).astype(np.float32))
        mean = self.const(f"{name}.mean", self.rng.normal(0, 0.1, channels).astype(np.float32))
        var = self.const(f"{name}.var", self.rng.uniform(0.5, 1.5, channels).astype(np.float32))
        return self.node("BatchNormalization", [x, scale, bias, mean, var], name=name, epsilon=1e-5)

    def gemm(
        self, x: str, cin: int, cout: int, name: str | None = None, quantize_input: bool = True
    ) -> str:
        name = name or self._name("fc")
        w = self.rng.normal(0, np.sqrt(1.0 / cin), size=(cout, cin)).astype(np.float32)
        wname = self.const(f"{name}.weight", w)
        self.quantized_weights[wname] = 0
        b = self.const(f"{name}.bias", np.zeros(cout, np.float32))
        if quantize_input:
            self.quantize(x)
        return self.node("Gemm", [x, wname, b], name=name, transB=1)

    def float_model(self) -> onnx.ModelProto:
        graph = helper.make_graph(
            self.nodes, self.name, self.inputs, self.outputs, self.initializers
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = 8 if self.opset < 19 else 9
        model.producer_name = "qdqkit-builder"
        return model


def measure_amax(
    model: onnx.ModelProto, tensors: list[str], samples: int = 4, seed: int = 0
) -> dict[str, float]:
    """Max |x| of ``tensors`` over seeded inputs, measured by running ``model`` in onnxruntime."""
    import onnxruntime as ort

    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    known = {o.name for o in probe.graph.output}
    for t in tensors:
        if t not in known:
            probe.graph.output.append(helper.make_tensor_value_info(t, TensorProto.FLOAT, None))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3  # a float probe may keep unused weight scales on purpose
    session = ort.InferenceSession(
        probe.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    rng = np.random.default_rng(seed)
    amax = dict.fromkeys(tensors, 0.0)
    for _ in range(samples):
        feeds = {}
        for inp in session.get_inputs():
            shape = [d if isinstance(d, int) else 1 for d in inp.shape]
            feeds[inp.name] = rng.uniform(-1, 1, size=shape).astype(np.float32)
        values = session.run(tensors, feeds)
        for t, v in zip(tensors, values, strict=True):
            amax[t] = max(amax[t], float(np.max(np.abs(v))))
    return {t: (a if a > 0 else 1.0) for t, a in amax.items()}


def build_qdq(builder: NetBuilder, style: str = "trt", samples: int = 4) -> onnx.ModelProto:
    """Insert Q/DQ into the builder's float network in the given producer ``style``."""
    model = builder.float_model()
    amax = measure_amax(model, builder.quantized_tensors, samples=samples, seed=builder.seed)
    graph = model.graph
    weights = {init.name: init for init in graph.initializer}
    scale_dtype = np.float16 if style == "modelopt" else np.float32
    new_nodes: list[onnx.NodeProto] = []
    rename: dict[str, str] = {}

    for tensor in builder.quantized_tensors:
        scale = builder.const(f"{tensor}_scale", np.array(amax[tensor] / 127.0, dtype=scale_dtype))
        q_inputs = [tensor, scale, builder.const(f"{tensor}_zp", np.array(0, dtype=np.int8))]
        new_nodes.append(
            helper.make_node("QuantizeLinear", q_inputs, [f"{tensor}_q"], name=f"{tensor}_Q")
        )
        new_nodes.append(
            helper.make_node(
                "DequantizeLinear",
                [f"{tensor}_q", *q_inputs[1:]],
                [f"{tensor}_dq"],
                name=f"{tensor}_DQ",
            )
        )
        rename[tensor] = f"{tensor}_dq"

    for wname, axis in builder.quantized_weights.items():
        w = numpy_helper.to_array(weights[wname])
        w_amax = np.abs(w.reshape(w.shape[0], -1)).max(axis=1)
        w_scale = (np.where(w_amax > 0, w_amax, 1.0) / 127.0).astype(np.float32)
        zp = np.zeros(w.shape[0], dtype=np.int8)
        if style == "modelopt":
            q = np.clip(np.rint(w / w_scale.reshape(-1, *([1] * (w.ndim - 1)))), -127, 127).astype(
                np.int8
            )
            for i, init in enumerate(builder.initializers):
                if init.name == wname:
                    builder.initializers[i] = numpy_helper.from_array(q, f"{wname}_quantized")
            s = builder.const(f"{wname}_scale", w_scale.astype(scale_dtype))
            new_nodes.append(
                helper.make_node(
                    "DequantizeLinear",
                    [f"{wname}_quantized", s],
                    [f"{wname}_dq"],
                    name=f"{wname}_DQ",
                    axis=axis,
                )
            )
        else:
            s = builder.const(f"{wname}_scale", w_scale)
            z = builder.const(f"{wname}_zp", zp)
            new_nodes.append(
                helper.make_node(
                    "QuantizeLinear", [wname, s, z], [f"{wname}_q"], name=f"{wname}_Q", axis=axis
                )
            )
            new_nodes.append(
                helper.make_node(
                    "DequantizeLinear",
                    [f"{wname}_q", s, z],
                    [f"{wname}_dq"],
                    name=f"{wname}_DQ",
                    axis=axis,
                )
            )
        rename[wname] = f"{wname}_dq"

    # Rewire consumers (not the Q nodes themselves) to read the dequantized tensors.
    rewired = []
    for node in builder.nodes:
        new = onnx.NodeProto()
        new.CopyFrom(node)
        for i, name in enumerate(new.input):
            if name in rename:
                new.input[i] = rename[name]
        rewired.append(new)
    if style == "modelopt":
        new_nodes, rewired = _to_fp16(builder, new_nodes, rewired)
    opset = 19 if style == "modelopt" else builder.opset
    out = helper.make_graph(
        new_nodes + rewired, builder.name, builder.inputs, builder.outputs, builder.initializers
    )
    result = helper.make_model(out, opset_imports=[helper.make_opsetid("", opset)])
    result.ir_version = 9 if opset >= 19 else 8
    result.producer_name = "pytorch" if style == "trt" else "modelopt-style"
    # Put nodes in topological order (Q/DQ were prepended before their producers).
    return _toposort(result)


def _to_fp16(
    builder: NetBuilder, qdq_nodes: list[onnx.NodeProto], body: list[onnx.NodeProto]
) -> tuple[list[onnx.NodeProto], list[onnx.NodeProto]]:
    """ModelOpt's default: the float part runs in fp16, network I/O stays fp32 behind Casts."""
    for i, init in enumerate(builder.initializers):
        if init.data_type == TensorProto.FLOAT:
            builder.initializers[i] = numpy_helper.from_array(
                numpy_helper.to_array(init).astype(np.float16), init.name
            )
    casts = []
    for inp in builder.inputs:
        casts.append(
            helper.make_node(
                "Cast",
                [inp.name],
                [f"{inp.name}_fp16"],
                name=f"{inp.name}_cast",
                to=TensorProto.FLOAT16,
            )
        )
        for node in (*qdq_nodes, *body):
            for j, name in enumerate(node.input):
                if name == inp.name:
                    node.input[j] = f"{inp.name}_fp16"
    for out in builder.outputs:
        for node in body:
            for j, name in enumerate(node.output):
                if name == out.name:
                    node.output[j] = f"{out.name}_fp16"
            for j, name in enumerate(node.input):
                if name == out.name:
                    node.input[j] = f"{out.name}_fp16"
        casts.append(
            helper.make_node(
                "Cast",
                [f"{out.name}_fp16"],
                [out.name],
                name=f"{out.name}_cast",
                to=TensorProto.FLOAT,
            )
        )
    return casts + qdq_nodes, body


def _toposort(model: onnx.ModelProto) -> onnx.ModelProto:
    graph = model.graph
    available = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {""}
    pending = list(graph.node)
    ordered: list[onnx.NodeProto] = []
    while pending:
        progressed = False
        rest = []
        for node in pending:
            if all(i in available for i in node.input):
                ordered.append(node)
                available.update(node.output)
                progressed = True
            else:
                rest.append(node)
        if not progressed:
            raise ValueError("graph has a cycle or a dangling input: " + rest[0].name)
        pending = rest
    del graph.node[:]
    graph.node.extend(ordered)
    return model


def resnet_block(
    b: NetBuilder, x: str, channels: int, *, quantize_residual: bool = True, name: str = "blk"
) -> str:
    """A basic residual block: conv-bn-relu, conv-bn, + skip, relu."""
    y = b.conv(x, channels, channels, name=f"{name}.conv1")
    y = b.conv(y, channels, channels, relu=False, name=f"{name}.conv2")
    skip = b.quantize(x) if quantize_residual else x
    y = b.node("Add", [y, skip], name=f"{name}.add")
    return b.node("Relu", [y], name=f"{name}.relu")


def demo_network(
    style: str = "trt", blocks: int = 2, width: int = 16, seed: int = 0
) -> onnx.ModelProto:
    """The built-in example: a small QAT-style ResNet (stem, residual blocks, pool, classifier)."""
    b = NetBuilder(name="qdqkit_demo", seed=seed)
    x = b.input("input", [1, 3, 32, 32])
    y = b.conv(x, 3, width, name="stem")
    y = b.node("MaxPool", [y], name="stem_pool", kernel_shape=[2, 2], strides=[2, 2])
    for i in range(blocks):
        y = resnet_block(b, y, width, name=f"layer{i}")
    y = b.node("GlobalAveragePool", [y], name="gap")
    y = b.node("Flatten", [y], name="flatten")
    y = b.gemm(y, width, 10, name="fc")
    b.nodes[-1].output[0] = "logits"
    b.output("logits", [1, 10])
    return build_qdq(b, style=style)
