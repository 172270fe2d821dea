"""Depthwise input equalization: exact on the float model, more INT8 levels for narrow channels,
and only where TensorRT fuses the inserted Mul (judged against onnxruntime and the predictor)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx_ir as ir
import pytest

from qdqkit.core.numerics import make_session
from qdqkit.examples.graph import GraphBuilder
from qdqkit.passes.depthwise_equalize import DepthwiseEqualize, Equalization
from qdqkit.quantization import quantize
from qdqkit.quantization.equalize import MAX_FACTOR, channel_factors, equalization_candidates
from tests.quantization.float_models import calibration_batches
from tests.quantization.test_quantize import _snr_db


def _spread_block(producer: str = "conv") -> GraphBuilder:
    """x -> [conv 1x1 -> BN with gammas over 300x -> HardSwish] -> depthwise 3x3 -> BN -> ReLU ->
    conv 1x1: the depthwise input's channels span ranges as trained MobileNets' do.
    ``producer="concat"`` feeds the depthwise conv a Concat of two such convs instead, a tensor
    no conv epilogue writes."""
    g = GraphBuilder("spread", seed=5, opset=14)
    x = g.input("x", [1, 8, 16, 16])
    spread = np.geomspace(0.01, 3.0, 32)[g.rng.permutation(32)].astype(np.float32)
    zeros, ones = g.const(np.zeros(32, np.float32)), g.const(np.ones(32, np.float32))

    def pointwise(channels: slice) -> str:
        cout = channels.stop - channels.start
        y = g.conv(x, 8, cout, 1, weight="float", std=0.35)
        gamma = g.const(spread[channels])
        y = g.node("BatchNormalization", [y, gamma, g.const(np.zeros(cout, np.float32)),
                                          g.const(np.zeros(cout, np.float32)),
                                          g.const(np.ones(cout, np.float32))])
        return g.node("HardSwish", [y])

    y = pointwise(slice(0, 32)) if producer == "conv" else g.node(
        "Concat", [pointwise(slice(0, 16)), pointwise(slice(16, 32))], axis=1)
    y = g.conv(y, 32, 32, 3, group=32, weight="float", std=0.3)
    # The BN after the depthwise conv normalizes the channels again, as a trained one does: each
    # channel's own error reaches the output at full weight.
    y = g.node("Relu", [g.node("BatchNormalization", [y, g.const(1.0 / spread), zeros, zeros,
                                                      ones])])
    g.output(g.conv(y, 32, 16, 1, weight="float", std=0.2), [1, 16, 16, 16])
    return g


def test_factors_are_powers_of_two_capped_and_bounded_for_float16_scales() -> None:
    peaks = np.array([8.0, 1.0, 0.3, 0.0, 1e-6])
    factors = channel_factors(peaks, None)
    assert factors.tolist() == [1.0, 8.0, 16.0, 1.0, MAX_FACTOR]  # 26.7 -> 16; zeros stay 1
    # A channel whose weights are small keeps its weight scale a normal float16 (>= 2**-14).
    bounded = channel_factors(peaks, np.array([1.0, 1.0, 0.01, 1.0, 1.0]))
    assert bounded[2] == 1.0 and bounded[1] == 8.0
    assert np.all(np.log2(factors) == np.round(np.log2(factors)))


def test_the_rewrite_leaves_the_float_model_exactly_as_it_was() -> None:
    builder = _spread_block()
    model = builder.ir()
    depthwise = {n for n in model.graph if n.op_type == "Conv"}
    (value, readers), = equalization_candidates(model, depthwise)
    rng = np.random.default_rng(1)
    factors = np.exp2(rng.integers(0, 8, 32)).astype(np.float32)
    rewrite = DepthwiseEqualize([Equalization(value, readers, factors)])
    rewrite(model)
    assert [n.op_type for n in model.graph].count("Mul") == 1 and len(rewrite.applied) == 1
    feeds = calibration_batches(builder, 2, seed=3)
    reference = make_session(builder.proto().SerializeToString())
    rewritten = make_session(ir.serde.serialize_model(model).SerializeToString())
    for batch in feeds:
        np.testing.assert_array_equal(rewritten.run(None, batch)[0], reference.run(None, batch)[0])


@pytest.mark.parametrize("trt", ["10", "11"])
def test_quantize_gives_narrow_depthwise_channels_their_levels_at_no_engine_cost(trt: str) -> None:
    builder = _spread_block()
    batches, held = calibration_batches(builder, 16), calibration_batches(builder, 4, seed=9)
    plain = quantize(builder.proto(), batches, trt=trt, method="max", equalize=False,
                     keep_unpaid=True)
    even = quantize(builder.proto(), batches, trt=trt, method="max", keep_unpaid=True)
    (done,) = even.calibration["equalized"]
    assert done["channels_scaled"] >= 16 and done["largest_factor"] >= 16
    assert done["scaled"] in {t.tensor for t in even.tensors}  # the tensor its Q reads
    assert plain.calibration["equalized"] == [] and even.lint_errors == 0
    assert plain.model is not None and even.model is not None
    gain = _snr_db(builder, even.model, held) - _snr_db(builder, plain.model, held)
    assert gain > 12.0  # measured 24.9 dB -> 43.5 dB
    # The Mul joins the layer that writes the depthwise input: the same engine either way.
    assert even.engine.layers_by_precision == plain.engine.layers_by_precision
    assert even.engine.reformats == plain.engine.reformats


def test_a_mul_tensorrt_would_run_as_its_own_layer_is_not_inserted() -> None:
    builder = _spread_block(producer="concat")
    result = quantize(builder.proto(), calibration_batches(builder, 8), method="max",
                      keep_unpaid=True)
    assert result.calibration["equalized"] == []
    assert result.model is not None
    assert not any(n.op_type == "Mul" for n in result.model.graph)


def test_random_data_dla_and_per_tensor_weights_leave_the_model_alone() -> None:
    builder = _spread_block()
    for kwargs in ({"data": "random"}, {"data": calibration_batches(builder, 4), "target": "dla"},
                   {"data": calibration_batches(builder, 4), "per_tensor_weights": True}):
        data = kwargs.pop("data")
        result = quantize(builder.proto(), data, method="max", keep_unpaid=True, **kwargs)
        assert result.calibration["equalized"] == []


def test_the_cli_turns_it_off_and_the_report_records_it(tmp_path: Path) -> None:
    from qdqkit.cli import main

    builder = _spread_block()
    source = builder.save(tmp_path / "spread.onnx")
    np.save(tmp_path / "calib.npy", np.concatenate([b["x"] for b in calibration_batches(builder, 8)]))
    for flags, expected in (([], 1), (["--no-equalize"], 0)):
        out = tmp_path / f"q{len(flags)}.onnx"
        assert main(["quantize", str(source), "-o", str(out), "--calib",
                     str(tmp_path / "calib.npy"), "--keep-unpaid", "--json", *flags]) in (0, 1)
        report = json.loads(out.with_name(out.stem + ".quant.json").read_text())
        assert report["options"]["equalize"] is (not flags)
        assert len(report["calibration"]["equalized"]) == expected


def test_compare_pairs_the_equalized_convs_with_the_original_float_model(tmp_path: Path) -> None:
    """The float model has no twin of the Mul or of the divided weights: compare replays the
    rescale on it, so the depthwise conv and its weight are measured, not left unpaired."""
    from qdqkit.comparison import compare

    builder = _spread_block()
    source = builder.save(tmp_path / "spread.onnx")
    out = tmp_path / "q.onnx"
    quantize(source, calibration_batches(builder, 8), output=out, method="max", keep_unpaid=True)
    result = compare(source, out, calibration_batches(builder, 2, seed=7), what_if=0)
    depthwise = next(n for n in result.nodes if n.name == "conv10")
    assert depthwise.float_output is not None and depthwise.local is not None
    assert depthwise.weights and depthwise.weights[0].snr_db > 30.0  # w / f against w / f
    assert depthwise.arrival_snr_db is not None and np.isfinite(depthwise.arrival_snr_db)


def test_a_one_dimensional_depthwise_conv_gets_factors_of_its_own_rank() -> None:
    """A Conv1d reads (N, C, L): the factors are (1, C, 1), whatever shape inference knows."""
    g = GraphBuilder("spread_1d", seed=6, opset=14)
    x = g.input("x", [1, 8, 32])
    w = g.const((g.rng.normal(size=(16, 8, 1)) * 0.3).astype(np.float32))
    y = g.node("Conv", [x, w], kernel_shape=[1])
    spread = g.const(np.geomspace(0.01, 3.0, 16).reshape(16, 1).astype(np.float32))
    y = g.node("Relu", [g.node("Mul", [y, spread])])
    dw = g.const((g.rng.normal(size=(16, 1, 3)) * 0.3).astype(np.float32))
    g.output(g.node("Conv", [y, dw], kernel_shape=[3], pads=[1, 1], group=16), [1, 16, 32])
    model = g.ir()
    for value in (v for n in model.graph for v in n.outputs):
        value.shape = None  # nothing inferred
    convs = {n for n in model.graph if n.op_type == "Conv"}
    (value, readers), = equalization_candidates(model, convs)
    DepthwiseEqualize([Equalization(value, readers, np.exp2(np.arange(16) % 4).astype(
        np.float32))])(model)
    mul = next(n for n in model.graph if n.op_type == "Mul" and n.name.endswith("_equalize"))
    assert mul.inputs[1].const_value.numpy().shape == (1, 16, 1)
    feeds = {"x": np.random.default_rng(0).normal(size=(1, 8, 32)).astype(np.float32)}
    got = make_session(ir.serde.serialize_model(model).SerializeToString()).run(None, feeds)[0]
    np.testing.assert_array_equal(got, make_session(g.proto().SerializeToString()).run(
        None, feeds)[0])
