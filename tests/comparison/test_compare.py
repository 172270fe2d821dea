"""compare: the bad layer is found in every view, the numbers match plain onnxruntime runs."""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from qdqkit.cli import main
from qdqkit.comparison import compare
from qdqkit.core.errors import QdqkitError
from qdqkit.core.node_list import read_node_list as read_fallback
from tests.comparison.models import float_and_quant, small_net

BAD_TENSOR = "body1_relu_out"  # the input of body2, given a scale 64x too small
BAD_NODE = "body2"


def _data(tmp: Path, samples: int = 6, seed: int = 3) -> Path:
    rng = np.random.default_rng(seed)
    path = tmp / "data.npy"
    np.save(path, rng.uniform(-1, 1, size=(samples, 3, 16, 16)).astype(np.float32))
    return path


def _exposed(model_path: Path, feeds: dict[str, np.ndarray], names: list[str]) -> list[np.ndarray]:
    """Plain onnxruntime run with ``names`` added as graph outputs (no qdqkit code)."""
    import onnxruntime as ort

    model = onnx.load(model_path)
    present = {o.name for o in model.graph.output}
    for name in names:
        if name not in present:
            model.graph.output.append(helper.make_empty_tensor_value_info(name))
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    return session.run(names, feeds)


def _snr(reference: list[np.ndarray], test: list[np.ndarray]) -> float:
    ref = np.concatenate([r.reshape(-1) for r in reference]).astype(np.float64)
    tst = np.concatenate([t.reshape(-1) for t in test]).astype(np.float64)
    return 10 * math.log10(float(ref @ ref) / float((ref - tst) @ (ref - tst)))


@pytest.fixture(scope="module")
def bad(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path, object]:
    tmp = tmp_path_factory.mktemp("bad")
    fpath, qpath = float_and_quant(tmp, bad=BAD_TENSOR)
    data = _data(tmp)
    return fpath, qpath, data, compare(fpath, qpath, data, progress=False)


def test_the_bad_layer_ranks_first_in_both_views_and_gains_most(bad: tuple) -> None:
    _f, _q, _d, result = bad
    assert result.graph_ranking[0] == BAD_NODE
    assert result.layer_ranking[0] == BAD_NODE
    assert result.fallback[0] == BAD_NODE
    gains = {n.name: n.what_if.snr_gain_db for n in result.nodes if n.what_if}
    assert gains[BAD_NODE] == max(gains.values()) and gains[BAD_NODE] > 20
    tensor = next(t for t in result.tensors if t.name == BAD_TENSOR)
    assert tensor.clipped_fraction > 0.2  # a scale 64x too small clips much of the tensor
    assert min(result.tensors, key=lambda t: t.local.snr_db).name == BAD_TENSOR
    # The cost comes from the predicted engine: the conv leaves INT8 kernels.
    what = result.node(BAD_NODE).what_if
    assert what.int8_macs_lost == 8 * 8 * 9 * 16 * 16 and what.reformats_added >= 1


def test_the_fallback_list_is_also_measured_by_prefixes_run_together(bad: tuple) -> None:
    _f, _q, _d, result = bad
    assert len(result.fallback) == len(result.nodes) == 6  # every quantized node gains
    steps = result.fallback_steps
    assert [s.nodes for s in steps] == [2, 4, 6]
    # All of them FP16 together is the float model again: only float rounding is left.
    assert steps[-1].output_snr_db > 100
    # Every INT8 MAC leaves INT8, as many as the nodes lose one by one.
    singles = sum(result.node(name).what_if.int8_macs_lost for name in result.fallback)
    assert steps[-1].int8_macs_lost == singles > 0
    first_two = steps[0]
    best = result.node(result.fallback[0]).what_if
    assert first_two.output_snr_db >= best.output_snr_db - 1.0


def test_numbers_match_plain_onnxruntime_runs_with_the_tensors_exposed(bad: tuple) -> None:
    fpath, qpath, data, result = bad
    samples = np.load(data)
    names = [BAD_TENSOR, "body2_out", "logits"]
    floats, quants = [], []
    for i in range(len(samples)):
        feeds = {"x": samples[i:i + 1]}
        floats.append(_exposed(fpath, feeds, names))
        quants.append(_exposed(qpath, feeds, names))
    # Graph-wise error of the bad node's output and of the model output.
    row = result.node(BAD_NODE)
    expected = _snr([f[1] for f in floats], [q[1] for q in quants])
    assert row.graph.snr_db == pytest.approx(expected, abs=0.01)
    out = result.outputs[0]
    assert out.error.snr_db == pytest.approx(_snr([f[2] for f in floats], [q[2] for q in quants]),
                                             abs=0.01)
    argmax = np.mean([np.argmax(f[2]) == np.argmax(q[2]) for f, q in zip(floats, quants,
                                                                           strict=True)])
    assert out.argmax_agreement == pytest.approx(argmax)
    # Layer-wise: the Q/DQ model's own subgraph from the bad tensor to where the conv's fused
    # layer ends (its BatchNormalization; the residual Add reads another branch too), fed the
    # float model's tensor (onnx.utils.extract_model, run in onnxruntime).
    end = next(n.output[0] for n in onnx.load(qpath).graph.node if n.name == "body2_bn")
    sub = qpath.parent / "sub.onnx"
    onnx.utils.extract_model(str(qpath), str(sub), [BAD_TENSOR], [end])
    local = [_exposed(sub, {BAD_TENSOR: f[0]}, [end])[0] for f in floats]
    float_ends = [_exposed(fpath, {"x": samples[i:i + 1]}, [end])[0]
                  for i in range(len(samples))]
    assert row.local.snr_db == pytest.approx(_snr(float_ends, local), abs=0.01)
    # The tensor's own rounding and clipping, by the ONNX reference implementation of Q -> DQ.
    model = onnx.load(qpath)
    q = next(n for n in model.graph.node if n.op_type == "QuantizeLinear"
             and n.input[0] == BAD_TENSOR)
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in model.graph.initializer}
    scale, zero = inits[q.input[1]], inits[q.input[2]]
    ref = ReferenceEvaluator(helper.make_model(helper.make_graph(
        [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
         helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"])], "qdq",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(scale, "s"), onnx.numpy_helper.from_array(zero, "z")])))
    fake = [ref.run(None, {"x": f[0]})[0] for f in floats]
    tensor = next(t for t in result.tensors if t.name == BAD_TENSOR)
    assert tensor.local.snr_db == pytest.approx(_snr([f[0] for f in floats], fake), abs=0.01)
    values = np.concatenate([f[0].reshape(-1) for f in floats])
    clipped = np.mean(np.abs(values / scale) > 127.5)
    assert tensor.clipped_fraction == pytest.approx(clipped, abs=1e-6)
    assert sum(tensor.histogram.counts) == values.size


def test_a_clean_model_has_nothing_standing_out(tmp_path: Path) -> None:
    fpath, qpath = float_and_quant(tmp_path)
    result = compare(fpath, qpath, _data(tmp_path), progress=False)
    assert result.output_snr_db > 25
    for node in result.nodes:
        assert node.local.snr_db > 25, node.name
        assert node.added_snr_db > 25, node.name
        # Several similar noise sources: taking one away gains a few dB, never the 20+ dB a
        # broken scale gives back (the bad-layer test above).
        assert node.what_if is not None and node.what_if.snr_gain_db < 10, node.name
    local = [n.local.snr_db for n in result.nodes]
    assert max(local) - min(local) < 15
    assert all(t.clipped_fraction < 0.01 for t in result.tensors)


def test_results_do_not_depend_on_the_batch_size(bad: tuple) -> None:
    fpath, qpath, data, result = bad
    # The model's batch axis is fixed at 1, so re-batching goes through a dynamic-batch copy.
    model = onnx.load(qpath)
    fmodel = onnx.load(fpath)
    for m, path in ((model, qpath.parent / "q_dyn.onnx"), (fmodel, qpath.parent / "f_dyn.onnx")):
        for value in (*m.graph.input, *m.graph.output):
            value.type.tensor_type.shape.dim[0].dim_param = "N"
        onnx.save(m, path)
    batched = compare(qpath.parent / "f_dyn.onnx", qpath.parent / "q_dyn.onnx", data, batch=3,
                      what_if=0, progress=False)
    assert batched.samples == result.samples == 6
    for a, b in zip(batched.nodes, result.nodes, strict=True):
        assert a.graph.snr_db == pytest.approx(b.graph.snr_db, abs=1e-3)
        assert a.local.snr_db == pytest.approx(b.local.snr_db, abs=1e-3)


def test_models_pair_by_structure_when_names_differ(tmp_path: Path) -> None:
    fpath, qpath = float_and_quant(tmp_path, bad=BAD_TENSOR)
    model = onnx.load(qpath)
    rename = {}
    for node in model.graph.node:
        node.name = "q_" + node.name
        for i, name in enumerate(node.output):
            if name != "logits":
                rename[name] = node.output[i] = "q_" + name
        for i, name in enumerate(node.input):
            node.input[i] = rename.get(name, name)
    renamed = tmp_path / "renamed.onnx"
    onnx.save(model, renamed)
    result = compare(fpath, renamed, _data(tmp_path), what_if=0, progress=False)
    assert not result.unpaired
    assert result.layer_ranking[0] == "q_" + BAD_NODE
    assert result.node("q_" + BAD_NODE).float_output == "body2_out"
    assert all(w for n in result.nodes if n.op_type in ("Conv", "Gemm") for w in n.weights)


def test_fp16_models_with_dq_only_weights_are_upcast_and_weights_paired(tmp_path: Path) -> None:
    fpath, qpath = float_and_quant(tmp_path, style="modelopt")
    result = compare(fpath, qpath, _data(tmp_path), what_if=0, progress=False)
    assert result.fp16_upcast and any("fp16" in note for note in result.notes)
    convs = [n for n in result.nodes if n.op_type in ("Conv", "Gemm")]
    assert len(convs) == 5 and all(len(n.weights) == 1 for n in convs)
    assert all(35 < n.weights[0].snr_db < 60 for n in convs)  # int8 per channel: ~40-45 dB
    assert result.output_snr_db > 20


def test_a_conv_with_its_batchnorm_folded_in_pairs_with_the_float_conv_and_bn(
        tmp_path: Path) -> None:
    # qdqkit quantize folds each BN into its conv, which then writes the BN's output name: the
    # node pairs with the float conv, its output with the BN's, its weight with the float weight
    # scaled as the fold scaled it (a plain comparison would show ~0 dB weights).
    from qdqkit.quantization import quantize
    from tests.quantization.float_models import calibration_batches, resnet

    builder = resnet()
    fpath = tmp_path / "float.onnx"
    onnx.save(builder.proto(), fpath)
    qpath = tmp_path / "int8.onnx"
    quantize(fpath, calibration_batches(builder, 4), output=qpath, method="max")
    folded = [n for n in onnx.load(fpath).graph.node if n.op_type == "BatchNormalization"]
    result = compare(fpath, qpath, None, what_if=0, progress=False, samples=2)
    assert not result.unpaired
    convs = {n.name: n for n in result.nodes if n.op_type == "Conv"}
    assert len(convs) == 6 and len(folded) == 6
    assert {n.float_output for n in convs.values()} == {b.output[0] for b in folded}
    assert all(35 < n.weights[0].snr_db < 60 for n in convs.values())


def test_a_conv_with_a_batchnorm_and_an_affine_folded_in_pairs_with_the_float_chain(
        tmp_path: Path) -> None:
    """Paddle exports write a BatchNormalization as Conv -> Mul -> Add, and PP-LCNetV3 adds a
    learnable affine after its BatchNormalization: quantize folds the whole chain into the conv,
    which then writes the last node's name. Before pairing knew such chains, 33 of 59 quantized
    nodes of PP-OCRv6 tiny's recognizer went unmeasured."""
    from qdqkit.examples.graph import GraphBuilder
    from qdqkit.quantization import quantize
    from tests.quantization.float_models import calibration_batches

    g = GraphBuilder("affine_chains", seed=4)
    y = g.input("x", [1, 8, 16, 16])
    for cin in (8, 24, 24):
        y = g.conv(y, cin, 24, 3, weight="float", std=0.2)
        if cin == 8:  # Conv -> Mul -> Add: a BatchNormalization in its affine form
            y = g.node("Mul", [y, g.const(g.rng.uniform(0.2, 3.0, (24, 1, 1)).astype(np.float32))])
        else:  # Conv -> BatchNormalization -> Mul -> Add: an affine block after it
            y = g.node("Mul", [g.bn(y, 24, random=True),
                               g.const(g.rng.uniform(0.2, 3.0, (1, 24, 1, 1)).astype(np.float32))])
        y = g.node("Relu", [g.node("Add", [y, g.const(
            g.rng.normal(0, 0.1, (24, 1, 1)).astype(np.float32))])])
    g.output(y, [1, 24, 16, 16])
    fpath, qpath = g.save(tmp_path / "float.onnx"), tmp_path / "int8.onnx"
    quantize(fpath, calibration_batches(g, 4), output=qpath, method="max", keep_unpaid=True)
    assert sum(n.op_type == "Mul" for n in onnx.load(qpath).graph.node) == 0  # all folded
    result = compare(fpath, qpath, None, what_if=0, progress=False, samples=2)
    assert not result.unpaired
    convs = [n for n in result.nodes if n.op_type == "Conv"]
    assert len(convs) == 3
    assert all(35 < n.weights[0].snr_db < 60 for n in convs)  # the scaled float weight


def test_every_quantized_node_of_a_real_mobilenet_pairs(tmp_path: Path) -> None:
    """PaddleOCR's angle classifier (MobileNetV3): its squeeze-excite convs add a bias reshaped at
    run time, which quantize stores and folds; the float side must read it as a constant too
    (18 of 97 nodes went unpaired), and its equalized depthwise inputs must be replayed."""
    from qdqkit.quantization import quantize

    fpath = Path(__file__).resolve().parents[1] / "fixtures" / "models" / \
        "ch_ppocr_mobile_v2.0_cls_infer.onnx"
    rng = np.random.default_rng(0)
    batches = [{"x": rng.uniform(-1, 1, (1, 3, 48, 192)).astype(np.float32)} for _ in range(4)]
    qpath = tmp_path / "int8.onnx"
    quantize(fpath, batches, output=qpath, method="max")
    result = compare(fpath, qpath, batches[:2], what_if=0, progress=False)
    assert not result.unpaired and len(result.nodes) > 60
    assert all(w.snr_db > 25 for n in result.nodes for w in n.weights)


@pytest.mark.parametrize("trt", ["10", "11"])
def test_smooth_quant_rescales_are_replayed_on_the_float_model(tmp_path: Path, trt: str) -> None:
    """``--smooth-quant`` folds factors into the small transformer's LayerNorms and puts a Mul of
    powers of two in front of the MatMuls reading its attention output and GELU, scaling every
    reader's weight rows: the float model has none of it, so the same rescales are replayed on
    it (the exact ones with the factors read back from the two LayerNorms) and each weight is
    compared with the float weight scaled alike (unreplayed, it reads -4 dB)."""
    from qdqkit.quantization import quantize
    from tests.quantization.float_models import calibration_batches, transformer

    builder = transformer()
    batches = calibration_batches(builder, 4)
    fpath, qpath = tmp_path / "float.onnx", tmp_path / "int8.onnx"
    onnx.save(builder.proto(), fpath)
    result = quantize(fpath, batches, output=qpath, method="max", smooth_quant=0.5,
                      keep_unpaid=True, trt=trt)
    entries = result.calibration["smoothed"]
    assert [e["explicit"] for e in entries] == [False, False, True, True]
    compared = compare(fpath, qpath, batches[:2], what_if=0, progress=False)
    assert not compared.unpaired
    rows = [n for n in compared.nodes if n.op_type == "MatMul" and n.weights]
    assert len(rows) == 6 and all(w.snr_db > 35 for n in rows for w in n.weights)


def test_a_dimension_only_one_model_knows_does_not_unpair_a_node(tmp_path: Path) -> None:
    # The float model computes its ConvTranspose weight (a Reshape of a Cast shape, as
    # paddle2onnx exports write casts), so its output channels are symbolic; the quantized model
    # stores the weight, so they are known. The two shapes agree wherever both know a dimension.
    from qdqkit.examples.graph import GraphBuilder
    from qdqkit.quantization import quantize

    g = GraphBuilder("computed_weight", seed=0)
    x = g.input("x", ["N", 24, 8, 8])
    y = g.conv(x, 24, 24, weight="float", name="c0")
    shape = g.node("Cast", [g.const(np.array([24, 24, 2, 2], np.int32), "w_shape32")], to=7)
    weight = g.node("Reshape", [g.const(g.rng.normal(0, 0.1, 24 * 24 * 4).astype(np.float32),
                                        "w_flat"), shape], out="up_w")
    up = g.node("ConvTranspose", [y, weight], kernel_shape=[2, 2], strides=[2, 2], name="up")
    g.output(g.node("Relu", [up], out="y"), ["N", 24, 16, 16])
    proto = g.proto()
    proto.graph.value_info.append(
        helper.make_tensor_value_info("up_w", onnx.TensorProto.FLOAT, ["co", "ci", 2, 2]))
    fpath, qpath = tmp_path / "float.onnx", tmp_path / "int8.onnx"
    onnx.save(proto, fpath)
    rng = np.random.default_rng(0)
    quantize(fpath, [{"x": rng.normal(size=(1, 24, 8, 8)).astype(np.float32)} for _ in range(4)],
             output=qpath, method="max", keep_unpaid=True)
    quantized = onnx.load(qpath)
    del quantized.graph.value_info[:]  # shapes from the stored weight, as a fresh export has
    onnx.save(quantized, qpath)
    result = compare(fpath, qpath, None, what_if=0, progress=False, samples=2)
    assert not result.unpaired
    assert {n.name for n in result.nodes} >= {"c0", "up"}


def test_shapes_without_data_shape_the_random_inputs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fpath, qpath = float_and_quant(tmp_path)
    shape = "x".join(str(d.dim_value) for d in
                     onnx.load(fpath).graph.input[0].type.tensor_type.shape.dim)
    name = onnx.load(fpath).graph.input[0].name
    assert main(["compare", str(fpath), str(qpath), "--shapes", f"{name}:{shape}",
                 "--samples", "1", "--json"]) == 0
    capsys.readouterr()
    # A shape the model cannot take is refused: the shapes reach the data, not dropped.
    wrong = shape.rsplit("x", 1)[0] + "x7"
    assert main(["compare", str(fpath), str(qpath), "--shapes", f"{name}:{wrong}",
                 "--samples", "1"]) == 2
    assert "differs from the model's" in capsys.readouterr().err


def test_the_user_metric_hook_is_averaged_over_samples(bad: tuple) -> None:
    fpath, qpath, data, _result = bad
    seen = []

    def top1(float_out: dict, quant_out: dict) -> float:
        seen.append(len(float_out["logits"]))
        return float(np.mean(np.argmax(float_out["logits"], -1) == np.argmax(quant_out["logits"], -1)))

    result = compare(fpath, qpath, data, metric=top1, what_if=0, progress=False)
    assert sum(seen) == 6
    assert result.user_metric == pytest.approx(result.outputs[0].argmax_agreement)


def test_mismatched_models_get_a_clear_error(tmp_path: Path) -> None:
    fpath, qpath = float_and_quant(tmp_path)
    other = small_net(size=32).float_model()
    other.graph.input[0].name = "image"
    for node in other.graph.node:
        node.input[:] = ["image" if i == "x" else i for i in node.input]
    onnx.save(other, tmp_path / "other.onnx")
    narrow = small_net(channels=4).float_model()
    onnx.save(narrow, tmp_path / "narrow.onnx")
    with pytest.raises(QdqkitError, match=r"different inputs: .*other.onnx takes image"):
        compare(tmp_path / "other.onnx", qpath, progress=False)
    with pytest.raises(QdqkitError, match="has no QuantizeLinear/DequantizeLinear"):
        compare(fpath, fpath, progress=False)
    # Same input and names, every conv of another width: only the same-shaped fc pairs, and
    # the report names the rest.
    narrow_result = compare(tmp_path / "narrow.onnx", qpath, what_if=0, progress=False)
    assert narrow_result.unpaired == ["stem", "body1", "body2", "add", "head"]
    assert any("5 of 6 quantized nodes" in note for note in narrow_result.notes)
    # Same input, nothing else in common.
    lone = helper.make_model(helper.make_graph(
        [helper.make_node("Tanh", ["x"], ["logits"], name="t")], "lone",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 16, 16])],
        [helper.make_tensor_value_info("logits", onnx.TensorProto.FLOAT, None)]),
        opset_imports=[helper.make_opsetid("", 13)])
    onnx.save(lone, tmp_path / "lone.onnx")
    with pytest.raises(QdqkitError, match="no quantized node pairs"):
        compare(tmp_path / "lone.onnx", qpath, progress=False)
    assert main(["compare", str(tmp_path / "other.onnx"), str(qpath)]) == 2


def test_cli_writes_json_html_and_a_fallback_list_without_touching_inputs(
        bad: tuple, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fpath, qpath, data, result = bad
    before = qpath.read_bytes()
    html, fallback = tmp_path / "r.html", tmp_path / "fallback.txt"
    assert main(["compare", str(fpath), str(qpath), "--data", str(data), "-o", str(html),
                 "--fallback", str(fallback), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["layer_ranking"][0] == BAD_NODE and printed["samples"] == 6
    assert printed["nodes"][0]["graph"]["snr_db"] == pytest.approx(result.nodes[0].graph.snr_db)
    assert "graph" not in printed or isinstance(printed["graph"], dict) is False
    assert read_fallback(fallback) == result.fallback
    text = fallback.read_text()
    assert all(line.startswith("#") or line in result.fallback for line in text.splitlines())
    assert html.read_text().startswith("<!DOCTYPE html>")
    assert qpath.read_bytes() == before
    assert main(["compare", str(fpath), str(qpath), "--what-if", "0"]) == 0
    out = capsys.readouterr().out
    assert "random values" in out and "layer-wise" in out


def test_what_if_counts_int8_macs_at_the_data_shapes_of_a_symbolic_input(tmp_path: Path) -> None:
    from qdqkit.comparison.api import compare as compare_models
    from qdqkit.examples.graph import GraphBuilder
    from qdqkit.quantization import quantize

    g = GraphBuilder("symbolic", seed=3)
    x = g.input("x", [1, 32, "H", "W"])
    y = g.conv(g.node("Relu", [g.conv(x, 32, 32, weight="float", name="a")]), 32, 32,
               weight="float", name="b")
    g.node("Relu", [y], out="out")
    g.output("out", [1, 32, "H", "W"])
    float_path = g.save(tmp_path / "float.onnx")
    data = np.random.default_rng(0).normal(size=(2, 32, 24, 24)).astype(np.float32)
    np.save(tmp_path / "data.npy", data)
    quantize(float_path, tmp_path / "data.npy", output=tmp_path / "q.onnx", keep_unpaid=True)
    # No trt: the version quantize recorded in the model (its default, 11), as lint does.
    result = compare_models(float_path, tmp_path / "q.onnx", tmp_path / "data.npy", what_if=2)
    assert (result.trt, result.from_model) == ("11", ["trt"])
    lost = {row.name: row.what_if.int8_macs_lost for row in result.nodes
            if row.what_if is not None and row.what_if.int8_macs_lost}
    assert lost and all(macs >= 32 * 32 * 9 * 24 * 24 for macs in lost.values())
    given = compare_models(float_path, tmp_path / "q.onnx", tmp_path / "data.npy", what_if=0,
                           trt="10")
    assert (given.trt, given.from_model) == ("10", [])


def _depthwise_pair(tmp: Path) -> tuple[Path, Path]:
    """x -> depthwise Conv -> BatchNormalization -> y, float and with Q/DQ on x and the weight.

    x's channel 0 spans +-0.05 while the others reach +-40, so one per-tensor INT8 scale rounds
    channel 0 to zero; the BatchNormalization then multiplies channel 0 by 200 and the others by
    0.1, so the damage the conv's own output hides dominates the layer's output.
    """
    from onnx import TensorProto, numpy_helper

    channels = 4
    weight = np.ones((channels, 1, 3, 3), np.float32) / 9
    gain = np.array([200.0, 0.1, 0.1, 0.1], np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in (
        (weight, "w"), (gain, "gamma"), (np.zeros(channels, np.float32), "beta"),
        (np.zeros(channels, np.float32), "mean"), (np.ones(channels, np.float32) - 1e-5, "var"))]
    conv = helper.make_node("Conv", ["x", "w"], ["conv_out"], name="dw", group=channels,
                            pads=[1, 1, 1, 1])
    bn = helper.make_node("BatchNormalization", ["conv_out", "gamma", "beta", "mean", "var"],
                          ["bn_out"], name="bn", epsilon=1e-5)
    io = ([helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, channels, 8, 8])],
          [helper.make_tensor_value_info("bn_out", TensorProto.FLOAT, [1, channels, 8, 8])])
    fpath, qpath = tmp / "dw_float.onnx", tmp / "dw_quant.onnx"
    onnx.save(helper.make_model(helper.make_graph([conv, bn], "dw", *io, inits),
                                opset_imports=[helper.make_opsetid("", 17)]), fpath)
    w_scale = np.full(channels, float(weight.max()) / 127, np.float32)
    qinits = [
        *inits,
        numpy_helper.from_array(np.array(40.0 / 127, np.float32), "x_scale"),
        numpy_helper.from_array(np.array(0, np.int8), "x_zero"),
        numpy_helper.from_array(np.round(weight / w_scale[:, None, None, None]).astype(np.int8),
                                "w_int8"),
        numpy_helper.from_array(w_scale, "w_scale"),
        numpy_helper.from_array(np.zeros(channels, np.int8), "w_zero")]
    qdq = [helper.make_node("QuantizeLinear", ["x", "x_scale", "x_zero"], ["x_q"], name="x_Q"),
           helper.make_node("DequantizeLinear", ["x_q", "x_scale", "x_zero"], ["x_dq"],
                            name="x_DQ"),
           helper.make_node("DequantizeLinear", ["w_int8", "w_scale", "w_zero"], ["w_dq"],
                            name="w_DQ", axis=0)]
    qconv = helper.make_node("Conv", ["x_dq", "w_dq"], ["conv_out"], name="dw", group=channels,
                             pads=[1, 1, 1, 1])
    onnx.save(helper.make_model(helper.make_graph([*qdq, qconv, bn], "dw", *io, qinits),
                                opset_imports=[helper.make_opsetid("", 17)]), qpath)
    return fpath, qpath


def test_layer_wise_error_is_taken_where_the_fused_layer_ends(tmp_path: Path) -> None:
    fpath, qpath = _depthwise_pair(tmp_path)
    rng = np.random.default_rng(0)
    x = rng.uniform(-40, 40, size=(4, 4, 8, 8)).astype(np.float32)
    x[:, 0] = rng.uniform(-0.05, 0.05, size=(4, 8, 8))
    np.save(tmp_path / "x.npy", x)
    result = compare(fpath, qpath, tmp_path / "x.npy", what_if=0, progress=False)
    row = result.node("dw")
    # Independent truth: plain onnxruntime runs of both models, compared at the BN output.
    floats = [_exposed(fpath, {"x": x[i:i + 1]}, ["conv_out", "bn_out"]) for i in range(4)]
    quants = [_exposed(qpath, {"x": x[i:i + 1]}, ["conv_out", "bn_out"]) for i in range(4)]
    at_conv = _snr([f[0] for f in floats], [q[0] for q in quants])
    at_layer_end = _snr([f[1] for f in floats], [q[1] for q in quants])
    assert at_conv > 30 and at_layer_end < 5  # the conv's output hides what the BN amplifies
    assert row.local is not None
    assert row.local.snr_db == pytest.approx(at_layer_end, abs=0.01)


def test_a_report_name_that_is_not_html_is_refused_before_any_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The models do not even exist: the name is checked first, not after minutes of runs.
    code = main(["compare", str(tmp_path / "f.onnx"), str(tmp_path / "q.onnx"),
                 "-o", str(tmp_path / "report")])
    assert code == 2
    assert "the report is HTML; choose a .html file name" in capsys.readouterr().err
    assert not (tmp_path / "report").exists()


def _fp8_conv(tmp: Path) -> tuple[Path, Path]:
    """A conv, float and with FP8 (E4M3) Q/DQ on its activation and weight (opset 19)."""
    from onnx import TensorProto, numpy_helper

    weight = np.random.default_rng(0).normal(0, 0.1, (8, 3, 3, 3)).astype(np.float32)

    def save(name: str, quantized: bool) -> Path:
        inits = [numpy_helper.from_array(weight, "w")]
        nodes = [helper.make_node("Conv", ["xd" if quantized else "x", "wd" if quantized else "w"],
                                  ["y"], name="conv", pads=[1] * 4)]
        if quantized:
            inits += [numpy_helper.from_array(np.float32(1 / 448), "s"),
                      numpy_helper.from_array(np.float32(0.3 / 448), "ws"),
                      helper.make_tensor("zp", TensorProto.FLOAT8E4M3FN, [], [0.0])]
            nodes[:0] = [
                helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["xq"], name="x_Q"),
                helper.make_node("DequantizeLinear", ["xq", "s", "zp"], ["xd"], name="x_DQ"),
                helper.make_node("QuantizeLinear", ["w", "ws", "zp"], ["wq"], name="w_Q"),
                helper.make_node("DequantizeLinear", ["wq", "ws", "zp"], ["wd"], name="w_DQ")]
        graph = helper.make_graph(
            nodes, name, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 16, 16])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 16, 16])], inits)
        path = tmp / f"{name}.onnx"
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)]), path)
        return path

    return save("float", False), save("fp8", True)


def test_fp8_qdq_is_emulated_as_onnxruntime_runs_it(tmp_path: Path) -> None:
    fpath, qpath = _fp8_conv(tmp_path)
    result = compare(fpath, qpath, _data(tmp_path), what_if=0, progress=False)
    (conv,) = [n for n in result.nodes if n.name == "conv"]
    # One layer on the network input: the layer-wise view (qdqkit's FP8 rounding in numpy) must
    # equal the end-to-end view (onnxruntime executing the FP8 Q/DQ).
    assert conv.local is not None and result.output_snr_db is not None
    assert conv.local.snr_db == pytest.approx(result.output_snr_db, abs=0.05)
    assert 20 < result.output_snr_db < 40  # 3 mantissa bits: ~30 dB, far from int8 or float
    assert conv.weights and 25 < conv.weights[0].snr_db < 40


def _compare_built(tmp_path: Path, build: Callable[[bool], onnx.ModelProto]) -> Any:
    """``compare`` of ``build(False)`` (the float model) with ``build(True)`` on random data."""
    fpath, qpath = tmp_path / "float.onnx", tmp_path / "int8.onnx"
    onnx.save(build(False), fpath)
    onnx.save(build(True), qpath)
    return compare(fpath, qpath, None, what_if=0, progress=False, samples=2)


def test_a_scalar_constant_quantized_as_a_weight_is_measured(tmp_path: Path) -> None:
    # ModelOpt's --target_dla quantizes every input, the scalar of a box decoder's Mul by 0.1
    # included: the scalar is a weight of one channel, and its error is that of its one value.
    from qdqkit.examples.graph import GraphBuilder

    def build(quantized: bool) -> onnx.ModelProto:
        g = GraphBuilder("scalar_weight", seed=0)
        x = g.input("x", [1, 4, 8, 8])
        x = g.qdq(x, 0.02, name="xq") if quantized else x
        scalar = g.const(np.array(0.1037, np.float32), "decode_scale")
        if quantized:
            scalar = g.qdq(scalar, 0.1037 / 127 * 1.5, name="wq")
        g.output(g.node("Mul", [x, scalar], name="decode", out="y"), [1, 4, 8, 8])
        return g.proto()

    result = _compare_built(tmp_path, build)
    (weight,) = result.node("decode").weights
    dequantized = np.float32(round(127 / 1.5) * (0.1037 / 127 * 1.5))
    expected = 10 * math.log10(0.1037**2 / float(np.float32(0.1037) - dequantized) ** 2)
    assert weight.channel_snr_db == pytest.approx([expected], rel=1e-4)
    assert weight.snr_db == pytest.approx(expected, rel=1e-4)


def test_a_quantized_scalar_activation_is_measured(tmp_path: Path) -> None:
    # A computed 0-d tensor behind a Q/DQ pair (a YOLO head's grid limit, quantized for DLA).
    from qdqkit.examples.graph import GraphBuilder

    def build(quantized: bool) -> onnx.ModelProto:
        g = GraphBuilder("scalar_activation", seed=0)
        x = g.input("x", [1, 4, 8, 8])
        total = g.node("ReduceSum", [x], name="total", keepdims=0)
        total = g.qdq(total, 0.5, name="total_q") if quantized else total
        g.output(g.node("Mul", [x, total], name="scaled", out="y"), [1, 4, 8, 8])
        return g.proto()

    result = _compare_built(tmp_path, build)
    assert result.output_snr_db is not None and math.isfinite(result.output_snr_db)
    row = result.node("scaled")
    assert row.quantized_inputs == ["total_out"] and row.local is not None
    assert 0 < row.local.snr_db < 80  # the sum rounded to a step of 0.5


def test_placeholder_dimension_names_do_not_tie_tensors_together(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # ModelOpt writes value_info naming every unknown dimension 'unk'; onnxruntime reads one name
    # as one size, and a local model cut from such a graph had it reuse a 24-channel buffer for a
    # 96-channel tensor. The pieces compare builds keep no declared shapes for computed tensors.
    fpath, qpath = float_and_quant(tmp_path)
    model = onnx.shape_inference.infer_shapes(onnx.load(qpath))
    for info in model.graph.value_info:
        for dim in info.type.tensor_type.shape.dim:
            dim.dim_param = "unk"
    onnx.save(model, qpath)
    import qdqkit.comparison.api as compare_api

    pieces: list[Any] = []
    build = compare_api.make_session

    def recording(model: Any, **options: Any) -> Any:
        pieces.append(model)
        return build(model, **options)

    monkeypatch.setattr(compare_api, "make_session", recording)
    result = compare(fpath, qpath, _data(tmp_path), what_if=2, progress=False)
    assert result.layer_ranking and all(n.local is not None for n in result.nodes
                                        if n.op_type == "Conv")
    (local,) = pieces  # the layer-wise piece: no computed tensor keeps a declared shape
    assert not [v for n in local.graph for v in n.outputs if v.shape is not None]
