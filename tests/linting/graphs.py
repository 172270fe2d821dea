"""A tiny Q/DQ graph builder for the lint and predictor tests: exact scales, no calibration."""

from __future__ import annotations

import numpy as np
import onnx
import onnx_ir as ir
from onnx import TensorProto, helper, numpy_helper


class G:
    def __init__(self, opset: int = 13, seed: int = 0) -> None:
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.rng = np.random.default_rng(seed)
        self.count = 0
        self.opsets = [helper.make_opsetid("", opset)]

    def _name(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def const(self, array: np.ndarray, name: str | None = None) -> str:
        name = name or self._name("c")
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def input(self, name: str, shape: list[int]) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, shape))
        return name

    def output(self, tensor: str) -> None:
        self.outputs.append(helper.make_tensor_value_info(tensor, TensorProto.FLOAT, None))

    def op(self, op: str, inputs: list[str], name: str | None = None, domain: str = "",
           outputs: int = 1, **attrs: object) -> str:
        name = name or self._name(op.lower())
        outs = [f"{name}_out"] if outputs == 1 else [f"{name}_out{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=name, domain=domain or None,
                                           **attrs))
        return outs[0]

    def q(self, x: str, scale: float = 0.05, zp: int = 0, name: str | None = None) -> str:
        name = name or self._name("q")
        s = self.const(np.array(scale, np.float32))
        z = self.const(np.array(zp, np.int8))
        return self.op("QuantizeLinear", [x, s, z], name=name)

    def dq(self, xq: str, scale: float = 0.05, zp: int = 0, name: str | None = None) -> str:
        name = name or self._name("dq")
        s = self.const(np.array(scale, np.float32))
        z = self.const(np.array(zp, np.int8))
        return self.op("DequantizeLinear", [xq, s, z], name=name)

    def qdq(self, x: str, scale: float = 0.05, name: str = "") -> str:
        return self.dq(self.q(x, scale, name=f"{name}Q" if name else None), scale,
                       name=f"{name}DQ" if name else None)

    def weight(self, shape: tuple[int, ...], *, quantize: bool = True, per_channel: bool = True,
               axis: int = 0) -> str:
        w = self.rng.normal(0, 0.1, size=shape).astype(np.float32)
        name = self.const(w, self._name("w"))
        if not quantize:
            return name
        if per_channel:
            amax = np.abs(np.moveaxis(w, axis, 0).reshape(shape[axis], -1)).max(axis=1)
            s = self.const((amax / 127).astype(np.float32))
            z = self.const(np.zeros(shape[axis], np.int8))
            q = self.op("QuantizeLinear", [name, s, z], axis=axis)
            return self.op("DequantizeLinear", [q, s, z], axis=axis)
        s = self.const(np.array(np.abs(w).max() / 127, np.float32))
        z = self.const(np.array(0, np.int8))
        return self.op("DequantizeLinear", [self.op("QuantizeLinear", [name, s, z]), s, z])

    def conv(self, x: str, cin: int, cout: int, k: int = 3, *, name: str | None = None,
             group: int = 1, quantize_weight: bool = True, per_channel: bool = True,
             bias: bool = True, stride: int = 1) -> str:
        w = self.weight((cout, cin // group, k, k), quantize=quantize_weight,
                        per_channel=per_channel)
        inputs = [x, w]
        if bias:
            inputs.append(self.const(self.rng.normal(0, 0.1, cout).astype(np.float32)))
        return self.op("Conv", inputs, name=name, kernel_shape=[k, k], pads=[k // 2] * 4,
                       group=group, strides=[stride, stride])

    def bn(self, x: str, channels: int, name: str | None = None) -> str:
        params = [self.const(np.ones(channels, np.float32)), self.const(np.zeros(channels, np.float32)),
                  self.const(np.zeros(channels, np.float32)), self.const(np.ones(channels, np.float32))]
        return self.op("BatchNormalization", [x, *params], name=name)

    def proto(self) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "g", self.inputs, self.outputs, self.inits)
        model = helper.make_model(graph, opset_imports=self.opsets)
        model.ir_version = 8 if self.opset < 19 else 9
        return model

    def model(self) -> ir.Model:
        return ir.serde.deserialize_model(self.proto())


def every_node_is_accounted_for(model: ir.Model) -> list[str]:
    """Nodes that are in no predicted layer, not elided and not folded as constants."""
    from qdqkit.trt.predict import run_prediction

    prediction = run_prediction(model)
    engine = prediction.engine
    covered = {n for layer in engine.layers for n in layer.onnx_nodes}
    covered |= set(engine.metadata["elided_nodes"])
    covered |= {n.name for n in prediction.facts.folded_nodes}
    return [n.name or n.op_type for n in model.graph if n.name not in covered]
