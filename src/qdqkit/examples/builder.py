"""Build small, realistic Q/DQ models in code (for the demo, the tests and the benchmarks).

``NetBuilder`` writes a float network on a ``GraphBuilder`` and marks where activations are
quantized; ``build_qdq`` then runs the float model once in onnxruntime on seeded inputs to measure
each marked tensor's max |x| (as a max calibrator would) and inserts Q/DQ with the ``InsertQdq``
pass, in the chosen producer's style:

* ``"trt"``: pytorch-quantization / TensorRT QAT style: float weight -> Q -> DQ per output channel,
  activation Q -> DQ per tensor, int8 with explicit zero zero points, scales as initializers.
* ``"modelopt"``: opset 19, the float part and the scales in fp16 (I/O fp32 behind Casts), DQ-only
  int8 weights without zero points.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import onnx_ir as ir
from onnx import TensorProto, helper, numpy_helper

from qdqkit.core.numerics import make_session
from qdqkit.examples.graph import GraphBuilder
from qdqkit.passes.insert_qdq import ActivationQdq, InsertQdq, WeightQdq


class NetBuilder:
    """A float network on a ``GraphBuilder``, and the tensors and weights to quantize."""

    def __init__(self, name: str = "net", opset: int = 13, seed: int = 0) -> None:
        self.graph = GraphBuilder(name, opset=opset, seed=seed)
        self.graph.producer_name = "qdqkit-builder"
        self.seed = seed
        self.quantized_tensors: list[str] = []  # activation tensors to Q/DQ
        self.quantized_weights: list[str] = []  # weights to quantize per channel

    # ---------------------------------------------------------------- graph pieces
    def input(self, name: str, shape: list[int]) -> str:
        return self.graph.input(name, shape)

    def output(self, name: str, shape: list[int | str] | None = None) -> None:
        self.graph.output(name, shape)

    def node(self, op: str, inputs: list[str], name: str | None = None, **attrs: Any) -> str:
        return self.graph.node(op, inputs, name=name, **attrs)

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
        """A He-initialised float Conv (bias only without BatchNorm), optionally BN and Relu."""
        name = name or self.graph.fresh("conv")
        fan_in = cin // group * k * k
        self.quantized_weights.append(f"{name}.weight")
        if quantize_input:
            self.quantize(x)
        y = self.graph.conv(x, cin, cout, k, stride=stride, group=group, name=name,
                            weight="float", bias=not bn, std=float(np.sqrt(2.0 / fan_in)))
        if bn:
            y = self.graph.bn(y, cout, name=f"{name}_bn", random=True, epsilon=1e-5)
        if relu:
            y = self.graph.node("Relu", [y], name=f"{name}_relu")
        return y

    def gemm(
        self, x: str, cin: int, cout: int, name: str | None = None, quantize_input: bool = True,
        out: str | None = None,
    ) -> str:
        """A He-initialised float fully connected layer (Gemm, transB=1, zero bias)."""
        name = name or self.graph.fresh("fc")
        self.quantized_weights.append(f"{name}.weight")
        if quantize_input:
            self.quantize(x)
        return self.graph.gemm(x, cin, cout, name=name, weight="float",
                               std=float(np.sqrt(1.0 / cin)), out=out)

    def float_model(self) -> onnx.ModelProto:
        return self.graph.proto()


def measure_amax(
    model: onnx.ModelProto, tensors: list[str], samples: int = 4, seed: int = 0
) -> dict[str, float]:
    """Max |x| of ``tensors`` over seeded inputs, measured by running ``model`` in onnxruntime."""
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    known = {o.name for o in probe.graph.output}
    for t in tensors:
        if t not in known:
            probe.graph.output.append(helper.make_tensor_value_info(t, TensorProto.FLOAT, None))
    session = make_session(probe.SerializeToString())
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
    float_model = builder.float_model()
    amax = measure_amax(float_model, builder.quantized_tensors, samples=samples, seed=builder.seed)
    model = ir.serde.deserialize_model(float_model)
    graph = model.graph
    values: dict[str, ir.Value] = {v.name: v for v in graph.inputs if v.name}
    values.update((out.name, out) for node in graph for out in node.outputs if out.name)
    activations = [ActivationQdq(values[t], amax[t] / 127.0) for t in builder.quantized_tensors]
    weights = [
        WeightQdq(use.node, keep_float=style != "modelopt")
        for name in builder.quantized_weights
        for use in graph.initializers[name].uses()
    ]
    InsertQdq(activations, weights)(model)
    result = ir.serde.serialize_model(model)
    # The models carry no intermediate value types (ONNX infers them), and fp16 retypes tensors.
    del result.graph.value_info[:]
    if style == "modelopt":
        _to_fp16(result.graph)
    opset = 19 if style == "modelopt" else builder.graph.opset
    del result.opset_import[:]
    result.opset_import.append(helper.make_opsetid("", opset))
    result.ir_version = 9 if opset >= 19 else 8
    result.producer_name = "pytorch" if style == "trt" else "modelopt-style"
    # Casts for the fp16 outputs are added first; put nodes in topological order.
    return _toposort(result)


def _to_fp16(graph: onnx.GraphProto) -> None:
    """ModelOpt's default: the float part runs in fp16, network I/O stays fp32 behind Casts."""
    for init in graph.initializer:
        if init.data_type == TensorProto.FLOAT:
            init.CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(init).astype(np.float16), init.name
            ))
    body = list(graph.node)
    casts = []
    for inp in graph.input:
        casts.append(helper.make_node(
            "Cast", [inp.name], [f"{inp.name}_fp16"], name=f"{inp.name}_cast",
            to=TensorProto.FLOAT16,
        ))
        for node in body:
            for j, name in enumerate(node.input):
                if name == inp.name:
                    node.input[j] = f"{inp.name}_fp16"
    for out in graph.output:
        for node in body:
            for j, name in enumerate(node.output):
                if name == out.name:
                    node.output[j] = f"{out.name}_fp16"
            for j, name in enumerate(node.input):
                if name == out.name:
                    node.input[j] = f"{out.name}_fp16"
        casts.append(helper.make_node(
            "Cast", [f"{out.name}_fp16"], [out.name], name=f"{out.name}_cast",
            to=TensorProto.FLOAT,
        ))
    del graph.node[:]
    graph.node.extend(casts + body)


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
    y = b.gemm(y, width, 10, name="fc", out="logits")
    b.output("logits", [1, 10])
    return build_qdq(b, style=style)
