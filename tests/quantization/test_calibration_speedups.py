"""The calibration shortcuts give what the slow, literal way gives.

- The calibration session runs with onnxruntime's float optimizations (fusions, NCHWc); the
  scales of a real model stay within float rounding (max) or a bin (histogram methods) of a
  session with every optimization off.
- The opset conversion sees the model without its weights' bytes: the result is byte for byte
  the converter's on the whole model, and the caller's model is untouched.
- Ranges reduced inside the session (every tensor with ``max``, the FP16 watch list otherwise)
  are bit-identical to reducing the copied tensors, and a lone NaN is still named.
- The look-ahead run (the next batch runs while this one is folded in) gives the same scales as
  one batch at a time, and an error in a run still surfaces. So do two batches running at once
  (``max``, whose folding is free), which are kept for long passes on two or more cores.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import version_converter

import qdqkit.core.activations as activations
import qdqkit.quantization.calibrate as calibrate_module
from qdqkit.core.errors import QdqkitError
from qdqkit.core.numerics import make_session
from qdqkit.examples.graph import GraphBuilder
from qdqkit.quantization import quantize
from qdqkit.quantization.prepare import upgrade_opset
from tests.quantization.float_models import calibration_batches, resnet, yolo

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
ULTRAFACE = FIXTURES / "models" / "ultraface_rfb320.onnx"


def _batches(count: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    return [{"input": rng.uniform(-1.0, 1.0, (1, 3, 240, 320)).astype(np.float32)}
            for _ in range(count)]


# ``entropy``: a histogram method (``auto`` would add its choice by the output error, which
# compares configurations on a few samples and may tip either way on a one-bin difference).
@pytest.mark.parametrize("method", ["max", "entropy"])
def test_optimized_calibration_session_keeps_the_scales(monkeypatch, method: str) -> None:  # type: ignore[no-untyped-def]
    batches = _batches(3)
    fast = quantize(ULTRAFACE, batches, method=method, trt="10")
    monkeypatch.setattr(activations, "make_session",
                        lambda model, **kw: make_session(model, threads=kw.get("threads", 0)))
    literal = quantize(ULTRAFACE, batches, method=method, trt="10")
    assert [t.tensor for t in fast.tensors] == [t.tensor for t in literal.tensors]
    assert len(fast.tensors) > 40
    same = 0
    for a, b in zip(fast.tensors, literal.tensors, strict=True):
        absmax = max(-b.minimum, b.maximum)
        bin_width = math.ldexp(1.0, math.frexp(absmax)[1] - 11)  # the observer's 2048 bins
        if method == "max":
            assert a.amax == pytest.approx(b.amax, rel=1e-5), a.tensor
        else:
            assert abs(a.amax - b.amax) <= 2 * bin_width, a.tensor
        same += a.scale == b.scale
    if method != "max":
        assert same >= 0.9 * len(fast.tensors)  # a value on a bin edge may move one bin


def test_opset_conversion_without_weight_bytes_equals_the_converter() -> None:
    for builder in (resnet(), yolo()):
        model = builder.proto()
        for entry in model.opset_import:
            if entry.domain in ("", "ai.onnx"):
                assert entry.version < 19
        before = model.SerializeToString()
        converted = upgrade_opset(model, "m.onnx", 19)
        assert model.SerializeToString() == before
        expected = version_converter.convert_version(onnx.load_from_string(before), 19)
        assert converted.SerializeToString() == expected.SerializeToString()
        assert any(len(t.raw_data) > 1024 for t in converted.graph.initializer)
        # In place: the caller's own message becomes the same converted model.
        adopted = onnx.load_from_string(before)
        assert upgrade_opset(adopted, "m.onnx", 19, in_place=True) is adopted
        assert adopted.SerializeToString() == expected.SerializeToString()


def test_a_failed_conversion_in_place_leaves_the_model_as_it_was() -> None:
    # ImageScaler has no conversion past opset 9; the conv's weight is held aside meanwhile.
    g = GraphBuilder("blocked", seed=0, opset=8)
    x = g.input("x", [1, 3, 8, 8])
    scaled = g.node("ImageScaler", [x], name="preprocess", scale=1.0, bias=[0.0, 0.0, 0.0])
    g.output(g.conv(scaled, 3, 16, weight="float"), [1, 16, 8, 8])
    model = g.proto()
    before = model.SerializeToString()
    with pytest.raises(QdqkitError, match="cannot be converted"):
        upgrade_opset(model, "m.onnx", 19, in_place=True)
    assert model.SerializeToString() == before


def test_look_ahead_gives_the_scales_of_one_batch_at_a_time(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    builder = resnet()
    batches = calibration_batches(builder, 6)
    ahead = quantize(builder.proto(), batches, method="entropy", trt="11")
    monkeypatch.setattr(calibrate_module, "LOOK_AHEAD", False)
    serial = quantize(builder.proto(), batches, method="entropy", trt="11")
    assert [t.as_dict() for t in ahead.tensors] == [t.as_dict() for t in serial.tensors]
    assert ahead.fp32_nodes == serial.fp32_nodes


def test_parallel_runs_give_the_scales_of_one_batch_at_a_time(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(calibrate_module, "_cores", lambda: 4)
    made: list[int] = []
    real_init = activations.ActivationRunner.__init__

    def spy(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        made.append(kwargs.get("threads", 0))
        real_init(self, *args, **kwargs)

    monkeypatch.setattr(activations.ActivationRunner, "__init__", spy)
    builder = resnet()
    batches = calibration_batches(builder, 7)
    parallel = quantize(builder.proto(), batches, method="max", trt="11")
    assert made == [2]  # two runs at once, each on half of the four cores
    monkeypatch.setattr(calibrate_module, "LOOK_AHEAD", False)
    serial = quantize(builder.proto(), batches, method="max", trt="11")
    assert [t.as_dict() for t in parallel.tensors] == [t.as_dict() for t in serial.tensors]
    assert parallel.fp32_nodes == serial.fp32_nodes


@pytest.mark.parametrize(("method", "cores", "batches", "runs"), [
    ("max", 2, None, 2), ("max", 2, 4, 2), ("max", 2, 3, 1), ("max", 1, None, 1),
    ("mse", 8, None, 1),
])
def test_runs_at_once_only_where_they_pay(monkeypatch, method, cores, batches, runs) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setattr(calibrate_module, "_cores", lambda: cores)
    assert calibrate_module._parallel_runs(method != "max", batches) == runs


def test_errors_in_either_batch_of_the_look_ahead_still_surface(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    g = GraphBuilder("logs", seed=0)
    x = g.input("x", [1, 16, 4, 4])
    y = g.node("Log", [x], out="logged")
    g.conv(y, 16, 16, weight="float")
    g.output(g.nodes[-1].output[0], [1, 16, 4, 4])
    good = {"x": np.ones((1, 16, 4, 4), np.float32)}
    bad = {"x": -np.ones((1, 16, 4, 4), np.float32)}  # log(-1): NaN, found while folding in
    with pytest.raises(QdqkitError, match=r"'logged'.*NaN"):
        quantize(g.proto(), [good, bad, good, good], trt="10")
    runs = 0
    real_run = activations.ActivationRunner.run_reduced

    def failing_second_run(self, batches):  # type: ignore[no-untyped-def]
        nonlocal runs
        runs += 1
        if runs == 2:
            raise QdqkitError("onnxruntime failed while running the model: test")
        return real_run(self, batches)

    monkeypatch.setattr(activations.ActivationRunner, "run_reduced", failing_second_run)
    with pytest.raises(QdqkitError, match="onnxruntime failed"):
        quantize(g.proto(), [good, good, good], trt="10")
    # Two runs at once (max): a NaN in a middle batch and a failing run surface the same way.
    monkeypatch.setattr(calibrate_module, "_cores", lambda: 2)
    runs = 0
    with pytest.raises(QdqkitError, match="onnxruntime failed"):
        quantize(g.proto(), [good] * 6, trt="10", method="max")
    monkeypatch.setattr(activations.ActivationRunner, "run_reduced", real_run)
    with pytest.raises(QdqkitError, match=r"'logged'.*NaN"):
        quantize(g.proto(), [good, good, bad, good, good], trt="10", method="max")


class _WholeTensors(activations.ActivationRunner):
    """The calibration runner with nothing reduced in the session: every tensor copied out."""

    def __init__(self, *args, ranges_only=(), **kwargs) -> None:  # type: ignore[no-untyped-def]
        super().__init__(*args, **kwargs)


@pytest.mark.parametrize("model", ["ultraface", "yolo", "mobilenet"])
@pytest.mark.parametrize("method", ["max", "entropy"])
def test_ranges_reduced_in_the_session_equal_the_copied_tensors(  # type: ignore[no-untyped-def]
        monkeypatch, model: str, method: str) -> None:
    from tests.quantization.float_models import mobilenet

    if model == "ultraface":
        source: object = ULTRAFACE
        batches = _batches(2)
    else:
        builder = yolo() if model == "yolo" else mobilenet()
        source, batches = builder.proto(), calibration_batches(builder, 3)
    reduced = quantize(source, batches, method=method, trt="11")  # type: ignore[arg-type]
    monkeypatch.setattr(calibrate_module, "ActivationRunner", _WholeTensors)
    copied = quantize(source, batches, method=method, trt="11")  # type: ignore[arg-type]
    assert [t.as_dict() for t in reduced.tensors] == [t.as_dict() for t in copied.tensors]
    assert reduced.fp32_nodes == copied.fp32_nodes
    assert len(reduced.tensors) > 5


def test_calibrated_ranges_are_bit_identical(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from qdqkit.quantization.calibrate import calibrate_groups

    builder = yolo()
    model = builder.proto()
    batches = calibration_batches(builder, 3)
    names = [o for n in model.graph.node for o in n.output]
    groups = {names[3]: [names[3]], names[6]: [names[6]]}
    for method in ("max", "percentile"):
        reduced = calibrate_groups(model, groups, batches, method=method, percentile=99.9,
                                   watch=names)
        monkeypatch.setattr(calibrate_module, "ActivationRunner", _WholeTensors)
        copied = calibrate_groups(model, groups, batches, method=method, percentile=99.9,
                                  watch=names)
        monkeypatch.undo()
        assert len(reduced.ranges) > 20
        assert reduced.ranges == copied.ranges
        assert reduced.tensors == copied.tensors


@pytest.mark.parametrize("method,trt", [("entropy", "11"), ("max", "11")])
def test_a_lone_nan_in_a_reduced_tensor_is_named(method: str, trt: str) -> None:
    g = GraphBuilder("lone", seed=0, opset=17)
    x = g.input("x", [1, 16, 4, 4])
    y = g.node("Log", [x], out="logged")
    # Where(y > -1) hides the NaN from what comes after (a NaN compares false): only 'logged'
    # holds it, and it is watched (trt 11, not max), or reduced in the session (max), or both.
    # (A Where on IsNaN(y) would be the model replacing its own NaN, which calibration allows.)
    zero = g.const(np.zeros(1, np.float32), "zero")
    above = g.node("Greater", [y, g.const(np.float32(-1.0), "minus_one")], out="above")
    z = g.node("Where", [above, y, zero], out="clean")
    g.conv(z, 16, 16, weight="float")
    g.output(g.nodes[-1].output[0], [1, 16, 4, 4])
    pixels = np.ones((1, 16, 4, 4), np.float32)
    quantize(g.proto(), [{"x": pixels}], method=method, trt=trt)
    pixels[0, 5, 2, 3] = -1.0  # one NaN in 256 values, not the first
    with pytest.raises(QdqkitError, match=r"'logged'.*NaN"):
        quantize(g.proto(), [{"x": pixels}], method=method, trt=trt)
