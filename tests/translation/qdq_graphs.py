"""A tiny graph builder for translator tests: Q/DQ spelled every way producers spell it."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from qdqkit.core.numerics import make_session

FIXTURES = Path(__file__).parents[1] / "fixtures" / "translate"


class G:
    def __init__(self, opset: int = 13) -> None:
        self.opset = opset
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.count = 0

    def fresh(self, prefix: str) -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def inp(self, name: str, shape: list[int], dtype: int = TensorProto.FLOAT) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, dtype, shape))
        return name

    def out(self, name: str, dtype: int = TensorProto.FLOAT) -> None:
        self.outputs.append(helper.make_tensor_value_info(name, dtype, None))

    def init(self, name: str, array: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def node(self, op: str, inputs: list[str], out: str | None = None, name: str | None = None,
             **attrs: object) -> str:
        name = self.fresh(op.lower()) if name is None else name
        out = out or f"{name}_out"
        self.nodes.append(helper.make_node(op, inputs, [out], name=name, **attrs))
        return out

    def scale(self, value: float | np.ndarray, spelling: str = "initializer",
              dtype: type = np.float32) -> str:
        array = np.asarray(value, dtype=dtype)
        name = self.fresh("scale")
        if spelling == "initializer":
            return self.init(name, array)
        if spelling == "constant":
            return self.node("Constant", [], out=name, value=numpy_helper.from_array(array))
        if spelling == "identity":
            return self.node("Identity", [self.init(name + "_src", array)], out=name)
        if spelling == "cast":  # fp16 constant cast up to float
            src = self.init(name + "_src", array.astype(np.float16))
            return self.node("Cast", [src], out=name, to=TensorProto.FLOAT)
        raise ValueError(spelling)

    def qdq(self, x: str, scale: float | np.ndarray, *, zero_point: int | np.ndarray | None = 0,
            zp_dtype: type = np.int8, spelling: str = "initializer", axis: int | None = None,
            name: str | None = None) -> str:
        name = name or self.fresh("qdq")
        s = self.scale(scale, spelling)
        ins = [x, s]
        if zero_point is not None:
            zp = np.broadcast_to(np.asarray(zero_point, dtype=zp_dtype), np.shape(scale)).copy()
            ins.append(self.init(f"{name}_zp", zp))
        attrs = {} if axis is None else {"axis": axis}
        q = self.node("QuantizeLinear", ins, name=f"{name}_Q", **attrs)
        return self.node("DequantizeLinear", [q, *ins[1:]], name=f"{name}_DQ", **attrs)

    def model(self, check: bool = False) -> onnx.ModelProto:
        graph = helper.make_graph(self.nodes, "g", self.inputs, self.outputs, self.inits)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", self.opset)])
        model.ir_version = 8 if self.opset < 19 else 9
        if check:
            onnx.checker.check_model(model)
        return model

    def save(self, path: Path) -> Path:
        onnx.save(self.model(), path)
        return path


def run(model: onnx.ModelProto | str | Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    return make_session(source).run(None, feeds)  # type: ignore[no-any-return]


def qdq_count(model: onnx.ModelProto) -> int:
    return sum(n.op_type in ("QuantizeLinear", "DequantizeLinear") for n in model.graph.node)


def max_scaled_weight(shape: tuple[int, ...], seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A random weight and its per-output-channel max|w|/127 scales."""
    w = np.random.default_rng(seed).normal(0, 0.3, size=shape).astype(np.float32)
    return w, (np.abs(w.reshape(shape[0], -1)).max(axis=1) / 127).astype(np.float32)


def conv_block(g: G, x: str, cin: int, cout: int, seed: int, *, act_scale: float,
               spelling: str = "initializer") -> str:
    """Q/DQ on the activation and a float weight -> Q -> DQ (per channel), then Conv."""
    w, ws = max_scaled_weight((cout, cin, 3, 3), seed)
    xq = g.qdq(x, act_scale, spelling=spelling)
    wq = g.qdq(g.init(g.fresh("w"), w), ws, zero_point=np.zeros(cout, np.int8), axis=0)
    return g.node("Conv", [xq, wq], pads=[1, 1, 1, 1])
