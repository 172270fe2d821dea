"""Float16Remainder before/after: the FP16 model computes what the float one does."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.numerics import make_session
from qdqkit.examples.graph import GraphBuilder
from qdqkit.passes.float16_remainder import Float16Remainder


def _model() -> GraphBuilder:
    g = GraphBuilder("mixed", opset=19, seed=0)
    x = g.input("x", [1, 8, 6, 6])
    y = g.node("Relu", [g.conv(x, 8, 8, weight="float")])
    y = g.node("Resize", [y, "", g.const(np.array([1, 1, 2, 2], np.float32))], mode="nearest")
    m = g.node("ReduceMean", [g.node("Pow", [y, g.const(np.float32(2))]),
                              g.const(np.array([1], np.int64))])
    g.node("Add", [y, m], out="out")
    g.output("out", [1, 8, 12, 12])
    return g


def test_fp16_remainder_runs_and_matches_float() -> None:
    g = _model()
    model = g.ir()
    feeds = {"x": np.random.default_rng(0).normal(size=(1, 8, 6, 6)).astype(np.float32)}
    expected = g.run(feeds)[0]
    remainder = Float16Remainder()
    remainder(model)
    kinds = {n.op_type: n.outputs[0].dtype for n in model.graph}
    assert kinds["Conv"] == ir.DataType.FLOAT16 and kinds["Relu"] == ir.DataType.FLOAT16
    assert kinds["Pow"] == ir.DataType.FLOAT and kinds["ReduceMean"] == ir.DataType.FLOAT
    assert set(remainder.kept_fp32) == {n.name for n in model.graph
                                        if n.op_type in ("Pow", "ReduceMean")}
    resize = next(n for n in model.graph if n.op_type == "Resize")
    assert resize.inputs[2].dtype == ir.DataType.FLOAT or (
        resize.inputs[2].const_value.dtype == ir.DataType.FLOAT)  # C14: scales stay float32
    assert model.graph.inputs[0].dtype == ir.DataType.FLOAT
    assert model.graph.outputs[0].dtype == ir.DataType.FLOAT and model.graph.outputs[0].name == "out"
    got = make_session(model).run(None, feeds)[0]
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=2e-2, atol=2e-2)


def test_observed_overflow_keeps_the_node_fp32() -> None:
    g = _model()
    model = g.ir()
    relu = next(n for n in model.graph if n.op_type == "Relu")
    remainder = Float16Remainder({relu.outputs[0].name: (0.0, 1e5)})
    remainder(model)
    assert "65504" in remainder.kept_fp32[relu.name]
    assert relu.outputs[0].dtype == ir.DataType.FLOAT


def _quantized_input_model(scale: float, weight_channel_amax: float) -> GraphBuilder:
    """x -> Q/DQ -> Conv (int8 weight + DQ, one channel with tiny weights) -> out."""
    g = GraphBuilder("qdq_input", opset=19, seed=1)
    x = g.input("x", [1, 4, 6, 6])
    w = g.rng.normal(0, 0.1, size=(4, 4, 3, 3)).astype(np.float32)
    w[1] *= weight_channel_amax / np.abs(w[1]).max()
    scales = (np.abs(w.reshape(4, -1)).max(axis=1) / 127).astype(np.float32)
    ints = np.clip(np.rint(w / scales.reshape(4, 1, 1, 1)), -127, 127).astype(np.int8)
    wdq = g.node("DequantizeLinear", [g.const(ints, "w"), g.const(scales, "w_scale"),
                                      g.const(np.zeros(4, np.int8), "w_zp")], axis=0)
    y = g.node("Conv", [g.qdq(x, scale), wdq], kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    g.node("Relu", [y], out="out")
    g.output("out", [1, 4, 6, 6])
    return g


def _scale_of(node: ir.Node) -> np.ndarray:
    return np.asarray(node.inputs[1].const_value.numpy())


def test_a_float32_q_and_its_float16_dq_share_one_scale() -> None:
    # 0.1 / 127 is not a float16 value: the Q on the network input stays float32 while its DQ
    # writes float16, so both must carry the float16-exact scale or the pair disagrees.
    model = _quantized_input_model(0.1 / 127, 0.5).ir()
    Float16Remainder()(model)
    q = next(n for n in model.graph if n.op_type == "QuantizeLinear")
    dq = next(n for n in q.outputs[0].uses()).node
    assert _scale_of(q).dtype == np.float32 and _scale_of(dq).dtype == np.float16
    assert float(_scale_of(q)) == float(_scale_of(dq))


def test_a_tiny_weight_scale_stays_positive_and_weights_follow_it() -> None:
    # max|w| of 1e-6 gives a scale of 7.9e-9, which float16 rounds to 0, an invalid scale.
    g = _quantized_input_model(0.05, 1e-6)
    feeds = {"x": np.random.default_rng(0).normal(size=(1, 4, 6, 6)).astype(np.float32)}
    expected = g.run(feeds)[0]
    model = g.ir()
    Float16Remainder()(model)
    weight_dq = next(n for n in model.graph
                     if n.op_type == "DequantizeLinear" and n.inputs[0].const_value is not None)
    scales = _scale_of(weight_dq)
    assert scales.dtype == np.float16 and np.all(scales > 0)
    ints = weight_dq.inputs[0].const_value.numpy()
    assert np.abs(ints[1]).max() <= 127
    # The tiny channel's weights are re-rounded to the scale its DQ now carries.
    dequantized = ints[1].astype(np.float64) * float(scales[1])
    assert np.abs(dequantized).max() <= 1e-6 + float(scales[1])
    got = make_session(model).run(None, feeds)[0]
    np.testing.assert_allclose(got, expected, rtol=2e-2, atol=2e-2)


def test_a_weight_scale_rounds_down_so_each_channel_keeps_its_127() -> None:
    # 12.8 float16 subnormals: to nearest, the scale would round up to 13 and the channel's
    # largest integer fall to 125, off the max|w|/127 grid an implicit INT8 build derives.
    subnormal = float(np.finfo(np.float16).smallest_subnormal)
    model = _quantized_input_model(0.05, 127 * 12.8 * subnormal).ir()
    Float16Remainder()(model)
    weight_dq = next(n for n in model.graph
                     if n.op_type == "DequantizeLinear" and n.inputs[0].const_value is not None)
    scales = _scale_of(weight_dq).astype(np.float64)
    assert scales[1] == 12 * subnormal
    ints = weight_dq.inputs[0].const_value.numpy().reshape(4, -1)
    assert np.abs(ints).max(axis=1).tolist() == [127] * 4
    # The activation's Q/DQ scale still rounds to nearest.
    act_dq = next(n for n in model.graph
                  if n.op_type == "DequantizeLinear" and n.inputs[0].const_value is None)
    assert float(_scale_of(act_dq)) == float(np.float16(0.05))


def test_a_conv_kept_fp32_still_reads_its_dqs_and_feeds_its_q_directly() -> None:
    # conv1's output overflows FP16, so conv1 stays FP32: its input and weight DQs must then
    # write float32 (no Cast between DQ and conv, which would leave it float), and the Q of its
    # output must read it as float32 (no Cast between the conv and that Q).
    g = GraphBuilder("kept", opset=19, seed=2)
    x = g.input("x", [1, 4, 6, 6])
    y = g.conv(g.qdq(x, 0.02), 4, 4, name="conv1", weight="dq-only")
    z = g.conv(g.qdq(y, 0.5), 4, 4, name="conv2", weight="dq-only")
    g.node("Relu", [z], out="out")
    g.output("out", [1, 4, 6, 6])
    model = g.ir()
    conv1 = next(n for n in model.graph if n.name == "conv1")
    remainder = Float16Remainder({conv1.outputs[0].name: (-1e5, 1e5)})
    remainder(model)
    assert "conv1" in remainder.kept_fp32
    for value in conv1.inputs[:2]:
        producer = value.producer()
        assert producer is not None and producer.op_type == "DequantizeLinear"
        assert value.dtype == ir.DataType.FLOAT
    readers = [use.node for use in conv1.outputs[0].uses()]
    assert [r.op_type for r in readers] == ["QuantizeLinear"]
    assert readers[0].inputs[1].const_value.dtype == ir.DataType.FLOAT
    conv2 = next(n for n in model.graph if n.name == "conv2")
    assert conv2.outputs[0].dtype == ir.DataType.FLOAT16  # the rest still runs FP16
    assert conv2.inputs[0].producer().op_type == "DequantizeLinear"
    assert not any(n.op_type == "Cast" and n.inputs[0].producer() is not None
                   and n.inputs[0].producer().op_type == "DequantizeLinear" for n in model.graph)


def test_an_op_whose_schema_excludes_float16_stays_fp32_and_the_model_stays_valid() -> None:
    import onnx

    # YOLOv8's anchor decode: Range over float values computed from the input's shape.
    g = GraphBuilder("range", opset=19, seed=4)
    x = g.input("x", [1, 4, 6, 6])
    width = g.node("Cast", [g.node("Gather", [g.node("Shape", [x]), g.const(np.int64(3))])],
                   to=1)
    steps = g.node("Range", [g.const(np.float32(0.5)), width, g.const(np.float32(1.0))])
    g.node("Add", [g.node("Relu", [x]), steps], out="out")
    g.output("out", [1, 4, 6, 6])
    feeds = {"x": np.random.default_rng(0).normal(size=(1, 4, 6, 6)).astype(np.float32)}
    expected = g.run(feeds)[0]
    model = g.ir()
    remainder = Float16Remainder()
    remainder(model)
    range_node = next(n for n in model.graph if n.op_type == "Range")
    assert "schema" in remainder.kept_fp32[range_node.name]
    assert range_node.outputs[0].dtype == ir.DataType.FLOAT
    relu = next(n for n in model.graph if n.op_type == "Relu")
    assert relu.outputs[0].dtype == ir.DataType.FLOAT16
    proto = ir.serde.serialize_model(model)
    onnx.checker.check_model(proto, full_check=True)
    np.testing.assert_allclose(make_session(model).run(None, feeds)[0], expected, atol=2e-2)
