"""One graph builder for models written in code: the tests, the benchmarks and the examples use it.

``GraphBuilder`` appends ONNX nodes, initializers, inputs and outputs with ``onnx.helper`` and hands
the result out as a ModelProto, an onnx-ir model, a file, or the outputs of an onnxruntime run. It
spells Q/DQ every way producers do, because what qdqkit reads depends on the spelling:

* the scale as an initializer, a ``Constant`` node, or behind an ``Identity`` or a ``Cast`` from
  fp16 (``scale(..., spelling=...)``), in any float dtype;
* the zero point int8 or uint8, per tensor or per channel (``axis``), or absent;
* activations as Q -> DQ pairs sharing one scale and zero point (``qdq``), or a lone Q or DQ with
  its own parameters (``quantize``, ``dequantize``) to spell requantize chains and mismatches;
* weights as float -> Q -> DQ, as int8 initializers behind a DQ only, or left float (``weight``).

Names are explicit where a caller gives them and otherwise ``<prefix><n>`` from one counter, so a
graph built twice the same way is the same graph. Random weights come from the builder's seeded
generator, drawn in call order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import onnx
import onnx_ir as ir
from onnx import TensorProto, helper, numpy_helper

ScaleSpelling = Literal["initializer", "constant", "identity", "cast"]
WeightStyle = Literal["q-dq", "dq-only", "float"]


class GraphBuilder:
    """Append-only ONNX graph under construction; every method returns the tensor it produced."""

    def __init__(self, name: str = "g", *, opset: int = 13, seed: int = 0) -> None:
        self.name = name
        self.opset = opset
        self.rng = np.random.default_rng(seed)
        self.producer_name = ""
        self.nodes: list[onnx.NodeProto] = []
        self.initializers: list[onnx.TensorProto] = []
        self.inputs: list[onnx.ValueInfoProto] = []
        self.outputs: list[onnx.ValueInfoProto] = []
        self.opset_imports = [helper.make_opsetid("", opset)]
        self._count = 0

    # ---------------------------------------------------------------- names, I/O, constants
    def fresh(self, prefix: str) -> str:
        """A new name ``<prefix><n>``; one counter for nodes and tensors."""
        self._count += 1
        return f"{prefix}{self._count}"

    def use_domain(self, domain: str, version: int) -> None:
        """Import an operator set besides the default one (custom plugin ops)."""
        self.opset_imports.append(helper.make_opsetid(domain, version))

    def input(self, name: str, shape: Sequence[int | str] | None,
              dtype: int = TensorProto.FLOAT) -> str:
        self.inputs.append(helper.make_tensor_value_info(name, dtype, shape))
        return name

    def output(self, name: str, shape: Sequence[int | str] | None = None,
               dtype: int = TensorProto.FLOAT) -> None:
        self.outputs.append(helper.make_tensor_value_info(name, dtype, shape))

    def const(self, array: np.ndarray | float | int, name: str | None = None) -> str:
        """An initializer holding ``array`` (its dtype kept)."""
        name = name or self.fresh("c")
        self.initializers.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def constant(self, array: np.ndarray | float | int, out: str | None = None) -> str:
        """A ``Constant`` node holding ``array``."""
        return self.node("Constant", [], out=out or self.fresh("const"),
                         value=numpy_helper.from_array(np.asarray(array)))

    def node(self, op: str, inputs: Sequence[str], *, name: str | None = None,
             out: str | None = None, outputs: int = 1, domain: str = "", **attrs: Any) -> str:
        """Append one node and return its (first) output.

        ``name=None`` picks a fresh name, ``name=""`` leaves the node unnamed. Outputs are ``out``
        or ``<name>_out``; with ``outputs=n > 1`` they are ``<name>_out0`` .. ``<name>_out<n-1>``.
        """
        name = self.fresh(op.lower()) if name is None else name
        if outputs == 1:
            outs = [out or f"{name}_out"]
        else:
            outs = [f"{out or name + '_out'}{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=name,
                                           domain=domain or None, **attrs))
        return outs[0]

    # ---------------------------------------------------------------- Q/DQ
    def scale(self, value: float | np.ndarray, spelling: ScaleSpelling = "initializer",
              dtype: type = np.float32) -> str:
        """A scale tensor spelled as an initializer, a Constant, or behind an Identity or a Cast.

        ``"cast"`` stores the value as fp16 and casts it to float, as fp16-exported models do.
        """
        array: np.ndarray = np.asarray(value, dtype=dtype)
        name = self.fresh("scale")
        if spelling == "initializer":
            return self.const(array, name)
        if spelling == "constant":
            return self.constant(array, out=name)
        if spelling == "identity":
            return self.node("Identity", [self.const(array, name + "_src")], out=name)
        if spelling == "cast":
            src = self.const(array.astype(np.float16), name + "_src")
            return self.node("Cast", [src], out=name, to=TensorProto.FLOAT)
        raise ValueError(f"unknown scale spelling {spelling!r}")

    def _params(self, scale: float | np.ndarray, zero_point: int | np.ndarray | None,
                zp_dtype: type) -> list[str]:
        params = [self.const(np.asarray(scale, np.float32))]
        if zero_point is not None:
            params.append(self.const(np.asarray(zero_point, zp_dtype)))
        return params

    def quantize(self, x: str, scale: float | np.ndarray = 0.05,
                 zero_point: int | np.ndarray | None = 0, *, name: str | None = None,
                 axis: int | None = None, zp_dtype: type = np.int8) -> str:
        """A lone QuantizeLinear with its own float32 scale and zero point initializers."""
        attrs: dict[str, Any] = {} if axis is None else {"axis": axis}
        params = self._params(scale, zero_point, zp_dtype)
        return self.node("QuantizeLinear", [x, *params], name=name or self.fresh("q"), **attrs)

    def dequantize(self, xq: str, scale: float | np.ndarray = 0.05,
                   zero_point: int | np.ndarray | None = 0, *, name: str | None = None,
                   axis: int | None = None, zp_dtype: type = np.int8) -> str:
        """A lone DequantizeLinear with its own float32 scale and zero point initializers."""
        attrs: dict[str, Any] = {} if axis is None else {"axis": axis}
        params = self._params(scale, zero_point, zp_dtype)
        return self.node("DequantizeLinear", [xq, *params], name=name or self.fresh("dq"),
                         **attrs)

    def qdq(self, x: str, scale: float | np.ndarray = 0.05, *,
            zero_point: int | np.ndarray | None = 0, zp_dtype: type = np.int8,
            spelling: ScaleSpelling = "initializer", scale_dtype: type = np.float32,
            axis: int | None = None, name: str | None = None) -> str:
        """``x`` -> Q -> DQ (nodes ``<name>_Q``, ``<name>_DQ``) sharing one scale and zero point.

        The zero point (initializer ``<name>_zp``) takes the scale's shape; ``zero_point=None``
        leaves it out (uint8 by the ONNX default). A per-channel pair needs ``axis``.
        """
        name = name or self.fresh("qdq")
        params = [self.scale(scale, spelling, scale_dtype)]
        if zero_point is not None:
            zp = np.broadcast_to(np.asarray(zero_point, dtype=zp_dtype), np.shape(scale)).copy()
            params.append(self.const(zp, f"{name}_zp"))
        attrs: dict[str, Any] = {} if axis is None else {"axis": axis}
        q = self.node("QuantizeLinear", [x, *params], name=f"{name}_Q", **attrs)
        return self.node("DequantizeLinear", [q, *params], name=f"{name}_DQ", **attrs)

    def weight(self, shape: Sequence[int], *, style: WeightStyle = "q-dq",
               per_channel: bool = True, axis: int = 0, std: float = 0.1,
               name: str | None = None) -> str:
        """A random normal(0, ``std``) weight, int8-quantized symmetric with max|w|/127 scales.

        ``"q-dq"``: float initializer -> Q -> DQ; ``"dq-only"``: int8 initializer -> DQ;
        ``"float"``: the float initializer alone. Per channel along ``axis``, or per tensor.
        """
        name = name or self.fresh("w")
        w = self.rng.normal(0, std, size=tuple(shape)).astype(np.float32)
        if style == "float":
            return self.const(w, name)
        channels = shape[axis]
        if per_channel:
            amax = np.abs(np.moveaxis(w, axis, 0).reshape(channels, -1)).max(axis=1)
            scale, zero = (amax / 127).astype(np.float32), np.zeros(channels, np.int8)
            attrs: dict[str, Any] = {"axis": axis}
        else:
            scale, zero = np.array(np.abs(w).max() / 127, np.float32), np.array(0, np.int8)
            attrs = {}
        if style == "q-dq":
            source = self.const(w, name)
            params = [self.const(scale, f"{name}_scale"), self.const(zero, f"{name}_zp")]
            q = self.node("QuantizeLinear", [source, *params], name=f"{name}_Q", **attrs)
        else:
            broadcast = scale.reshape([-1 if d == axis else 1 for d in range(len(shape))]) \
                if per_channel else scale
            q = self.const(np.clip(np.rint(w / broadcast), -127, 127).astype(np.int8), name)
            params = [self.const(scale, f"{name}_scale"), self.const(zero, f"{name}_zp")]
        return self.node("DequantizeLinear", [q, *params], name=f"{name}_DQ", **attrs)

    # ---------------------------------------------------------------- layers
    def conv(self, x: str, cin: int, cout: int, k: int = 3, *, stride: int = 1, group: int = 1,
             name: str | None = None, weight: WeightStyle = "q-dq", per_channel: bool = True,
             bias: bool = True, std: float = 0.1) -> str:
        """A same-padded k x k Conv: weight ``<name>.weight`` (see ``weight``), bias N(0, 0.1)."""
        name = name or self.fresh("conv")
        w = self.weight((cout, cin // group, k, k), style=weight, per_channel=per_channel,
                        std=std, name=f"{name}.weight")
        inputs = [x, w]
        if bias:
            inputs.append(self.const(self.rng.normal(0, 0.1, cout).astype(np.float32),
                                     f"{name}.bias"))
        return self.node("Conv", inputs, name=name, kernel_shape=[k, k], pads=[k // 2] * 4,
                         group=group, strides=[stride, stride])

    def bn(self, x: str, channels: int, *, name: str | None = None, random: bool = False,
           epsilon: float | None = None) -> str:
        """BatchNormalization: identity statistics, or random ones (gamma, var in [0.5, 1.5])."""
        name = name or self.fresh("batchnormalization")
        if random:
            values = [self.rng.uniform(0.5, 1.5, channels), self.rng.normal(0, 0.1, channels),
                      self.rng.normal(0, 0.1, channels), self.rng.uniform(0.5, 1.5, channels)]
        else:
            values = [np.ones(channels), np.zeros(channels), np.zeros(channels), np.ones(channels)]
        params = [self.const(v.astype(np.float32), f"{name}.{p}")
                  for p, v in zip(("gamma", "beta", "mean", "var"), values, strict=True)]
        attrs: dict[str, Any] = {} if epsilon is None else {"epsilon": epsilon}
        return self.node("BatchNormalization", [x, *params], name=name, **attrs)

    def gemm(self, x: str, cin: int, cout: int, *, name: str | None = None,
             weight: WeightStyle = "q-dq", std: float = 0.1, out: str | None = None) -> str:
        """A fully connected layer ``x @ W.T + 0`` (Gemm, transB=1), W per output channel."""
        name = name or self.fresh("fc")
        w = self.weight((cout, cin), style=weight, std=std, name=f"{name}.weight")
        b = self.const(np.zeros(cout, np.float32), f"{name}.bias")
        return self.node("Gemm", [x, w, b], name=name, out=out, transB=1)

    def residual(self, x: str, channels: int, *, name: str | None = None, scale: float = 0.05,
                 quantize_skip: bool = True) -> str:
        """A basic residual block on a Q/DQ-ed input: conv-bn-relu, conv-bn, + skip, relu.

        Each conv input gets its own Q/DQ; the skip gets one too unless ``quantize_skip`` is off
        (then TensorRT cannot fuse the Add into the second conv in INT8).
        """
        name = name or self.fresh("block")
        y = self.conv(self.qdq(x, scale, name=f"{name}.conv1_in"), channels, channels,
                      name=f"{name}.conv1", bias=False)
        y = self.node("Relu", [self.bn(y, channels, name=f"{name}.bn1")], name=f"{name}.relu1")
        y = self.conv(self.qdq(y, scale, name=f"{name}.conv2_in"), channels, channels,
                      name=f"{name}.conv2", bias=False)
        y = self.bn(y, channels, name=f"{name}.bn2")
        skip = self.qdq(x, scale, name=f"{name}.skip") if quantize_skip else x
        y = self.node("Add", [y, skip], name=f"{name}.add")
        return self.node("Relu", [y], name=f"{name}.relu2")

    def branch_reading(self, x: str, *, name: str | None = None) -> str:
        """An If whose two bodies read ``x`` from the enclosing graph (3x, -x), taken on a
        constant True: a network that runs a second network only on some inputs."""
        name = name or self.fresh("branch")
        bodies = {}
        for body, op, extra in (("then_branch", "Mul", [self.const(np.float32(3.0))]),
                                ("else_branch", "Neg", [])):
            out = f"{name}_{body}_out"
            bodies[body] = helper.make_graph(
                [helper.make_node(op, [x, *extra], [out])], f"{name}_{body}", [],
                [helper.make_tensor_value_info(out, onnx.TensorProto.FLOAT, None)])
        return self.node("If", [self.constant(np.array(True))], name=name, **bodies)

    # ---------------------------------------------------------------- results
    def graph(self) -> onnx.GraphProto:
        """The graph alone, e.g. as the body of an ``If`` or ``Loop`` node."""
        return helper.make_graph(self.nodes, self.name, self.inputs, self.outputs,
                                 self.initializers)

    def proto(self) -> onnx.ModelProto:
        """The model as a ModelProto (IR version 8 below opset 19, else 9)."""
        model = helper.make_model(self.graph(), opset_imports=self.opset_imports)
        model.ir_version = 8 if self.opset < 19 else 9
        if self.producer_name:
            model.producer_name = self.producer_name
        return model

    def ir(self) -> ir.Model:
        return ir.serde.deserialize_model(self.proto())

    def save(self, path: Path) -> Path:
        onnx.save(self.proto(), path)
        return path

    def run(self, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
        return run_model(self.proto(), feeds)


def run_model(model: onnx.ModelProto | ir.Model | str | Path,
              feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """Every output of ``model`` on ``feeds``, run by qdqkit's onnxruntime runner."""
    from qdqkit.core.numerics import make_session

    source: ir.Model | bytes | str | Path
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else model
    outputs: list[np.ndarray] = make_session(source).run(None, dict(feeds))
    return outputs
