"""``fix`` on each producer's spelling and on real models: lint clean after, numerics kept."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import onnx_ir as ir
import pytest

from qdqkit.core.errors import QdqkitError
from qdqkit.core.numerics import error_metrics
from qdqkit.examples.graph import GraphBuilder, run_model
from qdqkit.examples.resnet import resnet18_qdq
from qdqkit.fixing import fix
from qdqkit.linting import lint
from qdqkit.quantization import quantize
from tests.fixing import producers

BUILT: dict[str, Callable[[], ir.Model]] = {
    "modelopt": producers.modelopt,
    "pytorch-quantization": producers.pytorch_quantization,
    "nncf": producers.nncf,
    "ppq": producers.ppq,
    "tf-qat": producers.tf_qat,
}


def _fixable_codes(model: ir.Model | Path) -> set[str]:
    return {g.code for g in lint(model).groups if g.fixable}


def _feeds(model: ir.Model, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.inputs:
        if value.const_value is not None:
            continue  # an initializer listed as an input (IR version 3)
        shape = [d if isinstance(d, int) else 1 for d in value.shape or ()]
        dtype = np.float16 if value.dtype == ir.DataType.FLOAT16 else np.float32
        feeds[value.name or ""] = rng.standard_normal(shape).astype(dtype)
    return feeds


def _snr(model_a: ir.Model | Path, model_b: ir.Model | Path,
         feeds: list[dict[str, np.ndarray]]) -> float:
    refs = np.concatenate([run_model(model_a, f)[0].astype(np.float64).ravel() for f in feeds])
    outs = np.concatenate([run_model(model_b, f)[0].astype(np.float64).ravel() for f in feeds])
    return error_metrics(refs, outs).snr_db


@pytest.mark.parametrize("producer", sorted(BUILT))
def test_each_producer_is_lint_clean_after_fix_and_keeps_its_numerics(producer: str) -> None:
    model = BUILT[producer]()
    assert _fixable_codes(model), "the producer's spelling must give fix something to do"
    result = fix(model)
    assert result.model is not None and result.changed
    left = {u.code for u in result.unfixed}
    assert left == set()
    assert _fixable_codes(result.model) == left
    assert result.after.reformats <= result.before.reformats
    feeds = [_feeds(model, seed) for seed in range(2)]
    assert _snr(model, result.model, feeds) >= 30.0


def test_fix_names_what_it_changed_rule_by_rule_and_node_by_node() -> None:
    result = fix(producers.nncf())
    by_rule = result.by_rule()
    # Every finding gets its fix called; a finding whose tensors an earlier fix already repaired
    # records no change of its own.
    assert {a.code for a in result.actions} == {"QDQ202", "QDQ203"} and "QDQ202" in by_rule
    changes = [c for actions in by_rule.values() for a in actions for c in a.changes]
    assert any(c.startswith("'c2_bn_out': Q/DQ for [add] -> [none]") for c in changes), changes
    assert all(a.rule for actions in by_rule.values() for a in actions)
    assert any(p.startswith("BatchNormalization 'c1_bn' folded") for p in result.prepared)


def test_tf_qat_weight_paths_fold_and_requantize_chain_goes() -> None:
    model = producers.tf_qat()
    result = fix(model)
    fixed = result.model
    assert fixed is not None
    assert not [n for n in fixed.graph if n.op_type in ("Transpose", "BatchNormalization")]
    assert any("DQ -> Transpose folded" in p for p in result.prepared)
    # The DQ -> Q chain with equal scales became one pair.
    quantizers = [n for n in fixed.graph if n.op_type == "QuantizeLinear"
                  and n.inputs[0] is not None and n.inputs[0].const_value is None]
    assert len(quantizers) == 2
    assert _snr(model, fixed, [_feeds(model)]) >= 30.0


def test_missing_scale_is_skipped_without_data_and_calibrated_with_it() -> None:
    model = producers.needs_calibration()
    assert "QDQ101" in _fixable_codes(model)
    without = fix(model)
    assert [u.code for u in without.unfixed] == ["QDQ101"]
    assert without.skipped and "--calib" in without.skipped[0]
    assert without.exit_code == 1
    calibrated = fix(model, calib="random", calib_limit=2)
    assert calibrated.skipped == [] and calibrated.after.int8_mac_share == 1.0
    assert "QDQ101" not in _fixable_codes(calibrated.model)  # type: ignore[arg-type]
    # The Q after the Tanh is a Reformat of its own, the price of the conv's INT8 (D1): the
    # policy places it, and lint does not call it a stray Q/DQ (QDQ407).
    assert calibrated.unfixed == [] and calibrated.exit_code == 0
    assert calibrated.after.reformats == 1


def test_a_q_only_an_int8_weighted_op_reads_is_not_a_stray_qdq() -> None:
    g = GraphBuilder("tanh", seed=7)
    y = g.node("Tanh", [g.input("x", [1, 32, 16, 16])], name="tanh")
    conv = g.conv(g.qdq(y, 1 / 127, name="act"), 32, 32, name="conv")
    g.output(g.node("Relu", [conv], name="relu"))
    needed = g.ir()
    assert "QDQ407" not in lint(needed).codes() and lint(needed).summary.reformats == 1
    g = GraphBuilder("tanh", seed=7)
    y = g.node("Tanh", [g.input("x", [1, 32, 16, 16])], name="tanh")
    g.output(g.node("Sigmoid", [g.qdq(y, 1 / 127, name="act")], name="float_reader"))
    assert "QDQ407" in lint(g.ir()).codes()  # read by a float op: a Q/DQ for nothing


def test_pytorch_quantization_plain_qat_resnet18_reaches_the_qgap_engine_with_calibration(
) -> None:
    plain = fix(resnet18_qdq("qat", batch=1), calib="random", calib_limit=1)
    canonical = lint(ir.serde.deserialize_model(resnet18_qdq("qat-residual-qgap", batch=1)))
    assert plain.unfixed == []
    assert plain.after.reformats == canonical.summary.reformats == 1
    assert plain.after.int8_output_layers == canonical.summary.int8_output_layers


@pytest.fixture(scope="module")
def ort_trt(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    return producers.ort_resnet18(tmp_path_factory.mktemp("ort"), "trt")


def test_onnxruntime_resnet18_reaches_the_qat_residual_qgap_engine(
    ort_trt: tuple[Path, Path], tmp_path: Path
) -> None:
    float_path, qdq_path = ort_trt
    before = lint(qdq_path)
    assert sum(len(g.findings) for g in before.groups if g.fixable) > 20
    out = tmp_path / "fixed.onnx"
    result = fix(qdq_path, output=out)
    assert result.unfixed == [] and _fixable_codes(out) == set()
    canonical = lint(ir.serde.deserialize_model(resnet18_qdq("qat-residual-qgap", batch=1)))
    engine = lint(out).engine
    from qdqkit.trt.engine_analysis import int8_conv_outputs

    assert result.after.reformats == canonical.summary.reformats == 1
    assert int8_conv_outputs(engine) == int8_conv_outputs(canonical.engine) == 20
    assert result.after.int8_output_layers == canonical.summary.int8_output_layers == 21
    assert result.before.reformats > 1
    photos = [{"input": p[None]} for p in producers.photos()]
    assert _snr(qdq_path, out, photos) >= 30.0
    original_vs_float = _snr(float_path, qdq_path, photos)
    fixed_vs_float = _snr(float_path, out, photos)
    assert fixed_vs_float >= original_vs_float - 0.1


def test_fix_is_idempotent_and_byte_deterministic(ort_trt: tuple[Path, Path],
                                                  tmp_path: Path) -> None:
    _, qdq_path = ort_trt
    first, second, again = tmp_path / "a.onnx", tmp_path / "b.onnx", tmp_path / "c.onnx"
    fix(qdq_path, output=first)
    fix(qdq_path, output=second)
    assert first.read_bytes() == second.read_bytes()
    result = fix(first, output=again)
    assert result.nothing_to_fix and not result.changed and result.exit_code == 0
    assert again.read_bytes() == first.read_bytes()


def test_onnxruntime_default_preset_is_fixed_or_refused_by_name(tmp_path: Path) -> None:
    _, qdq_path = producers.ort_resnet18(tmp_path, "default")
    try:
        run_model(qdq_path, {"input": producers.photos()[:1]})
    except Exception:
        # Some onnxruntime versions write per-channel weight scales without their axis: a model
        # the spec (and onnxruntime itself) rejects. fix names the node instead of guessing.
        with pytest.raises(QdqkitError, match=r"DequantizeLinear '.*weight.*' .* ONNX spec"):
            fix(qdq_path)
        return
    result = fix(qdq_path)
    assert result.unfixed == []


@pytest.mark.parametrize("name", ["mnist_ort_qdq.onnx", "mnist_ort_qdq_wqdq.onnx",
                                  "ultraface_ort_qdq.onnx", "torch_fq_qat.onnx"])
def test_real_quantized_fixtures_are_lint_clean_after_fix(name: str) -> None:
    path = producers.FIXTURES / "translate" / name
    result = fix(path)
    assert result.fixable_before > 0
    assert result.unfixed == [] and result.model is not None
    assert _fixable_codes(result.model) == set()
    assert result.after.reformats < result.before.reformats
    model = ir.load(path)
    assert _snr(path, result.model, [_feeds(model, s) for s in range(2)]) >= 30.0


def test_repairs_leave_no_initializer_nothing_reads() -> None:
    # The scales and zero points of the Q/DQ a repair removes go with them: onnxruntime warns
    # once for each unread initializer when it loads a model. One the input left unread stays.
    model = ir.load(producers.FIXTURES / "translate" / "ultraface_ort_qdq.onnx")
    spare = ir.Value(name="spare_constant", const_value=ir.tensor(np.ones(3, np.float32)))
    model.graph.register_initializer(spare)
    result = fix(model)
    assert result.model is not None and result.actions
    unread = [name for name, value in result.model.graph.initializers.items()
              if not value.uses() and not value.is_graph_output()]
    assert unread == ["spare_constant"]


def test_selected_rules_only_and_unfixable_rule_refused() -> None:
    model = producers.nncf()
    result = fix(model, rules=["QDQ203"])
    assert set(result.by_rule()) <= {"QDQ203"}
    with pytest.raises(QdqkitError, match=r"QDQ501 .* has no fix"):
        fix(model, rules=["float-model"])


def test_the_callers_model_is_never_changed() -> None:
    model = producers.nncf()
    before = ir.serde.serialize_model(model).SerializeToString()
    fix(model)
    assert ir.serde.serialize_model(model).SerializeToString() == before


def test_a_float_model_has_nothing_to_fix(tmp_path: Path) -> None:
    path = producers.FIXTURES / "translate" / "mnist.onnx"
    result = fix(path, output=tmp_path / "out.onnx")
    assert result.nothing_to_fix and result.exit_code == 0
    assert (tmp_path / "out.onnx").read_bytes() == path.read_bytes()
    assert onnx.load(tmp_path / "out.onnx") is not None


def test_a_cast_network_input_is_quantized_before_its_cast() -> None:
    model = producers.modelopt()
    cast = next(n for n in model.graph if n.op_type == "Cast" and n.inputs[0] is not None
                and n.inputs[0].is_graph_input())
    assert "QDQ407" in lint(model).codes()  # Cast layer, then the Q as its own Reformat
    result = fix(model)
    fixed = result.model
    assert fixed is not None and any("before Cast" in p for p in result.prepared)
    network_input = fixed.graph.inputs[0]
    assert [u.node.op_type for u in network_input.uses()] == ["QuantizeLinear"]
    q = next(u.node for u in network_input.uses())
    dq = next(u.node for u in q.outputs[0].uses())
    assert q.inputs[1] is not None and q.inputs[1].const_value is not None
    assert q.inputs[1].const_value.dtype == ir.DataType.FLOAT
    assert dq.inputs[1] is not None and dq.inputs[1].const_value is not None
    assert dq.inputs[1].const_value.dtype == ir.DataType.FLOAT16  # still writes float16
    assert cast.name not in {n.name for n in fixed.graph}
    codes = lint(fixed).codes()
    assert "QDQ406" in codes and "QDQ407" not in codes  # the network input's own Reformat (B8)
    assert result.after.layers < result.before.layers


def test_a_q_behind_a_cast_input_and_copies_moves_onto_the_input() -> None:
    # The float16 remainder casts the input, then a zero Pad and a Reshape lead to the conv:
    # its Q there is a standalone Reformat. The target quantizes the input itself, the Pad and
    # the Reshape running INT8 behind it, as quantize places a float model.
    from tests.models import padded_channels_last_input_model

    float_model = padded_channels_last_input_model()
    quantized = quantize(float_model, "random", calib_limit=2, method="max", keep_unpaid=True)
    assert quantized.model is not None
    moved = ir.from_proto(ir.serde.serialize_model(quantized.model))
    # As the placement was before: the input's float16 Cast, no Q/DQ until the conv's.
    network_input = moved.graph.inputs[0]
    q = next(u.node for u in network_input.uses())
    dq = next(u.node for u in q.outputs[0].uses())
    cast = ir.node("Cast", [network_input], attributes={"to": ir.DataType.FLOAT16})
    cast.outputs[0].name, cast.outputs[0].dtype = "x_fp16", ir.DataType.FLOAT16
    moved.graph.insert_before(q, cast)
    dq.outputs[0].replace_all_uses_with(cast.outputs[0])
    moved.graph.remove([dq, q], safe=True)
    assert "QDQ407" in lint(moved).codes()
    result = fix(moved)
    assert result.model is not None and "QDQ407" not in lint(result.model).codes()
    network_input = result.model.graph.inputs[0]
    assert [u.node.op_type for u in network_input.uses()] == ["QuantizeLinear"]
    assert _snr(moved, result.model, [_feeds(moved, seed) for seed in range(4)]) > 30


def test_a_cast_network_input_read_in_float_too_keeps_its_cast() -> None:
    model = producers.modelopt()
    cast = next(n for n in model.graph if n.op_type == "Cast" and n.inputs[0] is not None
                and n.inputs[0].is_graph_input())
    model.graph.outputs.append(cast.outputs[0])  # the float16 copy is a network output too
    result = fix(model)
    assert result.model is not None and not any("before Cast" in p for p in result.prepared)
    assert cast.name in {n.name for n in result.model.graph}


def _float16_model_with_a_float_skip() -> ir.Model:
    """quantize's TensorRT 11 output (float16 remainder, opset 19), one residual skip then read
    around its Q/DQ, as a hand edit or another tool would leave it (QDQ201)."""
    from qdqkit.core.qdq import is_dequantize
    from qdqkit.quantization import quantize
    from tests.quantization.float_models import calibration_batches, residual_chain

    builder = residual_chain()
    result = quantize(builder.proto(), calibration_batches(builder, 2), trt="11", method="max")
    model = result.model
    assert model is not None
    add = next(n for n in model.graph if n.op_type == "Add")
    dq = add.inputs[0].producer()
    assert dq is not None and is_dequantize(dq)
    q = dq.inputs[0].producer()
    assert q is not None
    add.replace_input_with(0, q.inputs[0])
    return model


def test_fix_quantizes_a_float16_tensor_with_a_float16_pair_and_no_casts() -> None:
    model = _float16_model_with_a_float_skip()
    before = lint(model, trt="11")
    assert "QDQ201" in before.codes()
    casts = sum(1 for n in model.graph if n.op_type == "Cast")
    result = fix(model, trt="11")
    fixed = result.model
    assert fixed is not None and result.changed and not result.unfixed
    assert sum(1 for n in fixed.graph if n.op_type == "Cast") == casts  # no Cast around the pair
    after = lint(fixed, trt="11")
    assert after.errors == 0 and "QDQ201" not in after.codes()
    assert result.after.reformats < result.before.reformats


def test_lint_and_fix_judge_a_quantized_model_for_what_it_was_built_for() -> None:
    # quantize records --trt and --target in the model; lint and fix given neither use them.
    model = _float16_model_with_a_float_skip()
    linted = lint(model)
    assert (linted.trt, linted.target, linted.from_model) == ("11", "gpu", ["trt", "target"])
    given = lint(model, trt="10")
    assert (given.trt, given.from_model) == ("10", ["target"])
    assert fix(model, dry_run=True).trt == "11"
    model.metadata_props["qdqkit.quantize"] = '{"options": {"trt": "7", "target": "tpu"}}'
    unreadable = lint(model)  # a record naming nothing known counts as none
    assert (unreadable.trt, unreadable.target, unreadable.from_model) == ("8.6", "gpu", [])


def _attention_output_projection() -> ir.Model:
    """onnxruntime's spelling of attention: the core MatMul reads two Q/DQ activations, and the
    small output projection reads a Q/DQ of its result through a Transpose."""
    g = GraphBuilder("attention", seed=5)
    x = g.input("x", [1, 16, 32])
    keys = g.node("Transpose", [x], perm=[0, 2, 1], name="keys")
    core = g.node("MatMul", [g.qdq(x, 0.03, name="q_in"), g.qdq(keys, 0.03, name="k_in")],
                  name="core")
    mixed = g.node("Transpose", [core], perm=[0, 2, 1], name="mix")
    weight = g.weight((16, 32), name="proj.weight")
    g.output(g.node("MatMul", [g.qdq(mixed, 0.4, name="proj_in"), weight], name="proj"))
    return g.ir()


def test_a_standalone_q_that_does_not_pay_is_settled_float_as_quantize_would() -> None:
    model = _attention_output_projection()
    result = fix(model)
    fixed = result.model
    assert fixed is not None
    # The attention core goes float (C16), so the projection's Q could only be a Reformat of its
    # own, for a layer too small to save its cost: the projection reads float instead.
    assert list(result.unpaid_float) == ["proj"] and "E1" in result.unpaid_float["proj"]
    assert not result.unfixed and result.exit_code == 0 and result.after.reformats == 0
    relinted = lint(fixed)
    assert "QDQ407" not in relinted.codes() and "QDQ102" not in relinted.codes()
    feeds = [_feeds(model, seed) for seed in range(2)]
    assert _snr(model, fixed, feeds) >= 30.0


def test_a_standalone_q_in_a_region_that_pays_is_weighed_alone() -> None:
    # YOLO11's attention block placed whole (quantize --keep-unpaid): the positional-encoding
    # conv's Q stands alone behind the float attention. Its region pays as a whole, so only the
    # single-Q judgement sees the engine gains with that conv float, as quantize decides it.
    from tests.quantization.float_models import calibration_batches, psa

    builder = psa()
    placed = quantize(builder.proto(), calibration_batches(builder, 2), trt="11",
                      keep_unpaid=True).model
    assert placed is not None and "QDQ407" in lint(placed, trt="11").codes()
    result = fix(placed, trt="11")
    assert result.model is not None and result.exit_code == 0
    assert list(result.unpaid_float) == ["pe"] and "predicted faster" in result.unpaid_float["pe"]
    assert "QDQ407" not in lint(result.model, trt="11").codes()


@pytest.mark.parametrize("constant_node", [False, True])
def test_a_per_tensor_float_weight_is_quantized_again_per_channel(constant_node: bool) -> None:
    # ModelOpt quantizes weights stored in Constant nodes (paddle2onnx's way) with one scale: a
    # channel of small weights then loses its values to the largest channel's step. fix goes
    # back to the float weight behind the Q and quantizes it per output channel (QDQ403).
    from qdqkit.examples.graph import GraphBuilder, run_model

    g = GraphBuilder("per_tensor", seed=3)
    x = g.input("x", [1, 16, 8, 8])
    w = g.rng.normal(0, 0.1, (16, 16, 3, 3)).astype(np.float32)
    w[8:] *= 0.001  # half the channels 1000x smaller: under half a per-tensor step
    scale = np.float32(np.abs(w).max() / 127)
    params = [g.const(np.array(scale), "w_scale"), g.const(np.array(0, np.int8), "w_zp")]
    stored = g.constant(w, "w") if constant_node else g.const(w, "w")
    wq = g.node("QuantizeLinear", [stored, *params], name="w_Q")
    y = g.node("Conv", [g.qdq(x, 0.02, name="x"), g.node("DequantizeLinear", [wq, *params],
                                                         name="w_DQ")],
               name="conv", pads=[1, 1, 1, 1], kernel_shape=[3, 3])
    g.output(g.node("Relu", [y], name="relu"))
    model = g.ir()
    assert "QDQ403" in _fixable_codes(model)
    result = fix(model, rules=["QDQ403"])
    assert result.model is not None and "QDQ403" not in _fixable_codes(result.model)
    feeds = {"x": g.rng.normal(0, 1, (1, 16, 8, 8)).astype(np.float32)}
    reference = GraphBuilder("float", seed=3)
    xf = reference.input("x", [1, 16, 8, 8])
    reference.output(reference.node("Relu", [reference.node(
        "Conv", [xf, reference.const(w, "w")], pads=[1, 1, 1, 1], kernel_shape=[3, 3])]))
    (want,) = run_model(reference.ir(), feeds)
    (before,) = run_model(model, feeds)
    (after,) = run_model(result.model, feeds)
    small = slice(8, 16)  # the channels the one scale all but zeroed come back

    def agreement(got: np.ndarray) -> float:
        return float(np.corrcoef(got[0, small].ravel(), want[0, small].ravel())[0, 1])

    assert np.abs(before[0, small]).max() == 0 and agreement(after) > 0.99


def test_the_mac_share_of_a_model_with_symbolic_inputs_is_taken_at_the_data_shapes() -> None:
    """A dynamic sequence that the graph slices and reshapes by (traced position ids, attention
    heads) leaves weighted ops unsized at the model's own shapes, so the INT8 share of MACs is
    unknown; with calibration data (or --shapes) ``fix`` reports it at those shapes, before and
    after."""
    from tests.core.test_shape_folding import _bert_embedding_pattern

    builder = _bert_embedding_pattern(width=256, heads=2, out=256)
    rng = np.random.default_rng(0)
    data = [{"x": rng.normal(0, 1, (1, 5, 256)).astype(np.float32)} for _ in range(2)]
    quantized = quantize(builder.proto(), data, method="max", keep_unpaid=True, trt="10").model
    assert quantized is not None
    blind = fix(quantized.clone(), dry_run=True)
    assert blind.before.int8_mac_share is None  # the premise
    result = fix(quantized.clone(), dry_run=True, calib=data)
    assert result.before.int8_mac_share == 1.0 and result.after.int8_mac_share is not None
    shaped = fix(quantized.clone(), dry_run=True, shapes={"x": [8, 5, 256]})
    assert shaped.before.int8_mac_share == 1.0


def _vit_fixture() -> tuple[Path, list[dict[str, np.ndarray]]]:
    path = Path(__file__).resolve().parents[1] / "fixtures" / "models" / "vit_tiny_random_qdq.onnx"
    rng = np.random.default_rng(0)
    return path, [{"pixel_values": rng.normal(0, 1, (1, 3, 224, 224)).astype(np.float32)}
                  for _ in range(2)]


def _layernorm_scales(model: ir.Model) -> dict[str, float]:
    from qdqkit.core.constants import constant_array

    return {n.inputs[0].name or "": float(np.asarray(constant_array(n.inputs[1])).ravel()[0])
            for n in model.graph if n.op_type == "QuantizeLinear" and n.inputs[0] is not None
            and "layernorm_before" in (n.inputs[0].name or "")}


def test_a_qdq_a_repair_round_moves_and_the_next_puts_back_keeps_its_scale() -> None:
    """On a ViT encoder as ``quantize`` writes it (FP16 remainder), the first round takes the
    standalone Q after each LayerNorm away and the next round puts it back for the MatMuls
    reading it. The scale it carried before the repairs is the one put back: the model ends as
    it began (before, the repair left the MatMuls with float activations, 2 -> 6 findings, and
    the INT8 share of MACs fell from 100% to 79%)."""
    path, data = _vit_fixture()
    result = fix(path, dry_run=True, calib=data)
    assert result.fixable_after <= result.fixable_before
    assert not any(u.code == "QDQ101" for u in result.unfixed) and not result.skipped
    assert result.after.int8_mac_share == result.before.int8_mac_share == 1.0
    assert result.model is not None
    assert _layernorm_scales(result.model) == _layernorm_scales(ir.load(path))


def test_a_scale_missing_only_in_a_later_round_is_calibrated(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """As if the moved Q/DQ had carried no scale: the scale is missing only in the second
    round, and is calibrated then (calibration used to run for the first round's gaps alone),
    on a float32 copy of the float model, whose FP16 remainder mixed with the float32 values
    the removed DQs leave onnxruntime refuses."""
    import qdqkit.fixing.api as fix_api

    monkeypatch.setattr(fix_api, "carried_scales", lambda model, view=None: {})
    path, data = _vit_fixture()
    result = fix(path, dry_run=True, calib=data)
    assert not any(u.code == "QDQ101" for u in result.unfixed) and not result.skipped
    assert result.after.int8_mac_share == 1.0
