"""The calibration shortcuts give what the slow, literal way gives.

- The calibration session runs with onnxruntime's float optimizations (fusions, NCHWc); the
  scales of a real model stay within float rounding (max) or a bin (histogram methods) of a
  session with every optimization off.
- The opset conversion sees the model without its weights' bytes: the result is byte for byte
  the converter's on the whole model, and the caller's model is untouched.
- The look-ahead run (the next batch runs while this one is folded in) gives the same scales as
  one batch at a time, and an error in a run still surfaces.
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


@pytest.mark.parametrize("method", ["max", "auto"])
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


def test_look_ahead_gives_the_scales_of_one_batch_at_a_time(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    builder = resnet()
    batches = calibration_batches(builder, 6)
    ahead = quantize(builder.proto(), batches, method="entropy", trt="11")
    monkeypatch.setattr(calibrate_module, "LOOK_AHEAD", False)
    serial = quantize(builder.proto(), batches, method="entropy", trt="11")
    assert [t.as_dict() for t in ahead.tensors] == [t.as_dict() for t in serial.tensors]
    assert ahead.fp32_nodes == serial.fp32_nodes


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
    real_run = activations.ActivationRunner.run

    def failing_second_run(self, batches):  # type: ignore[no-untyped-def]
        nonlocal runs
        runs += 1
        if runs == 2:
            raise QdqkitError("onnxruntime failed while running the model: test")
        return real_run(self, batches)

    monkeypatch.setattr(activations.ActivationRunner, "run", failing_second_run)
    with pytest.raises(QdqkitError, match="onnxruntime failed"):
        quantize(g.proto(), [good, good, good], trt="10")
