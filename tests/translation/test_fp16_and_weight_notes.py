"""The FP16 layer list holds only float layers; weight notes only where TensorRT changes weights;
onnxruntime's dynamic quantization is named and refused."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from qdqkit.core.errors import UnsupportedModelError
from qdqkit.examples.graph import GraphBuilder
from qdqkit.translation import TranslateOptions, TranslateResult, translate
from qdqkit.trt.calib_cache import read_calib_cache


def test_integer_shape_layers_are_not_pinned_to_fp16(tmp_path: Path) -> None:
    # An unscaled float tensor read by Shape and a Cast to int64 (as detectors compute output
    # sizes): the shape arithmetic downstream (Gather, Unsqueeze, Concat) is integer.
    g = GraphBuilder("shapes")
    x = g.input("x", [1, 4, 8, 8])
    y = g.node("Relu", [g.conv(g.qdq(x, name="x"), 4, 4, name="c")], name="relu")  # no scale
    shape = g.node("Shape", [y], name="shape")
    index = g.node("Constant", [], name="index",
                   value=numpy_helper.from_array(np.array(0, np.int64)))
    dim = g.node("Gather", [shape, index], name="gather")
    dims = g.node("Unsqueeze", [dim, g.const(np.array([0], np.int64))], name="unsqueeze")
    new_shape = g.node("Concat", [dims, g.const(np.array([-1], np.int64))], name="concat", axis=0)
    g.node("Cast", [y], name="to_int", out="as_int", to=TensorProto.INT64)
    g.node("Reshape", [y, new_shape], name="reshape", out="flat")
    g.output("flat")
    g.output("as_int", None, TensorProto.INT64)
    result = translate(g.save(tmp_path / "m.onnx"), tmp_path / "out")
    assert "relu" in result.fp16_nodes and "reshape" in result.fp16_nodes
    for integer in ("shape", "gather", "unsqueeze", "concat", "to_int", "index"):
        assert integer not in result.fp16_nodes


def _dq_only_conv(path: Path, weight: np.ndarray, scale: np.ndarray) -> Path:
    g = GraphBuilder("w")
    x = g.input("x", [1, weight.shape[1], 4, 4])
    w = g.dequantize(g.const(weight, "w_int8"), scale, np.zeros(len(scale), np.int8), axis=0,
                     name="w_dq")
    y = g.node("Conv", [g.qdq(x, name="x"), w], name="conv", kernel_shape=[1, 1])
    g.output(g.qdq(y, name="y"))
    return g.save(path)


def test_a_scale_that_requantizes_to_the_same_values_is_not_noted(tmp_path: Path) -> None:
    # Integers -1, 0, 1 at scale s: TensorRT's scale is s/127 and its integers 127x larger, but
    # the weight values are the same, so there is nothing to warn about.
    ints = np.array([[[[1]], [[0]], [[-1]]], [[[0]], [[1]], [[1]]]], np.int8)
    scale = np.array([0.05, 0.02], np.float32)
    result = translate(_dq_only_conv(tmp_path / "same.onnx", ints, scale), tmp_path / "out")
    assert result.weight_scale_mismatches == []


def test_a_scale_that_changes_the_weights_is_noted(tmp_path: Path) -> None:
    # A clipped weight (histogram calibration): max |q| is 127 but other values are not on
    # TensorRT's grid once it recomputes max|w|/127 from a channel whose max is 100 steps.
    ints = np.array([[[[100]], [[37]], [[-55]]], [[[127]], [[1]], [[-3]]]], np.int8)
    scale = np.array([0.05, 0.02], np.float32)
    result = translate(_dq_only_conv(tmp_path / "clip.onnx", ints, scale), tmp_path / "out")
    assert [m.weight for m in result.weight_scale_mismatches] == ["w_int8"]
    assert 0 < result.weight_scale_mismatches[0].max_relative_difference < 0.01


def test_dynamic_quantization_is_named_and_refused(tmp_path: Path) -> None:
    # onnxruntime quantize_dynamic's spelling: DynamicQuantizeLinear -> MatMulInteger -> Cast.
    g = GraphBuilder("dyn")
    x = g.input("x", [1, 4])
    g.nodes.append(helper.make_node("DynamicQuantizeLinear", [x], ["xq", "xs", "xz"], name="dql"))
    w = g.const(np.ones((4, 4), np.uint8), "w")
    g.node("MatMulInteger", ["xq", w, "xz"], name="mm", out="acc")
    g.node("Cast", ["acc"], name="cast", out="y", to=TensorProto.FLOAT)
    g.output("y")
    with pytest.raises(UnsupportedModelError,
                       match=r"dynamic quantization \(DynamicQuantizeLinear, MatMulInteger"):
        translate(g.save(tmp_path / "dyn.onnx"), tmp_path / "out")


def test_a_leaky_relu_in_fp16_gets_a_measured_hint(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    from qdqkit.cli import main

    # The LeakyRelu's output has no Q, so the second conv reads an unscaled tensor and runs FP16;
    # copying the scale across the LeakyRelu would make it INT8.
    g = GraphBuilder("leaky")
    x = g.input("x", [1, 4, 8, 8])
    y = g.conv(g.qdq(x, name="x"), 4, 4, name="c1")
    y = g.node("LeakyRelu", [g.qdq(y, name="c1_out")], name="leaky", alpha=0.1)
    y = g.conv(y, 4, 4, name="c2")
    g.output(g.qdq(y, name="y"))
    path = g.save(tmp_path / "leaky.onnx")
    result = translate(path, tmp_path / "out")
    assert result.fp16_nodes == ["c2"]
    hint = result.propagation_hint
    assert hint is not None and hint.ops == ["LeakyRelu"]
    assert (hint.fp16_before, hint.fp16_after) == (1, 0)
    assert hint.option == "--addtl_ops_to_infer_adjacent_scales LeakyRelu"
    assert main(["translate", "-i", str(path), "-o", str(tmp_path / "cli")]) == 0
    text = capsys.readouterr().out
    assert "hint: the 1 FP16 layers include LeakyRelu" in text
    assert f"trtexec --onnx={tmp_path / 'cli' / 'leaky_noqdq.onnx'}" in text


def _cached_scales(result: TranslateResult) -> dict[str, float]:
    return dict(read_calib_cache(result.outputs.calib_cache).scales)


def test_a_concat_input_only_the_concat_reads_takes_its_q_scale(tmp_path: Path) -> None:
    from qdqkit.verification import verify

    # Two convs write float into a Concat whose output alone has a Q (TensorRT moves it in front
    # of the Concat in an explicit build). Each input is a slice of the output, so it takes the
    # output's scale by default: left unscaled it would run FP16 and be rounded before the Q.
    # An Identity in between is a copy and carries the scale across.
    g = GraphBuilder("concat_q", seed=0)
    x = g.qdq(g.input("x", [1, 16, 8, 8]), 0.02, name="x")
    a = g.node("Relu", [g.conv(x, 16, 16, name="ca")], name="ra")
    rb = g.node("Relu", [g.conv(x, 16, 16, name="cb")], name="rb")
    b = g.node("Identity", [rb], name="copy")
    joined = g.node("Concat", [a, b], name="cat", axis=1)
    y = g.conv(g.qdq(joined, 0.05, name="cat_out"), 32, 16, name="cc")
    g.output(g.qdq(y, 0.05, name="y"))
    path = g.save(tmp_path / "concat_q.onnx")
    plain = translate(path, tmp_path / "plain")
    assert plain.propagation_hint is None and not plain.fp16_nodes
    scales = _cached_scales(plain)
    assert [scales[tensor] for tensor in (a, b, rb)] == [pytest.approx(0.05)] * 3
    assert verify(path, tmp_path / "plain").min_snr_db == float("inf")


def test_a_concat_input_read_elsewhere_gets_the_concat_hint_and_the_flag(tmp_path: Path) -> None:
    # The same Concat, but one input is also a network output read in float: its scale would
    # quantize that output too, so only --infer_concat_scales (the reference's rule) gives it.
    g = GraphBuilder("concat_shared", seed=0)
    x = g.qdq(g.input("x", [1, 16, 8, 8]), 0.02, name="x")
    a = g.node("Relu", [g.conv(x, 16, 16, name="ca")], name="ra")
    b = g.node("Relu", [g.conv(x, 16, 16, name="cb")], name="rb")
    g.node("Sigmoid", [b], name="side", out="side")
    joined = g.node("Concat", [a, b], name="cat", axis=1)
    y = g.conv(g.qdq(joined, 0.05, name="cat_out"), 32, 16, name="cc")
    g.output(g.qdq(y, 0.05, name="y"))
    g.output("side")
    path = g.save(tmp_path / "concat_shared.onnx")
    plain = translate(path, tmp_path / "plain")
    assert a in _cached_scales(plain) and b not in _cached_scales(plain)
    hint = plain.propagation_hint
    assert hint is not None and hint.ops == ["Concat"] and hint.option == "--infer_concat_scales"
    assert hint.fp16_after < hint.fp16_before
    inferred = translate(path, tmp_path / "inferred", TranslateOptions(infer_concat_scales=True))
    assert inferred.propagation_hint is None and len(inferred.fp16_nodes) == hint.fp16_after
    assert _cached_scales(inferred)[b] == pytest.approx(0.05)


@pytest.mark.parametrize("scale", [float("nan"), -0.05, 0.0])
def test_a_bad_scale_is_named_as_bad_not_as_different(tmp_path: Path, scale: float) -> None:
    g = GraphBuilder("bad")
    x = g.input("x", [1, 4])
    g.output(g.qdq(x, scale, name="x"))
    with pytest.raises(UnsupportedModelError, match="must be finite and positive"):
        translate(g.save(tmp_path / "bad.onnx"), tmp_path / "out")


def test_onnxruntime_errors_keep_their_whole_sentence() -> None:
    from qdqkit.core import numerics
    from qdqkit.core.errors import QdqkitError

    g = GraphBuilder("shape")
    x = g.input("x", [1, 4])
    g.node("Relu", [x], name="r", out="y")
    g.output("y")
    session = numerics.make_session(g.proto().SerializeToString())
    with pytest.raises(QdqkitError, match=r"Expected: 4") as caught:
        numerics.run(session, {"x": np.zeros((1, 5), np.float32)})
    assert "\n" not in str(caught.value)


def test_a_layer_reading_no_quantized_activation_keeps_the_dequantized_weight(
        tmp_path: Path) -> None:
    # ModelOpt and onnxruntime quantize a Conv's weight even when its input stays float (here it
    # follows an unquantized Mul): that layer runs FP16, where TensorRT uses the weight as given,
    # so the translation stores what the Q/DQ pair computes. A Conv reading a quantized input
    # keeps its float weight, which TensorRT requantizes itself.
    from onnx import numpy_helper as nh

    from qdqkit.verification import verify

    g = GraphBuilder("fp16_conv_weight")
    x = g.input("x", [1, 4, 8, 8])
    scaled = g.node("Mul", [x, g.const(np.array(0.5, np.float32), "half")], name="mul")
    y = g.conv(scaled, 4, 4, name="fp16_conv")
    y = g.conv(g.qdq(g.node("Relu", [y], name="relu"), 0.02, name="act"), 4, 4, name="int8_conv")
    g.output(g.qdq(y, 0.05, name="out"))
    source = g.save(tmp_path / "m.onnx")
    translate(source, tmp_path / "out")

    inits = {t.name: nh.to_array(t) for t in g.graph().initializer}
    translated = onnx.load(tmp_path / "out" / "m_noqdq.onnx").graph
    stored = {t.name: nh.to_array(t) for t in translated.initializer}
    weight_of = {n.name: stored[n.input[1]] for n in translated.node if n.op_type == "Conv"}
    for conv, float_weight in (("fp16_conv", False), ("int8_conv", True)):
        w, scale = inits[f"{conv}.weight"], inits[f"{conv}.weight_scale"].reshape(-1, 1, 1, 1)
        dequantized = (np.clip(np.rint(w / scale), -128, 127) * scale).astype(np.float32)
        assert not np.array_equal(w, dequantized)
        np.testing.assert_array_equal(weight_of[conv], w if float_weight else dequantized)
    result = verify(source, tmp_path / "out")
    assert result.passed and result.min_snr_db > 100


def test_quantized_scalar_constants_stay_scalars(tmp_path: Path) -> None:
    # ModelOpt's --target_dla quantizes the scalars of a YOLO head's anchor grid (Range start
    # and delta), with a Cast after each DQ. Folding the Cast must keep them 0-d: Range takes
    # only scalars, and onnxruntime refuses the model otherwise.
    import onnxruntime as ort

    g = GraphBuilder("grid", opset=13)
    x = g.input("x", [8])
    ends = []
    for name, value in (("start", 0.0), ("delta", 1.0)):
        dq = g.qdq(g.const(np.array(value, np.float32), name), 1.0 / 127, name=f"{name}_q")
        ends.append(g.node("Cast", [dq], name=f"{name}_cast", to=TensorProto.FLOAT))
    limit = g.const(np.array(8.0, np.float32), "limit")
    grid = g.node("Range", [ends[0], limit, ends[1]], name="range")
    g.output(g.node("Add", [g.qdq(x, 0.1, name="x_q"), grid], name="add", out="y"), [8])
    translate(g.save(tmp_path / "grid.onnx"), tmp_path / "out")
    translated = onnx.load(tmp_path / "out" / "grid_noqdq.onnx")
    (range_node,) = [n for n in translated.graph.node if n.op_type == "Range"]
    stored = {t.name: t for t in translated.graph.initializer}
    assert all(list(stored[name].dims) == [] for name in range_node.input)
    session = ort.InferenceSession(translated.SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    values = np.linspace(-1, 1, 8, dtype=np.float32)
    np.testing.assert_allclose(session.run(None, {"x": values})[0], values + np.arange(8))


@pytest.mark.parametrize("coarse", [False, True])
def test_a_weight_already_on_tensorrts_grid_is_stored_as_quantized(
        tmp_path: Path, coarse: bool) -> None:
    # ModelOpt's default output stores scales as float16: max|w|/127 rounded, so its Q/DQ values
    # differ from TensorRT's requantization of the float weight by a step here and there. Those
    # values are on TensorRT's grid (each channel's largest integer is 127), so storing them
    # makes the engine compute the Q/DQ model's weight exactly. A weight at a coarser scale (its
    # largest integer 100) is not on that grid: it keeps its float weight and its note.
    from qdqkit.verification import verify

    rng = np.random.default_rng(7)
    w = rng.normal(0, 0.1, (16, 8, 3, 3)).astype(np.float32)
    amax = np.abs(w.reshape(16, -1)).max(axis=1)
    scale = (amax / (100 if coarse else 127)).astype(np.float16).astype(np.float32)
    g = GraphBuilder("fp16_scales")
    x = g.input("x", [1, 8, 8, 8])
    params = [g.const(scale, "w_scale"), g.const(np.zeros(16, np.int8), "w_zp")]
    wq = g.node("QuantizeLinear", [g.const(w, "w"), *params], axis=0, name="w_Q")
    wdq = g.node("DequantizeLinear", [wq, *params], axis=0, name="w_DQ")
    y = g.node("Conv", [g.qdq(x, 0.02, name="x"), wdq], name="conv", pads=[1, 1, 1, 1])
    g.output(g.qdq(y, 0.05, name="y"))
    source = g.save(tmp_path / "m.onnx")
    result = translate(source, tmp_path / "out")
    translated = onnx.load(tmp_path / "out" / "m_noqdq.onnx").graph
    (conv,) = [n for n in translated.node if n.op_type == "Conv"]
    stored = {t.name: numpy_helper.to_array(t) for t in translated.initializer}[conv.input[1]]
    dequantized = np.clip(np.rint(w / scale.reshape(-1, 1, 1, 1)), -128, 127) \
        * scale.reshape(-1, 1, 1, 1)
    if coarse:
        np.testing.assert_array_equal(stored, w)
        assert [m.weight for m in result.weight_scale_mismatches] == ["w"]
    else:
        np.testing.assert_array_equal(stored, dequantized.astype(np.float32))
        assert result.weight_scale_mismatches == []
        assert verify(source, tmp_path / "out").min_snr_db == float("inf")


def test_a_conv_with_a_quantized_input_and_a_float_weight_is_pinned_to_fp16(
        tmp_path: Path) -> None:
    # ModelOpt left one conv of the PP-OCRv6 detector so: the Q/DQ model (and an explicit build)
    # runs it float with its float weight. Implicit INT8 would run it INT8, its input having a
    # scale, with the weight requantized; pinned to FP16 it computes what the Q/DQ model does.
    from qdqkit.verification import verify

    g = GraphBuilder("half_quantized")
    x = g.input("x", [1, 8, 8, 8])
    y = g.conv(g.qdq(x, 0.02, name="x"), 8, 16, weight="float", name="half")
    y = g.conv(g.qdq(g.node("Relu", [y], name="relu"), 0.05, name="act"), 16, 16, name="full")
    g.output(g.qdq(y, 0.05, name="y"))
    source = g.save(tmp_path / "m.onnx")
    result = translate(source, tmp_path / "out")
    assert "half" in result.fp16_nodes and "full" not in result.fp16_nodes
    checked = verify(source, tmp_path / "out")
    assert checked.passed and checked.min_snr_db > 100
