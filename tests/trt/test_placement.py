"""The placement policy, judged by the engine predictor and lint on every model family.

The bar: the quantized output lints with no error and no placement warning (a fixable rule, or
QDQ509: INT8 not faster than FP16) under each TensorRT version, and the predicted engine keeps only
the Reformats no placement can remove (the network input's Q; a Q after float math in front of an
INT8 region that pays for it). Each family checks the rule it exercises.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx_ir as ir
import pytest

from qdqkit.core.qdq import is_dequantize, is_quantize, node_label
from qdqkit.linting import lint
from qdqkit.quantization import quantize
from qdqkit.rules import rule
from qdqkit.trt.placement import plan_placement
from tests.quantization.float_models import (
    calibration_batches,
    mobilenet,
    residual_chain,
    resnet,
    svtr,
    transformer,
    yolo,
)

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "models"


def _quantized(builder, trt: str = "8.6", **options):  # type: ignore[no-untyped-def]
    return quantize(builder.proto(), calibration_batches(builder, 4), trt=trt, method="max",
                    **options)


def _placement(codes: dict[str, int]) -> dict[str, int]:
    """Placement warnings: the rules a placement can fix, and QDQ509 (INT8 not faster)."""
    return {c: n for c, n in codes.items() if rule(c).fixable or c == "QDQ509"}


def _placement_warnings(result) -> dict[str, int]:  # type: ignore[no-untyped-def]
    return _placement(result.lint_warnings)


def _linted_as_written(result, trt: str = "11") -> dict[str, int]:  # type: ignore[no-untyped-def]
    """What `qdqkit lint --trt` says of the written model (symbolic dimensions count as 1)."""
    linted = lint(ir.from_proto(ir.serde.serialize_model(result.model)), trt=trt)
    assert linted.errors == 0
    return _placement({g.code: sum(1 for f in g.findings if f.severity.value == "warning")
                       for g in linted.groups if any(f.severity.value == "warning"
                                                     for f in g.findings)})


def _scale_of_q(model: ir.Model, tensor: str) -> float:
    q = next(n for n in model.graph if is_quantize(n) and n.inputs[0].name == tensor)
    return float(q.inputs[1].const_value.numpy())


@pytest.mark.parametrize("trt", ["8.6", "10", "11"])
@pytest.mark.parametrize("family", [resnet, mobilenet])
def test_cnn_families_lint_clean_with_only_the_input_reformat(family, trt: str) -> None:  # type: ignore[no-untyped-def]
    result = _quantized(family(), trt)
    assert result.lint_errors == 0
    assert _placement_warnings(result) == {}
    assert result.engine.reformats == 1  # the network input's Q (B8), nothing else
    assert result.int8_mac_share == 1.0


def test_a_hardswish_written_as_arithmetic_is_one_layer() -> None:
    """x * Clip(x + 3, 0, 6) / 6 is one PointWise fusion in TensorRT's engines (C8): inside its
    conv's layer after a full conv, an INT8 PointWise layer of its own after a depthwise one. Q/DQ
    go on its input and output only, never between its Add, Clip, Mul and Div."""
    result = _quantized(mobilenet(hardswish="HardSwishMath"), "11")
    assert result.lint_errors == 0 and _placement_warnings(result) == {}
    assert result.engine.reformats == 1 and result.int8_mac_share == 1.0
    model = result.model
    assert model is not None
    inner = {"Add", "Clip", "Mul", "Div"}
    for q in (n for n in model.graph if is_quantize(n)):
        producer = q.inputs[0].producer()
        readers = {u.node.op_type for dq in (u.node for u in q.outputs[0].uses())
                   for u in dq.outputs[0].uses()}
        # A Q after the +3 or the Clip would split the layer; after the Div it feeds a conv.
        gate = producer is not None and (producer.op_type == "Clip" or (
            producer.op_type == "Add" and any(v.const_value is not None or (
                v.producer() is not None and v.producer().op_type == "Constant")
                for v in producer.inputs)))
        assert not gate, node_label(q)
        if producer is not None and producer.op_type == "Div":
            assert readers <= {"Conv", "GlobalAveragePool", "Mul"}
    engine = lint(ir.from_proto(ir.serde.serialize_model(model)), trt="11").engine
    op_of = {node_label(n): n.op_type for n in model.graph}
    holding = [layer for layer in engine.layers
               if inner <= {op_of.get(name) for name in layer.onnx_nodes}]
    clips = sum(1 for n in model.graph if n.op_type == "Clip")
    # Every HardSwish whole in one layer (a layer holding two would have two Clips).
    assert clips == 5 and sum(
        [op_of.get(name) for name in layer.onnx_nodes].count("Clip") for layer in holding) == clips
    depthwise = {node_label(n) for n in model.graph if n.op_type == "Conv"
                 and n.attributes.get("group") is not None and n.attributes["group"].as_int() > 1}
    for layer in holding:
        convs = [name for name in layer.onnx_nodes if op_of.get(name) == "Conv"]
        assert layer.kind.value == ("Convolution" if convs else "PointWise"), layer.name
        assert not set(convs) & depthwise  # a depthwise conv takes no pointwise epilogue
        assert layer.outputs[0].precision.value == "INT8"
    assert sum(1 for layer in holding if layer.kind.value == "PointWise") == 2  # the depthwise


def test_resnet_quantizes_skip_branches_only_and_the_pool() -> None:
    model = _quantized(resnet()).model
    assert model is not None
    for add in (n for n in model.graph if n.op_type == "Add"):
        via_dq = [v.producer() is not None and is_dequantize(v.producer()) for v in add.inputs]
        assert sum(via_dq) == 1, add.name  # C3: the skip through Q/DQ, the conv branch not
    gap = next(n for n in model.graph if n.op_type == "GlobalAveragePool")
    assert is_dequantize(gap.inputs[0].producer())  # C9: the pool runs INT8 between INT8 layers
    for q in (n for n in model.graph if is_quantize(n)):
        # D2/C2: no Q inside an epilogue: what a Q reads is read by nothing that fuses into it.
        readers = {use.node.op_type for use in q.inputs[0].uses()}
        assert not readers & {"BatchNormalization", "Relu"}, q.name


@pytest.mark.parametrize("trt", ["8.6", "11"])
def test_yolo_keeps_the_dfl_decode_float_and_shares_sppf_scales(trt: str) -> None:
    result = _quantized(yolo(), trt)
    assert result.lint_errors == 0
    floats = {w.node: w.reason for w in result.weighted if not w.quantized}
    assert list(floats) == ["dfl"] and "Softmax" in floats["dfl"]
    # The DFL conv is float on purpose, and lint agrees: after the Softmax its Q could not fuse
    # and INT8 would save less than that Reformat (QDQ102 not reported).
    assert _placement_warnings(result) == {}
    assert result.engine.reformats == 1
    model = result.model
    assert model is not None
    concat = next(n for n in model.graph if n.op_type == "Concat"
                  and sum(1 for v in n.inputs if v.producer().op_type == "MaxPool") == 3)
    sppf_in = concat.inputs[0].name
    # B4/C10/C11: the SPPF input, the MaxPool chain and the Concat share one scale, so TensorRT
    # elides the Concat; the Q of the Concat output and of the SPPF input are the same number.
    q_after = next(n for n in model.graph if is_quantize(n)
                   and n.inputs[0] is concat.outputs[0])
    group = next(t.group for t in result.tensors if t.tensor == concat.outputs[0].name)
    members = {t.tensor for t in result.tensors if t.group == group}
    assert sppf_in in members or any(
        t.group == group for t in result.tensors if t.tensor.startswith("maxpool"))
    assert float(q_after.inputs[1].const_value.numpy()) == pytest.approx(
        next(t.scale for t in result.tensors if t.group == group), rel=1e-3)  # fp16 in TRT 11
    outputs = {v.name for v in model.graph.outputs}
    assert all(not (v.producer() and is_dequantize(v.producer())) for v in model.graph.outputs)
    assert outputs == {"detections"}


def test_transformer_keeps_layernorm_softmax_gelu_and_attention_core_float() -> None:
    # Every region of this block is entered through a Q after float math; it is too small for
    # INT8 to pay for those Reformats, so the structure is checked with every region kept.
    result = _quantized(transformer(), "11", keep_unpaid=True)
    assert result.lint_errors == 0
    model = result.model
    assert model is not None
    quantized_ops = {n.op_type for n in model.graph for v in n.inputs
                     if v is not None and v.producer() is not None and is_dequantize(v.producer())
                     and n.op_type not in ("MatMul", "Add")}
    assert quantized_ops <= {"Cast"}
    weighted = {w.node: w.quantized for w in result.weighted}
    assert all(weighted.values()) and len(weighted) == 6  # q, k, v, o, ffn1, ffn2
    for matmul in (n for n in model.graph if n.op_type == "MatMul"):
        if matmul.inputs[1].const_value is None and matmul.inputs[1].producer().op_type != "DequantizeLinear":
            assert not is_dequantize(matmul.inputs[0].producer())  # attention core float
    # No residual skip is quantized: no block after an Add is read in INT8 (C4).
    assert set(_placement_warnings(result)) <= {"QDQ407", "QDQ509"}
    assert set(result.fp32_nodes) == {n.name for n in model.graph
                                      if n.op_type == "LayerNormalization"}


def test_regions_that_do_not_pay_for_their_reformats_stay_float_with_the_reason() -> None:
    result = _quantized(transformer(), "11")
    assert result.lint_errors == 0 and _placement_warnings(result) == {}
    assert _linted_as_written(result) == {}
    # Some regions do not pay and stay float, with the reason. The projections after a
    # LayerNormalization (kept FP32) may pay: their Q then reads the FP32 output directly, one
    # Reformat, with no Cast to FP16 in between.
    left = [w for w in result.weighted if not w.quantized]
    assert left and all(
        w.reason.startswith("not quantized: its INT8 region needs the standalone Q/DQ")
        and "(E1, E2)" in w.reason for w in left)
    assert result.model is not None
    for q in (n for n in result.model.graph if is_quantize(n)):
        producer = q.inputs[0].producer()
        assert producer is None or producer.op_type != "Cast"


@pytest.mark.parametrize("trt", ["8.6", "11"])
def test_a_residual_chain_ending_in_float_math_quantizes_every_skip(trt: str) -> None:
    # The last block writes float, so its INT8 skip is dequantized by a Reformat (C4); but that
    # skip is also the next conv's INT8 input. Keeping it float would only move the Reformat to
    # the block before, whose skip would then stay float in turn, down the whole chain: every
    # skip is quantized, and the chain pays one Reformat, which lint does not report.
    result = _quantized(residual_chain(), trt)
    assert result.lint_errors == 0 and _placement_warnings(result) == {}
    assert _linted_as_written(result, trt) == {}
    assert all(w.quantized for w in result.weighted) and result.int8_mac_share == 1.0
    model = result.model
    assert model is not None
    adds = [n for n in model.graph if n.op_type == "Add"]
    assert len(adds) == 3
    assert all(is_dequantize(add.inputs[0].producer()) for add in adds)  # the skip
    assert not any(is_dequantize(add.inputs[1].producer()) for add in adds)  # the conv branch
    assert result.engine.reformats == 2  # the network input's Q and the chain's end


@pytest.mark.parametrize("size,paid", [(8, False), (32, True)])
def test_a_q_after_float_math_is_kept_only_where_the_conv_saves_more(size: int, paid: bool) -> None:
    from tests.quantization.float_models import GraphBuilder

    g = GraphBuilder("after_tanh", seed=8)
    x = g.input("x", [1, 384, size, size])
    y = g.conv(g.node("Tanh", [x]), 384, 384, 3, weight="float", std=0.02, name="big")
    g.node("Relu", [y], out="y")
    g.output("y", [1, 384, size, size])
    result = _quantized(g, "11")
    assert result.lint_errors == 0 and _placement_warnings(result) == {}
    decision = result.weighted[0]
    assert decision.quantized == paid
    if not paid:  # 85 M MACs: 0.3 us saved against a 1.1 us Reformat after the Tanh
        assert "'tanh" in decision.reason and "saves" in decision.reason


@pytest.mark.parametrize("width,shapes", [(32, None), ("W", {"x": [1, 3, 8, 32]})])
def test_svtr_recognizer_lints_clean_as_written(width: int | str, shapes) -> None:  # type: ignore[no-untyped-def]
    """PP-OCRv4-rec-shaped: decomposed LayerNorms, attention copies, residual streams, a
    shortcut Concat back to NCHW; with a static and a symbolic width."""
    result = quantize(svtr(width).proto(), "random", trt="11", method="max", calib_limit=2,
                      shapes=shapes)
    assert result.lint_errors == 0 and _placement_warnings(result) == {}
    assert _linted_as_written(result) == {}  # no QDQ509, QDQ204, QDQ304, QDQ404, QDQ407
    stem = [w for w in result.weighted if w.op_type == "Conv"][:2]
    assert all(w.quantized for w in stem)
    matmuls = [w for w in result.weighted if w.op_type == "MatMul"]
    assert matmuls and all(not w.quantized and w.reason.startswith("not quantized")
                           for w in matmuls)
    model = result.model
    assert model is not None
    for value in {n.inputs[0] for n in model.graph if is_quantize(n)}:
        assert len([u for u in value.uses() if is_quantize(u.node)]) == 1  # one Q a tensor


def test_small_layers_fed_by_the_input_stay_float_with_the_threshold() -> None:
    from tests.quantization.float_models import GraphBuilder

    g = GraphBuilder("tiny", seed=5)
    x = g.input("x", [1, 3, 16, 16])
    y = g.conv(x, 3, 4, 3, weight="float", name="tiny_conv")
    g.node("Relu", [y], out="y")
    g.output("y", [1, 4, 16, 16])
    placement = plan_placement(g.ir())
    decision = placement.weighted[0]
    assert not decision.quantized and "below 16" in decision.reason and "C20" in decision.reason
    assert placement.points == []


def test_a_zero_pad_and_a_copy_after_a_network_input_run_int8_behind_its_q() -> None:
    # Pad(0) -> Reshape -> Conv from a network input: the input's Q (the Reformat no placement
    # avoids, B8) goes on the input, and the Pad and the Reshape run INT8 on one scale (B3). A Q
    # after them would be a standalone Reformat of its own (QDQ407), the Pad a float layer.
    from tests.models import padded_channels_last_input_model

    placement = plan_placement(ir.from_proto(padded_channels_last_input_model()))
    assert "x" in {p.value.name for p in placement.points}
    group_of = {v.name: group for group, members in placement.groups.items() for v in members}
    assert group_of["x"] == group_of["padded"] == group_of["nchw"]
    result = quantize(padded_channels_last_input_model(), "random", calib_limit=2, method="max",
                      keep_unpaid=True)
    assert _placement_warnings(result) == {} and result.engine.reformats == 1


def test_no_qdq_for_shapes_alone_after_a_float_layer() -> None:
    # A Swin window partition: a Pad TensorRT runs float, whose output a Reshape copies to the
    # next conv and Shapes read to size the copy. The conv's Q goes after the copy; a Q on the
    # Pad's output for the Shapes alone would be a standalone Reformat for no value at all
    # (after an INT8 layer such a Q is what makes it write INT8, and stays: the PP-OCR angle
    # classifier's pool before its flatten and MatMul).
    from tests.quantization.float_models import GraphBuilder

    g = GraphBuilder("window", seed=0)
    y = g.node("Relu", [g.conv(g.input("x", [1, 16, 16, 16]), 16, 16, weight="float",
                               name="c1")])
    padded = g.node("Pad", [y, g.const(np.array([0, 0, 1, 1, 0, 0, 1, 1], np.int64))],
                    mode="reflect", out="padded")
    copied = g.node("Reshape", [padded, g.node("Shape", [padded])], out="copied")
    g.node("Relu", [g.conv(copied, 16, 16, weight="float", name="c2")], out="out")
    g.output("out", [1, 16, 18, 18])
    placement = plan_placement(g.ir())
    assert "copied" in {p.value.name for p in placement.points}
    assert "padded" not in {p.value.name for p in placement.points}


def test_exclude_by_op_type_and_glob() -> None:
    model = resnet().ir()
    by_type = plan_placement(model, exclude=["Gemm"])
    assert [d.node.op_type for d in by_type.weighted if not d.quantized] == ["Gemm"]
    by_glob = plan_placement(model, exclude=["conv1*"])
    names = [d.node.name for d in by_glob.weighted if not d.quantized]
    assert names and all(n.startswith("conv1") for n in names)
    assert "--exclude 'conv1*'" in by_glob.weighted[0].reason or any(
        "--exclude" in d.reason for d in by_glob.weighted)


@pytest.mark.parametrize("name,shape", [
    ("mnist", None),
    ("ultraface_rfb320", None),
    ("ch_ppocr_mobile_v2.0_cls_infer", [1, 3, 48, 192]),
])
@pytest.mark.parametrize("trt", ["8.6", "11"])
def test_real_models_lint_clean(name: str, shape: list[int] | None, trt: str) -> None:
    shapes = {"x": shape} if shape else None
    result = quantize(FIXTURES / f"{name}.onnx", "random", trt=trt, method="max",
                      calib_limit=2, shapes=shapes)
    assert result.lint_errors == 0
    assert _placement_warnings(result) == {}
    assert _linted_as_written(result, trt) == {}
    assert result.engine.reformats == 1  # the network input's Q only
    assert result.int8_mac_share == 1.0


def test_dla_placement_gives_translate_a_complete_cache() -> None:
    from qdqkit.translation.api import TranslateOptions, translate_model

    hardswish_math = lambda: mobilenet(hardswish="HardSwishMath")  # noqa: E731
    for family in (resnet, yolo, mobilenet, hardswish_math):
        result = _quantized(family(), "8.6", target="dla")
        assert result.lint_errors == 0
        assert "--useDLACore=0" in result.trtexec
        model = ir.from_proto(ir.serde.serialize_model(result.model))
        # The one flag quantize prints for DLA: no propagation needed to complete the cache.
        assert "translate" in result.trtexec and "--add_unary_ew_scales_for_dla" in result.trtexec
        assert "--infer_mul_scales" not in result.trtexec
        translation = translate_model(model, TranslateOptions(add_unary_ew_scales_for_dla=True))
        outputs = [v.name for v in model.graph.outputs]
        assert np.isfinite(list(translation.scales.values())).all()
        if family is not yolo:
            assert translation.fp16_nodes == [] and translation.unscaled_tensors == []
            assert all(name in translation.scales for name in outputs)  # I2: outputs scaled too
            continue
        # The detector's decode (DFL softmax-expectation, box math, the Concat of boxes and
        # scores into the output) runs FP16: one INT8 scale for boxes and scores would zero the
        # scores. Every other conv runs INT8 between scaled tensors.
        ops = {node.name: node.op_type for node in model.graph}
        assert [n for n in translation.fp16_nodes if ops[n] == "Conv"] == ["dfl"]
        assert {"Softmax", "Sigmoid", "Concat", "Sub", "Add", "Mul"} <= {
            ops[n] for n in translation.fp16_nodes}
        assert not any(name in translation.scales for name in outputs)


def test_exclude_patterns_name_unnamed_nodes_by_their_report_label() -> None:
    """An unnamed node is listed by reports (and `compare --fallback`) as its label."""
    import onnx_ir as ir

    from qdqkit.trt.placement.policy import matches

    x = ir.Value(name="x")
    conv = ir.Node("", "Conv", [x], outputs=[ir.Value(name="249")], name=None)
    assert matches(conv, ["<unnamed Conv -> 249>"]) == "<unnamed Conv -> 249>"
    assert matches(conv, ["<unnamed Conv -> 250>", "Relu"]) is None
    assert matches(conv, ["Conv"]) == "Conv"


def test_dla_copies_in_front_of_a_network_output_share_one_scale() -> None:
    """A head split in two, one half reshaped and transposed to a network output: on DLA that
    output carries a scale too (I2), and the copies pass their input's, so no requantizing
    Reformat appears between the Transpose and the output's Q."""
    from qdqkit.examples.graph import GraphBuilder

    g = GraphBuilder("head", seed=5)
    x = g.input("x", [1, 64, 8, 8])
    gains = np.concatenate([np.ones(32), np.full(32, 10.0)]).astype(np.float32)
    y = g.node("Mul", [x, g.const(gains.reshape(1, 64, 1, 1))], name="gain", out="gained")
    sizes = g.const(np.array([32, 32], np.int64))
    small = g.node("Split", [y, sizes], name="split", out="half", outputs=2, axis=1)
    shape = g.const(np.array([1, 32, 64], np.int64))
    flat = g.node("Reshape", [small, shape], name="flat", out="flat")
    g.node("Transpose", [flat], name="perm", out="scores", perm=[0, 2, 1])
    g.node("Relu", ["half1"], name="relu", out="other")
    g.output("scores", [1, 64, 32])
    g.output("other", [1, 32, 8, 8])
    result = quantize(g.proto(), calibration_batches(g, 4), trt="8.6", target="dla", method="max")
    model = result.model
    assert model is not None
    dq = next(v for v in model.graph.outputs if v.name == "scores").producer()
    assert dq is not None and dq.op_type == "DequantizeLinear"  # the output's own Q/DQ (I2)
    output_scale = float(dq.inputs[1].const_value.numpy())
    # The large half sets the Split's range; the small half's copies, output included, keep it.
    assert _scale_of_q(model, "gained") == _scale_of_q(model, "flat") == output_scale
    linted = lint(ir.from_proto(ir.serde.serialize_model(model)), trt="8.6", target="dla")
    assert not [f for f in linted.findings("QDQ407") if "requantize" in f.message]


def _float_tail_head():  # type: ignore[no-untyped-def]
    """A classifier and a mask head whose last layers run float (Softmax), a copy on either side
    of one of them, as detectors and classifiers end."""
    from qdqkit.examples.graph import GraphBuilder

    g = GraphBuilder("tail", seed=3)
    x = g.input("x", [1, 8, 8, 8])
    y = g.node("Relu", [g.conv(x, 8, 16, name="body", weight="float")], name="relu")
    pooled = g.node("Flatten", [g.node("GlobalAveragePool", [y], name="gap")], name="flat")
    g.node("Softmax", [g.gemm(pooled, 16, 10, name="fc", weight="float")], name="cls", out="probs", axis=1)
    logits = g.conv(y, 16, 4, 1, name="mask_conv", weight="float")
    rows = g.node("Reshape", [logits, g.const(np.array([1, 4, 64], np.int64))], name="rows")
    soft = g.node("Softmax", [rows], name="spatial", axis=2)
    g.node("Reshape", [soft, g.const(np.array([1, 4, 8, 8], np.int64))], name="unrows",
           out="mask")
    g.output("probs", [1, 10])
    g.output("mask", [1, 4, 8, 8])
    return g


def test_dla_leaves_a_float_tail_before_the_network_outputs_unscaled() -> None:
    """On DLA every tensor gets a scale (I2), except a float tail: a Softmax writing a network
    output, directly or through a copy, runs float whatever its scales, so a Q/DQ on its output
    would be a standalone Q and DQ, and one on its input a Reformat after an INT8 writer."""
    from qdqkit.examples.graph import run_model
    from qdqkit.translation.api import TranslateOptions, translate_model

    g = _float_tail_head()
    result = quantize(g.proto(), calibration_batches(g, 4), trt="8.6", target="dla", method="max")
    model = result.model
    assert model is not None and result.lint_errors == 0
    for output in model.graph.outputs:
        assert not is_dequantize(output.producer()), output.name
    softmaxes = [n for n in model.graph if n.op_type == "Softmax"]
    assert len(softmaxes) == 2
    for softmax in softmaxes:  # nor on their inputs, through the Reshape in front of one
        source = softmax.inputs[0].producer()
        if source.op_type == "Reshape":
            source = source.inputs[0].producer()
        assert not is_dequantize(source), node_label(softmax)
    # The weighted layers in front of the tail keep their INT8 inputs.
    for name in ("fc", "mask_conv"):
        weighted = next(n for n in model.graph if n.name == name)
        assert is_dequantize(weighted.inputs[0].producer()), name
    written = ir.from_proto(ir.serde.serialize_model(model))
    linted = lint(written, trt="8.6", target="dla")
    assert linted.errors == 0
    assert not linted.findings("QDQ205") and not linted.findings("QDQ407")
    feeds = calibration_batches(g, 1)[0]
    for got, want in zip(run_model(written, feeds), g.run(feeds), strict=True):
        assert np.abs(got - want).max() < 0.05
    translation = translate_model(written, TranslateOptions())
    assert sorted(translation.fp16_nodes) == ["cls", "rows", "spatial", "unrows"]  # the tail
    assert "probs" not in translation.scales and "fc" not in translation.fp16_nodes


def test_dla_ranges_a_conv_output_only_where_translate_cannot_derive_it() -> None:
    """A ReLU's input takes its output's range exactly (H6): no Q/DQ of its own. A SiLU's conv
    output and Sigmoid output would be guessed (H7): each gets its own, calibrated."""
    def ranged_inputs(family, reader: str) -> set[str]:  # type: ignore[no-untyped-def]
        """Producers of the tensors ``reader`` nodes read through Q/DQ."""
        model = _quantized(family(), "10", target="dla").model
        found = set()
        for node in model.graph:
            if node.op_type != reader:
                continue
            for value in node.inputs:
                dq = value.producer() if value is not None else None
                if dq is not None and dq.op_type == "DequantizeLinear":
                    source = dq.inputs[0].producer().inputs[0].producer()
                    found.add(source.op_type if source is not None else "input")
        return found

    assert "Conv" not in ranged_inputs(resnet, "Relu")
    assert ranged_inputs(yolo, "Sigmoid") >= {"Conv"}
    assert ranged_inputs(yolo, "Mul") >= {"Conv", "Sigmoid"}


def test_dla_leaves_translate_no_fused_layer_to_pin_fp16() -> None:
    """BatchNorm as a Paddle export writes it (a constant Mul and Add after the conv) and a
    HardSwish: without a range on the tensors between them, translate pins those layers FP16
    (H9) and the fused INT8 layer with them; a ReLU's input is derived from its output (H6)."""
    from qdqkit.examples.graph import GraphBuilder
    from qdqkit.translation.api import TranslateOptions, translate_model

    g = GraphBuilder("affine", seed=4, opset=14)
    x = g.input("x", [1, 16, 8, 8])
    y = g.conv(x, 16, 32, weight="float", name="c1")
    gamma = g.const(np.linspace(0.5, 2.0, 32, dtype=np.float32).reshape(1, 32, 1, 1))
    beta = g.const(np.linspace(-1.0, 1.0, 32, dtype=np.float32).reshape(1, 32, 1, 1))
    y = g.node("HardSwish", [g.node("Add", [g.node("Mul", [y, gamma]), beta])])
    y = g.node("Relu", [g.conv(y, 32, 32, weight="float", name="c2")], name="r2", out="y")
    g.output(g.conv(y, 32, 32, weight="float", name="c3"))
    result = quantize(g.proto(), calibration_batches(g, 4), target="dla", method="max")
    assert result.options["trt"] == "10" and result.lint_errors == 0
    model = ir.from_proto(ir.serde.serialize_model(result.model))
    translation = translate_model(model, TranslateOptions(add_unary_ew_scales_for_dla=True))
    assert translation.fp16_nodes == [] and translation.unscaled_tensors == []
    assert "c2_out" not in {n.inputs[0].name for n in result.model.graph
                            if n.op_type == "QuantizeLinear"}  # the ReLU's input: derived


@pytest.mark.parametrize("float_input", [False, True])
def test_a_pointwise_layer_reading_float_math_stays_float(float_input: bool) -> None:
    # Mul(a, b) read by an INT8 conv runs INT8 between INT8 convs (C8); with one input from
    # float math (a Softmax) that input would need a standalone Q, so the Mul stays float and
    # the conv after it takes the one Q.
    from tests.quantization.float_models import GraphBuilder

    g = GraphBuilder("gate", seed=5)
    x = g.node("Relu", [g.conv(g.input("x", [1, 32, 16, 16]), 32, 32, weight="float", name="a")])
    y = g.node("Relu", [g.conv(x, 32, 32, weight="float", name="b")])
    other = g.node("Softmax", [x], axis=1) if float_input else \
        g.node("Relu", [g.conv(x, 32, 32, weight="float", name="c")])
    gated = g.node("Mul", [y, other], name="gate")
    g.output(g.conv(gated, 32, 32, weight="float", name="after"))
    placement = plan_placement(g.ir())
    quantized = {p.value.name for p in placement.points}
    assert ([n.name for n in placement.int8_ops] == ["gate"]) is not float_input
    assert ("relu2_out" in quantized) is not float_input  # the Mul's INT8 input from conv b
    assert "gate_out" in quantized  # the conv after it reads INT8 either way


def test_dla_gives_no_scale_where_only_float_layers_read_and_one_per_tensor() -> None:
    # The SVTR recognizer on DLA: its token MatMuls, LayerNorms and Softmax fall back to the GPU
    # or have no INT8 form. A scale on what only they read would be a Reformat after an INT8
    # writer (QDQ205); a residual Add on DLA cannot fuse into a MatMul on the GPU, so its input
    # needs its own scale; and a tensor's scale is read by all its readers, as the cache gives it.
    from qdqkit.core.qdq import is_quantize
    from qdqkit.linting import lint
    from qdqkit.quantization import quantize
    from tests.quantization.float_models import calibration_batches, svtr

    builder = svtr()
    model = quantize(builder.proto(), calibration_batches(builder, 2), target="dla").model
    assert model is not None
    codes = lint(model, trt="10", target="dla").codes()
    assert not {"QDQ201", "QDQ202", "QDQ205", "QDQ302"} & set(codes)
    assert codes.count("QDQ407") <= 1  # one group: two Qs behind a float LayerNorm's copies
    for q in (n for n in model.graph if is_quantize(n)):
        source = q.inputs[0]
        assert source is not None
        assert all(is_quantize(u.node) or u.node.op_type == "Shape" for u in source.uses()), \
            source.name


def test_dla_leaves_an_lstm_input_unscaled_and_quantizes_the_gemm_after_it() -> None:
    # ddddocr's recognizer: a CNN into an LSTM (no INT8 form, GPU) into a Gemm.
    from qdqkit.linting import lint
    from qdqkit.quantization import quantize
    from tests.quantization.float_models import GraphBuilder, calibration_batches

    g = GraphBuilder("crnn", seed=2, opset=17)
    y = g.node("Relu", [g.conv(g.input("x", [1, 16, 8, 32]), 16, 32, weight="float")])
    y = g.node("MaxPool", [y], kernel_shape=[8, 1], strides=[8, 1])
    seq = g.node("Transpose", [g.node("Squeeze", [y, g.const(np.array([2], np.int64))])],
                 perm=[2, 0, 1], name="to_steps")
    weights = [g.const(g.rng.normal(0, 0.1, shape).astype(np.float32))
               for shape in ((1, 128, 32), (1, 128, 32), (1, 256))]
    g.node("LSTM", [seq, *weights], name="lstm", outputs=3, hidden_size=32)
    steps = g.node("Reshape", ["lstm_out0", g.const(np.array([32, 32], np.int64))])
    g.output(g.gemm(steps, 32, 64, weight="float", out="logits"))
    model = quantize(g.proto(), calibration_batches(g, 2), target="dla").model
    assert model is not None
    quantized = {n.inputs[0].name for n in model.graph if n.op_type == "QuantizeLinear"
                 and n.inputs[0] is not None}
    assert "to_steps_out" not in quantized  # only the LSTM reads it
    assert not {"QDQ205", "QDQ407"} & set(lint(model, trt="10", target="dla").codes())


def test_dla_a_weighted_op_whose_weight_is_computed_is_still_an_int8_layer() -> None:
    # Caffe2's stub models compute weights (ConstantOfShape), so the placement keeps such a conv
    # out of its weight decisions (fix meets them as int8 weights behind DQs); on DLA it is
    # still a layer with INT8 ranges, not a float layer: as one, a Concat of two such convs
    # would run float and fix of onnxruntime's DenseNet left 58 Concats mixing (QDQ302).
    import onnx

    from tests.quantization.float_models import GraphBuilder

    g = GraphBuilder("computed", seed=4)
    x = g.node("Relu", [g.conv(g.input("x", [1, 8, 8, 8]), 8, 8, weight="float", name="c1")])
    branches = []
    for name in ("c2", "c3"):
        ones = g.node("ConstantOfShape", [g.const(np.array([8, 8, 3, 3], np.int64))],
                      value=onnx.numpy_helper.from_array(np.array([0.01], np.float32)))
        branches.append(g.node("Conv", [x, ones], name=name, kernel_shape=[3, 3],
                               pads=[1, 1, 1, 1]))
    cat = g.node("Concat", branches, name="cat", axis=1)
    g.output(g.conv(cat, 16, 8, weight="float", name="c4"))
    placement = plan_placement(g.ir(), target="dla")
    assert not next(d for d in placement.weighted if d.node.name == "c2").quantized
    assert {"c2_out", "c3_out"} <= {p.value.name for p in placement.points}
