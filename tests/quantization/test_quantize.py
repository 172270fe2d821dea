"""qdqkit.quantize end to end: numerics against the float model, files, refusals, options."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from qdqkit.core.errors import QdqkitError
from qdqkit.core.numerics import make_session
from qdqkit.core.qdq import is_dequantize, is_quantize
from qdqkit.core.upcast import upcast_float16
from qdqkit.examples.graph import GraphBuilder
from qdqkit.quantization import quantize
from tests.models import windowed_audio_model
from tests.quantization.float_models import (
    calibration_batches,
    mobilenet,
    resnet,
    transformer,
    yolo,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"


def _snr_db(builder: GraphBuilder, model: ir.Model, batches: list[dict]) -> float:
    """Output SNR of ``model`` against the float model, fp16 upcast as ``verify`` does."""
    copy = ir.from_proto(ir.serde.serialize_model(model))
    upcast_float16(copy)
    reference = make_session(builder.proto().SerializeToString())
    test = make_session(copy)
    signal = noise = 0.0
    for feeds in batches:
        for a, b in zip(reference.run(None, feeds), test.run(None, feeds), strict=True):
            signal += float((a.astype(np.float64) ** 2).sum())
            noise += float(((a.astype(np.float64) - b) ** 2).sum())
    return 10 * np.log10(signal / noise)


@pytest.mark.parametrize("family,floor_db", [
    (resnet, 30.0), (yolo, 40.0), (mobilenet, 28.0), (transformer, 28.0)])
@pytest.mark.parametrize("trt", ["10", "11"])
def test_quantized_model_stays_close_to_float(family, floor_db: float, trt: str) -> None:  # type: ignore[no-untyped-def]
    builder = family()
    # The block is too small for INT8 to pay on a GPU (the cost model keeps it float): its INT8
    # numerics are judged with every region kept.
    result = quantize(builder.proto(), calibration_batches(builder, 16), trt=trt,
                      keep_unpaid=family is transformer)
    assert result.model is not None
    qdq = sum(1 for n in result.model.graph if is_quantize(n))
    assert qdq > 0
    # Held-out samples from the calibration distribution.
    assert _snr_db(builder, result.model, calibration_batches(builder, 4, seed=9)) > floor_db


def test_trt11_remainder_is_fp16_and_trt10_keeps_fp32() -> None:
    builder = resnet()
    fp16 = quantize(builder.proto(), calibration_batches(builder, 4), trt="11").model
    fp32 = quantize(builder.proto(), calibration_batches(builder, 4), trt="10").model
    assert fp16 is not None and fp32 is not None
    gemm = next(n for n in fp16.graph if n.op_type == "Gemm")
    assert gemm.outputs[0].dtype == ir.DataType.FLOAT16
    assert fp16.graph.outputs[0].dtype == ir.DataType.FLOAT  # network I/O keeps float32
    assert fp16.opset_imports[""] >= 19
    assert next(n for n in fp32.graph if n.op_type == "Gemm").outputs[0].dtype == ir.DataType.FLOAT
    assert fp16.graph.inputs[0].dtype == ir.DataType.FLOAT


def test_overflowing_node_stays_fp32_and_is_listed() -> None:
    g = GraphBuilder("big", seed=1)
    x = g.input("x", [1, 16, 8, 8])
    y = g.conv(x, 16, 16, weight="float", name="c1")
    # Factors that vary over space (in form): a per-channel one would fold into c1's weights.
    big = g.node("Mul", [y, g.const(np.full((1, 1, 8, 8), 1e6, np.float32))], name="scale_up")
    small = g.node("Mul", [big, g.const(np.full((1, 1, 8, 8), 1e-6, np.float32))], name="scale_down")
    g.conv(small, 16, 16, weight="float", name="c2")
    g.output(g.nodes[-1].output[0], [1, 16, 8, 8])
    result = quantize(g.proto(), calibration_batches(g, 4), trt="11")
    assert "scale_up" in result.fp32_nodes and "65504" in result.fp32_nodes["scale_up"]
    assert result.model is not None
    node = next(n for n in result.model.graph if n.name == "scale_up")
    assert node.outputs[0].dtype == ir.DataType.FLOAT
    assert _snr_db(g, result.model, calibration_batches(g, 2, seed=3)) > 25


def test_writes_model_and_report_atomically_and_leaves_input_alone(tmp_path: Path) -> None:
    builder = yolo()
    source = builder.save(tmp_path / "yolo.onnx")
    digest = hashlib.sha256(source.read_bytes()).hexdigest()
    np.save(tmp_path / "calib.npy", np.concatenate(
        [b["images"] for b in calibration_batches(builder, 6)]))
    out = tmp_path / "out" / "yolo_int8.onnx"
    out.parent.mkdir()
    result = quantize(source, tmp_path / "calib.npy", output=out, method="mse")
    assert hashlib.sha256(source.read_bytes()).hexdigest() == digest
    assert sorted(p.name for p in out.parent.iterdir()) == ["yolo_int8.onnx",
                                                            "yolo_int8.quant.json"]
    report = json.loads((out.parent / "yolo_int8.quant.json").read_text())
    assert report["format"] == "qdqkit.quant/1"
    assert report["options"]["method"] == "mse" and report["calibration"]["samples"] == 6
    tensor = report["tensors"][0]
    assert set(tensor) >= {"tensor", "scale", "method", "observed_range", "clipped_fraction"}
    assert tensor["scale"] == pytest.approx(tensor["amax"] / 127)
    dfl = next(w for w in report["weighted"] if w["node"] == "dfl")
    assert dfl["quantized"] is False and "Softmax" in dfl["why_not"]
    assert result.trtexec == f"trtexec --onnx={out}"
    saved = onnx.load(out)
    onnx.checker.check_model(saved)
    meta = {p.key: p.value for p in saved.metadata_props}
    assert json.loads(meta["qdqkit.quantize"])["calibration"]["random"] is False
    # Deterministic: the same inputs give the same bytes.
    again = tmp_path / "again.onnx"
    quantize(source, tmp_path / "calib.npy", output=again, method="mse")
    assert again.read_bytes() == out.read_bytes()
    def named_apart(path: Path) -> dict:
        data = json.loads(path.read_text())
        return {k: v for k, v in data.items() if k not in ("output", "report", "trtexec")}

    assert named_apart(tmp_path / "again.quant.json") == named_apart(
        out.parent / "yolo_int8.quant.json")
    # Where the time went: in --json, never in the report file, which stays deterministic.
    phases = result.to_json()["phases"]
    assert list(phases) == ["load", "plan", "equalize", "calibration session",
                            "calibration passes", "settle", "lint", "write"]
    assert all(v >= 0 for v in phases.values()) and sum(phases.values()) <= result.seconds + 0.01
    assert phases["calibration session"] > 0 and "phases" not in report


def test_scales_do_not_depend_on_batch_size_or_order(tmp_path: Path) -> None:
    builder = mobilenet()
    data = np.concatenate([b["images"] for b in calibration_batches(builder, 8)])
    first = quantize(builder.proto(), [{"images": data[i:i + 1]} for i in range(8)],
                     method="entropy")
    shuffled = quantize(builder.proto(), [{"images": data[i:i + 1]} for i in (7, 3, 5, 0, 2, 6, 1, 4)],
                        method="entropy")
    assert [t.scale for t in first.tensors] == [t.scale for t in shuffled.tensors]
    g = resnet(batch="N")
    data = np.concatenate([b["images"] for b in calibration_batches(g, 8)])
    one = quantize(g.proto(), [{"images": data[i:i + 1]} for i in range(8)], method="percentile")
    four = quantize(g.proto(), [{"images": data[i:i + 4]} for i in (0, 4)], method="percentile")
    assert [t.scale for t in one.tensors] == [t.scale for t in four.tensors]


def test_refuses_already_quantized_models() -> None:
    with pytest.raises(QdqkitError, match=r"already quantized.*lint.*fix"):
        quantize(FIXTURES / "models" / "polygraphy_qdq_conv.onnx", "random")
    g = GraphBuilder("int", seed=0)
    x = g.input("x", [1, 1, 4, 4], dtype=onnx.TensorProto.UINT8)
    g.node("ConvInteger", [x, g.const(np.ones((1, 1, 1, 1), np.uint8))], out="y")
    g.output("y", [1, 1, 4, 4], dtype=onnx.TensorProto.INT32)
    with pytest.raises(QdqkitError, match="ConvInteger"):
        quantize(g.proto(), "random")


def test_old_opset_is_converted_not_relabelled() -> None:
    builder = GraphBuilder("old", opset=11, seed=0)
    x = builder.input("x", [1, 16, 8, 8])
    y = builder.node("Relu", [builder.conv(x, 16, 16, weight="float")])
    builder.conv(y, 16, 16, weight="float")
    builder.output(builder.nodes[-1].output[0], [1, 16, 8, 8])
    result = quantize(builder.proto(), calibration_batches(builder, 2), trt="10")
    assert result.model is not None and result.model.opset_imports[""] >= 13
    assert any(is_dequantize(n) for n in result.model.graph)


def test_old_opset_that_cannot_convert_is_refused_naming_the_op(tmp_path: Path) -> None:
    # ImageScaler (opset <= 9, gone since; old model-zoo detectors carry it) has no conversion
    builder = GraphBuilder("old", opset=8, seed=0)
    x = builder.input("x", [1, 3, 8, 8])
    scaled = builder.node("ImageScaler", [x], name="preprocess", scale=1.0, bias=[0.0, 0.0, 0.0])
    builder.output(builder.conv(scaled, 3, 16, weight="float"), [1, 16, 8, 8])
    source = tmp_path / "old.onnx"
    onnx.save(builder.proto(), str(source))
    before = source.read_bytes()
    output = tmp_path / "out.onnx"
    with pytest.raises(QdqkitError) as caught:
        quantize(str(source), "random", output=str(output), calib_limit=1)
    message = str(caught.value)
    assert "opset 8 cannot be converted to 13" in message
    assert "ImageScaler node 'preprocess'" in message and "Assertion" not in message
    assert "\n" not in message
    assert not output.exists() and not output.with_suffix(".quant.json").exists()
    assert source.read_bytes() == before


def test_random_calibration_is_never_silent() -> None:
    builder = resnet()
    result = quantize(builder.proto(), "random", calib_limit=2)
    assert result.calibration["random"] is True
    assert any("random data" in w for w in result.warnings)
    assert result.model is not None
    assert "random" in result.model.metadata_props["qdqkit.calibration"]


def test_random_data_names_the_dimensions_it_guessed_but_not_a_batch_axis() -> None:
    # A recurrent state batched on axis 1 ([2, batch, 16]): random data gives that axis one
    # sample, so only the sequence length is a guess worth a warning.
    g = GraphBuilder("stateful", seed=0)
    x = g.input("x", ["batch", "length", 16])
    state = g.input("state", [2, "batch", 16])
    y = g.node("MatMul", [x, g.const(g.rng.normal(0, 0.1, (16, 16)).astype(np.float32))])
    s = g.node("ReduceSum", [state, g.const(np.array([0], np.int64))], keepdims=0)
    g.node("Add", [y, g.node("Unsqueeze", [s, g.const(np.array([1], np.int64))])], out="out")
    g.output("out", ["batch", "length", 16])
    result = quantize(g.proto(), "random", calib_limit=2, method="max")
    guessed = [w for w in result.warnings if "guessed the symbolic dimensions" in w]
    assert len(guessed) == 1 and "'x'[1] length = 32" in guessed[0], result.warnings
    assert "state" not in guessed[0] and "'x'[0]" not in guessed[0]


def test_random_data_that_guessed_a_length_the_model_cannot_run_says_so(
        tmp_path: Path) -> None:
    # 32 samples do not fill the 64-sample window: onnxruntime's own message alone would not
    # say that the length was a guess, nor what to give instead.
    source, output = tmp_path / "window.onnx", tmp_path / "out.onnx"
    onnx.save(windowed_audio_model(), source)
    with pytest.raises(QdqkitError) as caught:
        quantize(str(source), "random", output=str(output), calib_limit=2, method="max")
    message = str(caught.value)
    assert "onnxruntime" in message and "'wave'[1] samples = 32" in message, message
    assert "--shapes" in message and "\n" not in message
    assert not output.exists()
    # With the shape given there is nothing to guess, and the model runs.
    result = quantize(str(source), "random", shapes={"wave": [1, 1024]}, calib_limit=2,
                      method="max")
    assert result.judged_shapes == {"wave": [1, 1024]}
    assert not any("guessed" in w for w in result.warnings)


def test_plugin_nodes_stay_float_and_the_rest_is_calibrated() -> None:
    g = GraphBuilder("plugin", seed=0)
    g.use_domain("trt.plugins", 1)
    x = g.input("x", [1, 16, 8, 8])
    y = g.node("Relu", [g.conv(x, 16, 16, weight="float", name="c1")])
    y = g.conv(y, 16, 16, weight="float", name="c2")
    g.nodes.append(onnx.helper.make_node("EfficientNMS_TRT", [y], ["nms"], domain="trt.plugins",
                                         name="nms"))
    g.output("nms", [1, 16, 8, 8])
    proto = g.proto()
    # onnxruntime cannot run it, so calibration feeds only the part before it.
    result = quantize(proto, [{"x": np.random.default_rng(0).normal(size=(1, 16, 8, 8))
                               .astype(np.float32)}], trt="10")
    assert list(result.float_nodes) == ["nms"] and "plugin" in result.float_nodes["nms"]
    assert all(w.quantized for w in result.weighted)


@pytest.mark.parametrize("case,message", [
    ("names", "has arrays for|no array for"),
    ("nan", "NaN"),
    ("empty", "no .npy, .npz or image files"),
    ("shape", "axis 1 differs"),
])
def test_bad_data_is_one_line_and_writes_nothing(tmp_path: Path, case: str, message: str) -> None:
    builder = resnet()
    source = builder.save(tmp_path / "m.onnx")
    data: Path
    if case == "names":
        data = tmp_path / "d.npz"
        np.savez(data, wrong=np.zeros((2, 3, 32, 32), np.float32))
    elif case == "nan":
        data = tmp_path / "d.npy"
        np.save(data, np.full((2, 3, 32, 32), np.nan, np.float32))
    elif case == "empty":
        data = tmp_path / "empty"
        data.mkdir()
    else:
        data = tmp_path / "d.npy"
        np.save(data, np.zeros((2, 4, 32, 32), np.float32))
    out = tmp_path / "out.onnx"
    with pytest.raises(QdqkitError, match=message) as info:
        quantize(source, data, output=out)
    assert "\n" not in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir() if p.suffix in (".onnx", ".json")) == [
        "m.onnx"]


def test_nan_inside_the_network_names_the_tensor(tmp_path: Path) -> None:
    g = GraphBuilder("log", seed=0)
    x = g.input("x", [1, 16, 4, 4])
    y = g.node("Log", [x], name="log", out="logged")
    g.conv(y, 16, 16, weight="float")
    g.output(g.nodes[-1].output[0], [1, 16, 4, 4])
    with pytest.raises(QdqkitError, match=r"'logged'.*NaN"):
        quantize(g.proto(), [{"x": -np.ones((1, 16, 4, 4), np.float32)}], trt="10")


def test_image_folder_with_preprocessing(tmp_path: Path) -> None:
    pytest.importorskip("PIL")
    from qdqkit.core.data_specs import parse_preprocess

    builder = resnet()
    images = FIXTURES / "images"
    spec = parse_preprocess("size=32x32,mean=0.485/0.456/0.406,std=0.229/0.224/0.225")
    result = quantize(builder.proto(), images, preprocess=spec, trt="10")
    assert result.calibration["samples"] == 2 and not result.calibration["random"]


@pytest.mark.parametrize("trt", ["10", "11"])
def test_per_tensor_weights_use_one_scale(trt: str) -> None:
    """With TensorRT 11's FP16 remainder each 0-d weight scale is rounded down to float16 too."""
    builder = resnet()
    model = quantize(builder.proto(), calibration_batches(builder, 2), trt=trt,
                     per_tensor_weights=True).model
    assert model is not None
    conv = next(n for n in model.graph if n.op_type == "Conv")
    dq = conv.inputs[1].producer()
    assert dq is not None and is_dequantize(dq) and dq.inputs[1].const_value.numpy().ndim == 0


def test_external_data_and_the_large_model_path(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import qdqkit.core.activations as activations

    builder = resnet()
    source = tmp_path / "m.onnx"
    onnx.save(builder.proto(), source, save_as_external_data=True,
              all_tensors_to_one_file=True, location="m.data", size_threshold=0)
    batches = calibration_batches(builder, 2)
    whole = quantize(source, batches, trt="10", output=tmp_path / "q.onnx")
    assert whole.lint_errors == 0 and (tmp_path / "q.onnx").exists()
    # Beyond protobuf's 2 GB the calibration model is saved with external data and run by path.
    monkeypatch.setattr(activations, "PROTOBUF_LIMIT_BYTES", 1000)
    large = quantize(source, batches, trt="10")
    assert [t.scale for t in large.tensors] == [t.scale for t in whole.tensors]


def test_a_numpy_forward_lets_calibration_pass_a_plugin() -> None:
    g = GraphBuilder("hosted", seed=0)
    g.use_domain("trt.plugins", 1)
    x = g.input("x", [1, 16, 8, 8])
    y = g.node("Relu", [g.conv(x, 16, 16, weight="float", name="c1")], out="before")
    g.nodes.append(onnx.helper.make_node("Double", [y], ["after"], domain="trt.plugins",
                                         name="double", factor=2.0))
    g.conv("after", 16, 16, weight="float", name="c2")
    g.output(g.nodes[-1].output[0], [1, 16, 8, 8])
    batches = calibration_batches(g, 3)
    without = quantize(g.proto(), batches, trt="10", method="max")
    assert [w.quantized for w in without.weighted] == [True, False]  # c2 is after the plugin
    calls = []

    def double(x: np.ndarray, factor: float) -> np.ndarray:
        calls.append(x.shape)
        return x * factor

    hosted = quantize(g.proto(), batches, trt="10", method="max", custom_ops={"Double": double},
                      keep_unpaid=True)  # c2's Q after the plugin cannot fuse: it would not pay
    assert len(calls) == 3 and all(w.quantized for w in hosted.weighted)
    assert "numpy forward" in hosted.float_nodes["double"]
    from qdqkit.core.activations import ActivationRunner

    runner = ActivationRunner(g.proto(), ["before"])
    before = max(float(np.abs(out["before"]).max()) for out in runner.run(batches))
    scales = {t.tensor: t.scale for t in hosted.tensors}
    assert scales["after"] == pytest.approx(2 * before / 127, rel=1e-6)


def test_smooth_quant_recovers_outlier_channels() -> None:
    from onnx import numpy_helper

    builder = transformer()
    proto = builder.proto()
    for init in proto.graph.initializer:  # a few outlier channels, as trained LayerNorms have
        array = numpy_helper.to_array(init)
        if array.shape == (64,) and np.all(array == 1):
            array = array.copy()
            array[[3, 17, 40]] = 30.0
            init.CopyFrom(numpy_helper.from_array(array.astype(np.float32), init.name))

    class Outliers(GraphBuilder):
        def proto(self) -> onnx.ModelProto:
            return proto

    reference = Outliers()
    batches, held = calibration_batches(builder, 16), calibration_batches(builder, 4, seed=9)
    plain = quantize(proto, batches, trt="10", method="max", keep_unpaid=True)
    smoothed = quantize(proto, batches, trt="10", method="max", smooth_quant=0.5,
                        keep_unpaid=True)
    entries = smoothed.calibration["smoothed"]
    # The two LayerNorms exactly; the attention projection's and the GELU's outputs by a Mul.
    assert [e["explicit"] for e in entries] == [False, False, True, True]
    assert smoothed.lint_errors == 0
    assert smoothed.model is not None and plain.model is not None
    gain = _snr_db(reference, smoothed.model, held) - _snr_db(reference, plain.model, held)
    assert gain > 5.0  # measured 22.2 dB -> 31.6 dB
    assert not any("smooth" in w for w in smoothed.warnings)


def test_smooth_quant_rescales_a_post_layernorm_block_in_front_of_its_matmul() -> None:
    """In a post-LayerNorm block (BERT) the LayerNorm output feeds the MatMul and the residual
    Add: rescaling the LayerNorm would change the residual, so the factors go into a Mul in
    front of the MatMul alone, powers of two so the float model computes the same; the outlier
    channels then cost the output far less."""
    from qdqkit.core.constants import constant_array

    g = GraphBuilder("post_ln", seed=3, opset=17)
    x = g.input("x", [1, 16, 64])
    gamma = np.ones(64, np.float32)
    gamma[[5, 40]] = 40.0  # outlier channels, as trained LayerNorms have
    ln = g.node("LayerNormalization", [x, g.const(gamma), g.const(np.zeros(64, np.float32))],
                axis=-1, out="ln")
    w = g.const(g.rng.normal(0, 0.1, (64, 64)).astype(np.float32))
    g.node("Add", [g.node("MatMul", [ln, w], name="fc"), ln], out="y")
    g.output("y", [1, 16, 64])
    batches, held = calibration_batches(g, 8), calibration_batches(g, 4, seed=9)
    plain = quantize(g.proto(), batches, method="max", keep_unpaid=True, trt="10")
    smoothed = quantize(g.proto(), batches, method="max", smooth_quant=0.5, keep_unpaid=True,
                        trt="10")
    [entry] = smoothed.calibration["smoothed"]
    assert entry["explicit"] and entry["tensor"] == "ln" and entry["readers"] == ["fc"]
    assert not smoothed.warnings
    assert smoothed.model is not None and plain.model is not None
    mul = next(n for n in smoothed.model.graph if n.op_type == "Mul" and n.name == "ln_smoothed")
    factors = constant_array(mul.inputs[1])
    assert factors is not None and factors.shape == (64,)
    exponents = np.log2(factors.astype(np.float64))
    assert np.all(exponents == np.round(exponents)) and np.any(exponents != 0)
    gain = _snr_db(g, smoothed.model, held) - _snr_db(g, plain.model, held)
    assert gain > 3.0


def test_smooth_quant_says_why_it_rescaled_nothing() -> None:
    builder = resnet()
    result = quantize(builder.proto(), calibration_batches(builder, 2), method="max",
                      smooth_quant=0.5, trt="10")
    assert result.calibration["smoothed"] == []
    assert any(w.startswith("--smooth-quant rescaled nothing: no quantized MatMul or Gemm")
               for w in result.warnings)


def test_the_cli_keeps_float_the_nodes_of_an_exclude_from_list(tmp_path: Path) -> None:
    """`compare --fallback` writes the list; `quantize --exclude-from` reads it back."""
    from qdqkit.cli import main

    builder = resnet()
    source = builder.save(tmp_path / "resnet.onnx")
    np.save(tmp_path / "calib.npy", np.concatenate(
        [b[next(iter(b))] for b in calibration_batches(builder, 4)]))
    plain = tmp_path / "plain.onnx"
    assert main(["quantize", str(source), "-o", str(plain), "--calib", str(tmp_path / "calib.npy"),
                 "--json"]) in (0, 1)
    quantized = [w["node"] for w in json.loads((tmp_path / "plain.quant.json").read_text())[
        "weighted"] if w["quantized"]]
    assert len(quantized) >= 2
    listed = tmp_path / "fallback.txt"
    listed.write_text(f"# nodes to keep float, best first\n{quantized[0]}\n\n{quantized[1]}\n")
    out = tmp_path / "out.onnx"
    # --keep-unpaid: at 32x32 the rest of the network would not pay for the Q after the
    # excluded stem, and the cost model would keep it all float.
    assert main(["quantize", str(source), "-o", str(out), "--calib", str(tmp_path / "calib.npy"),
                 "--exclude-from", str(listed), "--keep-unpaid", "--json"]) in (0, 1)
    report = {w["node"]: w for w in json.loads((tmp_path / "out.quant.json").read_text())[
        "weighted"]}
    assert not report[quantized[0]]["quantized"] and not report[quantized[1]]["quantized"]
    assert all(report[name]["quantized"] for name in quantized[2:])


def test_a_cast_network_input_is_quantized_before_its_cast() -> None:
    """A float16 model fed float32 (its input Cast to float16) gets the Q on the input itself,
    as `fix` places it: no Cast, no standalone Q after it (B8, A2; passes.input_cast_qdq)."""
    from onnx import TensorProto

    from qdqkit.linting import lint

    g = GraphBuilder("half_input", seed=7, opset=19)
    x = g.input("x", [1, 32, 16, 16])
    v = g.node("Cast", [x], to=TensorProto.FLOAT16, name="to_half")
    for name in ("c1", "c2"):
        w = g.const(g.rng.normal(0, 0.08, (32, 32, 3, 3)).astype(np.float16), f"{name}.weight")
        v = g.node("Relu", [g.node("Conv", [v, w], pads=[1, 1, 1, 1], name=name)])
    g.node("Cast", [v], to=TensorProto.FLOAT, out="y")
    g.output("y", [1, 32, 16, 16])
    batches = calibration_batches(g, 4)
    result = quantize(g.proto(), batches, trt="11", keep_unpaid=True)  # 16x16: would not pay
    model = result.model
    assert model is not None
    q = next(n for n in model.graph if is_quantize(n))
    assert q.inputs[0] is model.graph.inputs[0]
    assert not any(n.op_type == "Cast" and n.inputs[0] is model.graph.inputs[0]
                   for n in model.graph)
    linted = lint(model, trt="11")
    assert linted.errors == 0 and "QDQ407" not in linted.codes()
    assert linted.summary.qdq_reformats == 1  # the input's own Q only
    assert _snr_db(g, model, calibration_batches(g, 2, seed=3)) > 25.0


def test_ops_kept_float_on_purpose_are_recorded_and_lint_does_not_report_them() -> None:
    """An excluded conv is a decision, not a forgotten op: quantize records it in the model and
    lint honours the record (QDQ102); without the record, lint reports the op as it would any."""
    from qdqkit.core.kept_float import KEY, kept_float
    from qdqkit.linting import lint

    builder = resnet(size=64)
    plain = quantize(builder.proto(), calibration_batches(builder, 2), keep_unpaid=True)
    assert plain.model is not None
    middle = [w.node for w in plain.weighted if w.quantized][2]
    result = quantize(builder.proto(), calibration_batches(builder, 2), keep_unpaid=True,
                      exclude=[middle])
    assert result.model is not None
    assert middle in kept_float(result.model)
    assert "QDQ102" not in lint(result.model, trt="11").codes()
    del result.model.metadata_props[KEY]
    assert "QDQ102" in lint(result.model, trt="11").codes()


def test_random_data_says_which_symbolic_dimensions_it_guessed() -> None:
    builder = GraphBuilder("wide", seed=0)
    x = builder.input("x", [1, 3, 16, "width"])
    builder.output(builder.conv(x, 3, 32, weight="float"))
    guessed = quantize(builder.proto(), "random", calib_limit=1)
    assert any("'x'[3] width = 32" in w and "--shapes" in w for w in guessed.warnings)
    given = quantize(builder.proto(), "random", calib_limit=1, shapes={"x": [1, 3, 16, 64]})
    assert not any("guessed" in w for w in given.warnings)


def test_the_summary_judges_the_model_as_it_is_written() -> None:
    """quantize lints its output in memory, where its new weights declare no shape yet: the
    warnings must be those of the written file read back (48 channels: QDQ108)."""
    from qdqkit.linting import lint

    g = GraphBuilder("odd_channels", seed=0, opset=19)
    x = g.node("Relu", [g.input("x", [1, 48, 8, 8])])
    y = g.node("Relu", [g.conv(x, 48, 48, weight="float")])
    g.output(g.node("Relu", [g.conv(y, 48, 48, weight="float")]), [1, 48, 8, 8])
    # At 8x8 INT8 would not pay for the Q after the first Relu: kept, to have convs to judge.
    result = quantize(g.proto(), calibration_batches(g, 2), trt="11", method="max",
                      keep_unpaid=True)
    written = lint(ir.from_proto(ir.serde.serialize_model(result.model)), trt="11")
    as_written = {group.code: sum(1 for f in group.findings if f.severity.value == "warning")
                  for group in written.groups}
    assert result.lint_warnings.get("QDQ108") == 2
    assert result.lint_warnings == {c: n for c, n in as_written.items() if n}


def test_dla_builds_for_tensorrt_10_unless_told_otherwise(tmp_path: Path) -> None:
    """TensorRT 11 runs no INT8 on DLA (I9): --target dla without --trt means 10; the GPU 11."""
    from qdqkit.cli import main

    builder = resnet()
    source = builder.save(tmp_path / "resnet.onnx")
    for target, trt in (("dla", "10"), ("gpu", "11")):
        out = tmp_path / f"{target}.onnx"
        assert main(["quantize", str(source), "-o", str(out), "--calib", "random",
                     "--calib-limit", "2", "--target", target, "--json"]) in (0, 1)
        assert json.loads(out.with_suffix(".quant.json").read_text())["options"]["trt"] == trt
    assert quantize(builder.proto(), "random", calib_limit=2, target="dla").options["trt"] == "10"
    out = tmp_path / "dla11.onnx"
    assert main(["quantize", str(source), "-o", str(out), "--calib", "random", "--calib-limit",
                 "2", "--target", "dla", "--trt", "11", "--json"]) in (0, 1)
    assert json.loads(out.with_suffix(".quant.json").read_text())["options"]["trt"] == "11"


@pytest.mark.parametrize("target", ["gpu", "dla"])
def test_residual_sums_are_placed_as_residual_adds(target: str) -> None:
    # Caffe2's ResNets (and TensorFlow's AddN) write the residual addition as a two-input Sum.
    from qdqkit.linting import lint

    placed = {}
    for op in ("Add", "Sum"):
        builder = resnet()
        proto = builder.proto()
        for node in proto.graph.node:
            if node.op_type == "Add":
                node.op_type = op
        result = quantize(proto, calibration_batches(builder, 2), target=target)
        assert result.model is not None
        assert all(w.quantized for w in result.weighted)
        placed[op] = sorted(n.inputs[0].name or "" for n in result.model.graph
                            if is_quantize(n))
        linted = lint(result.model, trt=result.options["trt"], target=target)
        assert linted.errors == 0
        assert not [g.code for g in linted.groups if g.code in ("QDQ202", "QDQ205", "QDQ407")]
    assert placed["Sum"] == placed["Add"]


def test_a_mask_of_minus_infinity_is_the_models_own_not_a_calibration_error() -> None:
    """GPT-2's causal mask and T5's log of relative positions put -inf in float tensors by
    design. Quantizing such a model calibrates, names the tensors, and judges their FP16 fate
    by their finite values (the masked scores stay FP16); a NaN in a tensor that gets a scale is
    still an error (``test_nan_inside_the_network_names_the_tensor``)."""
    g = GraphBuilder("causal", seed=2, opset=17)
    x = g.input("x", [1, 8, 32])
    h = g.node("MatMul", [x, g.const(g.rng.normal(0, 0.2, (32, 32)).astype(np.float32))])
    scores = g.node("MatMul", [h, g.node("Transpose", [h], perm=[0, 2, 1])])
    mask = np.triu(np.full((8, 8), -np.inf, np.float32), 1)
    masked = g.node("Add", [scores, g.const(mask, "causal_mask")], name="mask_add",
                    out="masked")
    probs = g.node("Softmax", [masked], axis=-1)
    out = g.node("MatMul", [g.node("MatMul", [probs, h]),
                            g.const(g.rng.normal(0, 0.2, (32, 32)).astype(np.float32))],
                 out="y")
    g.output(out, [1, 8, 32])
    data = calibration_batches(g, 4)
    result = quantize(g.proto(), data, method="max", trt="11", keep_unpaid=True)
    assert result.calibration["non_finite_float_tensors"] == ["masked"]
    assert "mask_add" not in result.fp32_nodes
    assert result.model is not None and any(is_quantize(n) for n in result.model.graph)
    assert _snr_db(g, result.model, calibration_batches(g, 2, seed=5)) > 25.0


def test_a_batch_that_samples_of_different_shapes_cannot_fill_is_said() -> None:
    """Sentences of different lengths cannot be stacked: asked for batch 4, the run says how
    many batches it really made, where samples of one shape are batched silently."""
    builder = transformer(tokens=16, batch="N")
    proto = builder.proto()
    for value in (proto.graph.input[0], proto.graph.output[0]):
        value.type.tensor_type.shape.dim[1].dim_param = "T"  # the token count varies
    rng = np.random.default_rng(0)
    varied = [{"tokens": rng.normal(0, 1, (1, n, 64)).astype(np.float32)} for n in (8, 9, 10, 11)]
    result = quantize(proto, varied, method="max", batch=4)
    assert result.calibration["batches"] == 4
    assert any(w.startswith("--batch 4: samples of different shapes cannot share a batch, so "
                            "the 4 samples ran in 4 batches") for w in result.warnings)
    even = [{"tokens": rng.normal(0, 1, (1, 8, 64)).astype(np.float32)} for _ in range(4)]
    result = quantize(proto, even, method="max", batch=4)
    assert result.calibration["batches"] == 1 and not any("--batch" in w for w in result.warnings)


def _conv_inside_if() -> onnx.ModelProto:
    """A model whose convs all sit in the branches of an If on an input flag (a VAD that picks its
    front end by sample rate writes it so)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)

    def branch(name: str) -> onnx.GraphProto:
        weight = numpy_helper.from_array(rng.normal(0, 0.1, (16, 16, 3, 3)).astype(np.float32),
                                         f"{name}_w")
        conv = helper.make_node("Conv", ["x", f"{name}_w"], [f"{name}_y"], pads=[1, 1, 1, 1])
        out = helper.make_tensor_value_info(f"{name}_y", TensorProto.FLOAT, None)
        return helper.make_graph([conv], name, [], [out], [weight])

    flag = helper.make_tensor_value_info("flag", TensorProto.BOOL, [])
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 16, 16])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    node = helper.make_node("If", ["flag"], ["y"], name="pick",
                            then_branch=branch("a"), else_branch=branch("b"))
    graph = helper.make_graph([node], "branches", [flag, x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_convs_inside_subgraphs_are_named_as_left_float() -> None:
    from qdqkit.cli.quantize_cmd import render

    rng = np.random.default_rng(1)
    samples = [{"flag": np.array(True), "x": rng.normal(size=(1, 16, 16, 16)).astype(np.float32)}
               for _ in range(3)]
    result = quantize(_conv_inside_if(), samples)
    assert result.weighted == [] and "auto_by_output" not in result.calibration
    assert any(w.startswith("2 Conv inside subgraphs") for w in result.warnings), result.warnings
    assert any("the main graph has no Conv" in w for w in result.warnings)
    text = render(result)
    assert "INT8 MACs     none: no weighted op in the main graph" in text
    assert "by output" not in text


@pytest.mark.parametrize("target", ["gpu", "dla"])
def test_folded_batchnorms_leave_no_initializer_nothing_reads(target: str) -> None:
    # The FP32 remainder of a DLA build kept the folded BatchNormalizations' parameters, which
    # onnxruntime warns about one by one; a constant the source itself leaves unread stays.
    proto = resnet().proto()
    proto.graph.initializer.append(onnx.numpy_helper.from_array(np.ones(3, np.float32), "spare"))
    assert any(n.op_type == "BatchNormalization" for n in proto.graph.node)
    result = quantize(proto, "random", target=target, calib_limit=2, method="max")
    assert result.model is not None
    unread = [name for name, value in result.model.graph.initializers.items()
              if not value.uses() and not value.is_graph_output()]
    assert unread == ([] if target == "gpu" else ["spare"])
