"""InsertQdq: activations get a per-tensor Q -> DQ, weights a per-channel int8 DQ or Q -> DQ."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir
from onnx import TensorProto

from qdqkit.core.qdq import QdqView
from qdqkit.core.qdq_math import implicit_weight_scales
from qdqkit.examples.graph import GraphBuilder, run_model
from qdqkit.passes.insert_qdq import ActivationQdq, InsertQdq, WeightQdq
from tests.models import ops

RNG = np.random.default_rng(3)
W = RNG.normal(0, 0.3, size=(4, 3, 3, 3)).astype(np.float32)
W[2] = 0.0  # an all-zero output channel still gets a usable scale
FC = RNG.normal(0, 0.3, size=(5, 4)).astype(np.float32)  # Gemm B with transB: channels on axis 0


def _net() -> ir.Model:
    g = GraphBuilder()
    c = g.node("Conv", [g.input("x", [1, 3, 6, 6]), g.const(W, "w")], name="conv", out="c",
               pads=[1, 1, 1, 1])
    r = g.node("Relu", [c], name="relu", out="r")
    p = g.node("GlobalAveragePool", [r], name="gap", out="p")
    f = g.node("Flatten", [p], name="flatten", out="f")
    g.output(g.node("Gemm", [f, g.const(FC, "fc")], name="fc", out="y", transB=1))
    g.output(g.node("Identity", [r], name="side", out="side"))
    return g.ir()


def _value(m: ir.Model, name: str) -> ir.Value:
    return next(out for node in m.graph for out in node.outputs if out.name == name)


def _fake_quant(x: np.ndarray, scale: float) -> np.ndarray:
    return (np.clip(np.rint(x / np.float32(scale)), -128, 127) * np.float32(scale)).astype(np.float32)


def _weights_as_trt(w: np.ndarray, axis: int) -> np.ndarray:
    scale = implicit_weight_scales(w, axis)
    scale = np.where(scale > 0, scale, 1 / 127).astype(np.float32)
    shape = [1] * w.ndim
    shape[axis] = -1
    s = scale.reshape(shape)
    return (np.clip(np.rint(w / s), -127, 127) * s).astype(np.float32)


def test_before_and_after_compute_the_fake_quantized_network() -> None:
    x = RNG.uniform(-1, 1, size=(1, 3, 6, 6)).astype(np.float32)
    after = _net()
    relu, conv, gemm = _value(after, "r"), after.graph.node("conv"), after.graph.node("fc")
    insert = InsertQdq([ActivationQdq(after.graph.inputs[0], 1 / 127),
                        ActivationQdq(relu, 0.02, readers=(after.graph.node("gap"),))],
                       [WeightQdq(conv), WeightQdq(gemm, keep_float=True)])
    assert insert(after).modified
    assert insert.quantized_activations == 2 and insert.quantized_weights == 2

    # The same arithmetic, done by hand on the float network.
    before = _net()
    before.graph.initializers["w"].const_value = ir.Tensor(_weights_as_trt(W, 0), name="w")
    before.graph.initializers["fc"].const_value = ir.Tensor(_weights_as_trt(FC, 0), name="fc")
    c = run_model(before, {"x": _fake_quant(x, 1 / 127)})
    expected_side = c[1]
    # Only the pool reads the quantized Relu output; the side branch keeps the float one.
    got_y, got_side = run_model(after, {"x": x})
    np.testing.assert_allclose(got_side, expected_side, rtol=1e-5, atol=1e-6)
    r = np.maximum(expected_side, 0)
    pooled = _fake_quant(r, 0.02).mean(axis=(2, 3))
    np.testing.assert_allclose(got_y, pooled @ _weights_as_trt(FC, 0).T, rtol=1e-4, atol=1e-5)


def test_styles_names_and_view() -> None:
    m = _net()
    InsertQdq([ActivationQdq(m.graph.inputs[0], 0.01)],
              [WeightQdq(m.graph.node("conv")), WeightQdq(m.graph.node("fc"), keep_float=True)])(m)
    assert ops(m)[:3] == ["QuantizeLinear", "DequantizeLinear", "DequantizeLinear"]
    assert "w" not in m.graph.initializers  # replaced by its int8 copy
    assert m.graph.initializers["w_quantized"].const_value.dtype == ir.DataType.INT8  # type: ignore[union-attr]
    view = QdqView(m.graph)
    conv_ref = view.weight_ref(m.graph.node("conv"), 1)
    fc_ref = view.weight_ref(m.graph.node("fc"), 1)
    assert conv_ref is not None and conv_ref.style == "dq-only" and conv_ref.params is not None
    assert fc_ref is not None and fc_ref.style == "q-dq" and fc_ref.params is not None
    assert conv_ref.params.axis == 0 and fc_ref.params.axis == 0
    np.testing.assert_array_equal(conv_ref.params.scale[2], np.float32(1 / 127))
    assert {n.name for n in m.graph if n.op_type == "QuantizeLinear"} == {"x_Q", "fc_Q"}


def test_a_graph_output_keeps_its_name_and_a_taken_name_gets_a_suffix() -> None:
    m = _net()
    side = _value(m, "side")
    m.graph.node("relu").outputs[0].name = "side_q"  # the name the pass would pick
    InsertQdq([ActivationQdq(side, 0.05)])(m)
    assert [o.name for o in m.graph.outputs] == ["y", "side"]
    producer = m.graph.outputs[1].producer()
    assert producer is not None and producer.op_type == "DequantizeLinear"
    assert m.graph.node("side_Q").outputs[0].name == "side_q_1"


def _half_net(opset: int) -> ir.Model:
    g = GraphBuilder(opset=opset)
    x = g.input("x", [1, 3, 6, 6], dtype=TensorProto.FLOAT16)
    r = g.node("Relu", [x], name="relu", out="r")
    g.node("Conv", [r, g.const(W.astype(np.float16), "w")], name="conv", out="y",
           pads=[1, 1, 1, 1])
    g.output("y", [1, 4, 6, 6], dtype=TensorProto.FLOAT16)
    model = g.ir()
    _value(model, "r").dtype = ir.DataType.FLOAT16  # as value_info or inference would say
    return model


def test_a_float16_tensor_at_opset_19_gets_a_float16_pair_without_casts() -> None:
    # Opset 19 lets Q/DQ read and write float16 (the scale takes the input's type): a Cast on each
    # side would be two more layers in TensorRT's strongly typed build.
    model = _half_net(19)
    r = _value(model, "r")
    InsertQdq([ActivationQdq(r, 0.0123)])(model)
    assert "Cast" not in ops(model)
    q = next(u.node for u in r.uses())
    assert q.op_type == "QuantizeLinear"
    scale = q.inputs[1].const_value.numpy()
    assert scale.dtype == np.float16 and float(scale) == float(np.float16(0.0123))
    feeds = {"x": RNG.normal(0, 1, size=(1, 3, 6, 6)).astype(np.float16)}
    got = run_model(model, feeds)[0]
    assert got.dtype == np.float16 and np.isfinite(got).all()


def test_below_opset_19_a_float16_tensor_is_cast_around_a_float32_pair() -> None:
    model = _half_net(13)
    InsertQdq([ActivationQdq(_value(model, "r"), 0.0123)])(model)
    assert ops(model).count("Cast") == 2
    q = next(n for n in model.graph if n.op_type == "QuantizeLinear")
    assert q.inputs[1].const_value.dtype == ir.DataType.FLOAT
