"""``auto``'s choice by the output error: a tensor whose rare large values carry the output keeps
its max, and the samples it judges on depend on neither batch size nor order."""

from __future__ import annotations

import numpy as np
import onnx_ir as ir

from qdqkit.core.model_inputs import ModelInput
from qdqkit.core.numerics import make_session
from qdqkit.examples.graph import GraphBuilder
from qdqkit.quantization import quantize
from qdqkit.quantization.by_output import SampleKeeper


def _thresholded() -> GraphBuilder:
    """conv (identity) -> Relu -> t -> conv (identity, bias -0.8) -> Relu: the output is t's
    heavy tail above 0.8, which t's least-MSE clip cuts into."""
    g = GraphBuilder("tail", seed=0)
    x = g.input("x", ["N", 8, 16, 16])
    eye = np.eye(8, dtype=np.float32).reshape(8, 8, 1, 1)
    t = g.node("Relu", [g.node("Conv", [x, g.const(eye, "w1")], kernel_shape=[1, 1])], out="t")
    head = g.node("Conv", [t, g.const(eye, "w2"), g.const(np.full(8, -0.8, np.float32), "b2")],
                  kernel_shape=[1, 1], name="head")
    g.output(g.node("Relu", [head]))
    return g


def _data(count: int, seed: int = 1) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.laplace(0.0, 0.1, (1, 8, 16, 16)).astype(np.float32)}
            for _ in range(count)]


def _snr_db(model: ir.Model, reference: GraphBuilder, data: list[dict[str, np.ndarray]]) -> float:
    want = make_session(reference.proto().SerializeToString())
    got = make_session(ir.from_proto(ir.serde.serialize_model(model)))
    signal = noise = 0.0
    for feeds in data:
        a, b = want.run(None, feeds)[0], got.run(None, feeds)[0]
        signal += float(np.sum(a.astype(np.float64) ** 2))
        noise += float(np.sum((a.astype(np.float64) - b) ** 2))
    return 10.0 * float(np.log10(signal / noise))


def test_auto_keeps_the_max_where_clipping_costs_the_output() -> None:
    builder = _thresholded()
    data, held_out = _data(16), _data(24, seed=2)
    auto = quantize(builder.proto(), data, method="auto", trt="10")
    mse = quantize(builder.proto(), data, method="mse", trt="10")
    relu = next(t for t in auto.tensors if t.tensor == "t")
    assert relu.method == "max" and relu.clipped_fraction == 0.0
    assert next(t for t in mse.tensors if t.tensor == "t").amax < relu.amax  # it clips
    assert auto.model is not None and mse.model is not None
    assert _snr_db(auto.model, builder, held_out) > _snr_db(mse.model, builder, held_out) + 3.0
    report = auto.calibration["auto_by_output"]
    assert report["samples"] == 8 and report["runs"] >= 3
    assert set(report["gain_db"]) == {"max", "percentile", "least-error", "chosen"}
    assert report["gain_db"]["least-error"] == 0.0 and report["gain_db"]["chosen"] > 0.0
    assert "auto_by_output" not in mse.calibration


def test_samples_run_two_at_a_time_give_the_errors_of_one_at_a_time(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import qdqkit.quantization.by_output as by_output

    builder, data = _thresholded(), _data(16)
    threads: list[int] = []
    real_session = by_output.make_session

    def spy(model, **kwargs):  # type: ignore[no-untyped-def]
        threads.append(kwargs.get("threads", 0))
        return real_session(model, **kwargs)

    monkeypatch.setattr(by_output, "make_session", spy)
    monkeypatch.setattr(by_output, "available_cores", lambda: 4)
    at_once = quantize(builder.proto(), data, method="auto", trt="10")
    assert threads[-1] == 2  # the quantized model's session: half of four cores per run
    monkeypatch.setattr(by_output, "available_cores", lambda: 1)
    one_by_one = quantize(builder.proto(), data, method="auto", trt="10")
    assert threads[-1] == 0
    assert at_once.calibration["auto_by_output"] == one_by_one.calibration["auto_by_output"]
    assert [t.as_dict() for t in at_once.tensors] == [t.as_dict() for t in one_by_one.tensors]


def test_the_judged_samples_depend_on_neither_batch_size_nor_order() -> None:
    inputs = [ModelInput("x", np.dtype(np.float32), (None, 8, 16, 16))]
    data = np.concatenate([b["x"] for b in _data(10)])

    def kept(batches: list[np.ndarray]) -> list[bytes]:
        keeper = SampleKeeper(inputs)
        for batch in batches:
            keeper.offer({"x": batch})
        return [s["x"].tobytes() for s in keeper.samples()]

    ones = kept([data[i:i + 1] for i in range(10)])
    assert len(ones) == 8
    assert kept([data[i:i + 5] for i in (5, 0)]) == ones
    assert kept([data[i:i + 1] for i in (9, 2, 4, 0, 7, 1, 3, 8, 6, 5)]) == ones


def test_a_softmax_output_is_judged_on_its_logits() -> None:
    """Confident samples saturate a Softmax: its input shows how far the values moved."""
    from qdqkit.quantization.by_output import _expose_judged

    g = GraphBuilder("classifier", seed=0)
    logits = g.conv(g.input("x", [1, 8, 4, 4]), 8, 8, k=1, weight="float", name="logits")
    flat = g.node("Flatten", [logits])
    g.output(g.node("Softmax", [flat], axis=1))
    model = g.ir()
    judged = _expose_judged(model)
    assert [(j.name, j.kind, j.axis) for j in judged] == [(flat, "softmax", 1)]
    assert [v.name for v in model.graph.outputs][-1] == flat


def test_a_concat_output_is_judged_part_by_part() -> None:
    """A YOLOv8 export writes boxes (pixels) and class scores (a Sigmoid) into one Concat: each
    part is judged in its own units, the scores by their probabilities."""
    from qdqkit.quantization.by_output import _expose_judged

    g = GraphBuilder("detector", seed=0)
    x = g.input("x", [1, 8, 4, 4])
    boxes = g.node("Mul", [g.conv(x, 8, 4, k=1, weight="float"),
                           g.const(np.array(320.0, np.float32))])
    logits = g.conv(x, 8, 2, k=1, weight="float", name="cls")
    g.output(g.node("Concat", [boxes, g.node("Sigmoid", [logits])], axis=1))
    judged = _expose_judged(g.ir())
    assert [(j.name, j.kind) for j in judged] == [(boxes, "energy"), (logits, "sigmoid")]


def test_a_failed_judgement_keeps_the_per_tensor_picks_and_says_so(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from qdqkit.core.errors import QdqkitError
    from qdqkit.quantization import api

    def fails(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise QdqkitError("onnxruntime cannot run the model: test")

    monkeypatch.setattr(api, "choose_by_output", fails)
    result = quantize(_thresholded().proto(), _data(8), method="auto", trt="10")
    assert any("auto kept its per-tensor picks" in w for w in result.warnings)
    assert "auto_by_output" not in result.calibration
    assert next(t for t in result.tensors if t.tensor == "t").method != "max"


def test_dla_outputs_taken_over_by_their_dq_are_still_judged() -> None:
    """DLA quantizes network outputs too (its DQ takes the output's name): the tensor a Softmax
    reads is found by name in the quantized model all the same."""
    g = GraphBuilder("dla_classifier", seed=0)
    y = g.node("Relu", [g.conv(g.input("x", [1, 8, 4, 4]), 8, 8, k=1, weight="float")])
    g.output(g.node("Softmax", [g.node("Flatten", [g.conv(y, 8, 8, k=1, weight="float")])],
                    axis=1))
    rng = np.random.default_rng(0)
    data = [{"x": rng.normal(0, 1, (1, 8, 4, 4)).astype(np.float32)} for _ in range(8)]
    result = quantize(g.proto(), data, method="auto", trt="10", target="dla")
    assert result.warnings == [] and result.calibration["auto_by_output"]["runs"] >= 3


def test_the_chosen_models_output_snr_is_reported_as_measured_independently() -> None:
    """With exactly 8 calibration samples, the 8 ``auto`` keeps are all of them: its reported
    output SNR must match the quantized model's SNR measured here against the float model."""
    from tests.quantization.float_models import calibration_batches, resnet
    from tests.quantization.test_quantize import _snr_db

    builder = resnet()
    batches = calibration_batches(builder, 8)
    result = quantize(builder.proto(), batches, method="auto", trt="10")
    reported = result.calibration["auto_by_output"]["output_snr_db"]
    assert list(reported) == ["logits"]
    assert result.model is not None
    assert abs(reported["logits"] - _snr_db(builder, result.model, batches)) < 0.2


def test_an_output_whose_length_the_values_decide_is_judged_padded() -> None:
    """A decoder's Loop stops when a token says so, a Compress keeps what passes a threshold:
    quantized, such an output can come out longer or shorter. The steps one side lacks count as
    error in full; the search does not fail on the shapes."""
    from qdqkit.quantization.by_output import _Judged

    want, got = np.ones((1, 5, 2)), np.ones((1, 3, 2))
    assert _Judged("t", "energy").error(want, got) == 4.0
    assert np.isfinite(_Judged("t", "softmax", -1).error(want, got))
    g = GraphBuilder("thresholded_length", seed=2)
    conv = g.conv(g.input("x", [1, 8, 16, 16]), 8, 4, k=1, weight="float")
    values = g.node("Reshape", [conv, g.const(np.array([-1], np.int64))])
    kept = g.node("Greater", [values, g.const(np.array(0.0, np.float32))])
    g.output(g.node("Compress", [values, kept]))
    result = quantize(g.proto(), _data(8), method="auto", trt="10", keep_unpaid=True)
    assert "auto_by_output" in result.calibration


def test_the_output_snr_is_the_written_models_when_settle_keeps_regions_float() -> None:
    """Most of the small transformer's INT8 regions do not pay on a GPU: settle keeps them float
    after ``auto`` searched its scales on the all-INT8 placement. The SNR reported is the
    written model's, as measured here against the float model, not the searched placement's."""
    from qdqkit.core.qdq import is_quantize
    from tests.quantization.float_models import calibration_batches, transformer
    from tests.quantization.test_quantize import _snr_db

    builder = transformer()
    batches = calibration_batches(builder, 8)
    searched = quantize(builder.proto(), batches, method="auto", trt="10", keep_unpaid=True)
    result = quantize(builder.proto(), batches, method="auto", trt="10")
    assert result.model is not None and searched.model is not None
    count = sum(1 for n in result.model.graph if is_quantize(n))
    assert 0 < count < sum(1 for n in searched.model.graph if is_quantize(n))
    kept = searched.calibration["auto_by_output"]["output_snr_db"]["hidden"]
    written = result.calibration["auto_by_output"]["output_snr_db"]["hidden"]
    measured = _snr_db(builder, result.model, batches)
    assert abs(written - measured) < 0.2
    assert written > kept + 3.0  # the searched placement's figure would have been reported


def test_the_written_fp16_model_loads_after_its_snr_is_measured(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Measuring the written model runs an upcast clone of it: the model written afterwards
    keeps its own fp16 types (onnxruntime refuses a model whose declared types are wrong)."""
    from tests.quantization.float_models import calibration_batches, transformer

    builder = transformer()
    out = tmp_path / "q.onnx"
    result = quantize(builder.proto(), calibration_batches(builder, 8), output=out,
                      method="auto", trt="11")
    assert any(not w.quantized for w in result.weighted)  # settle kept a region float
    session = make_session(str(out))
    assert session.get_outputs()[0].name == "hidden"
