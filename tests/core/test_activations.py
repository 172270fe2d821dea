from __future__ import annotations

import tracemalloc
from pathlib import Path

import numpy as np
import onnx
import pytest

from qdqkit.core.activations import ActivationRunner, observe_activations
from qdqkit.core.calibration import calibrate
from qdqkit.core.data import open_data
from qdqkit.core.errors import QdqkitError
from tests.core.calib_models import conv_relu_model, plugin_model

TENSORS = ["x", "c1", "r1", "c2", "s"]


def _edited_to_output(model: onnx.ModelProto, names: list[str]) -> onnx.ModelProto:
    edited = onnx.ModelProto()
    edited.CopyFrom(model)
    for name in names:
        edited.graph.output.append(onnx.ValueInfoProto(name=name))
    return edited


def test_exposed_tensors_equal_the_model_edited_to_output_them() -> None:
    model = conv_relu_model()
    before = model.SerializeToString()
    runner = ActivationRunner(model, TENSORS)
    assert model.SerializeToString() == before  # the caller's model is untouched
    assert runner.observed == tuple(TENSORS) and runner.skipped == ()
    feeds = {"x": np.random.default_rng(0).normal(size=(2, 3, 8, 8)).astype(np.float32)}
    got = next(runner.run([feeds]))
    # The truth: a plain onnxruntime session (default options) of the model edited by hand.
    import onnxruntime as ort

    edited = _edited_to_output(model, TENSORS[1:]).SerializeToString()
    plain = ort.InferenceSession(edited, providers=["CPUExecutionProvider"])
    truth = dict(zip(TENSORS[1:], plain.run(TENSORS[1:], feeds), strict=True))
    for name in TENSORS[1:]:
        np.testing.assert_array_equal(got[name], truth[name])
    np.testing.assert_array_equal(got["x"], feeds["x"])


def test_model_path_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(conv_relu_model(), path)
    runner = ActivationRunner(path, ["r1"])
    out = next(runner.run([{"x": np.ones((1, 3, 8, 8), np.float32)}]))
    assert out["r1"].shape == (1, 4, 8, 8)


def test_plugin_nodes_are_skipped_and_everything_else_observed() -> None:
    runner = ActivationRunner(plugin_model(), ["r", "n", "m", "z"])
    assert runner.observed == ("r", "z")
    assert runner.skipped == ("n", "m")
    assert runner.blocked_nodes == ("nms", "after_nms")
    x = np.random.default_rng(1).normal(size=(3, 6)).astype(np.float32)
    out = next(runner.run([{"x": x}]))
    np.testing.assert_array_equal(out["z"], -np.maximum(x, 0))


def test_unknown_tensors_and_initializers_are_refused() -> None:
    with pytest.raises(QdqkitError, match="no tensor named nope"):
        ActivationRunner(conv_relu_model(), ["nope"])
    with pytest.raises(QdqkitError, match="'w1' is an initializer"):
        ActivationRunner(conv_relu_model(), ["w1"])


def test_calibration_does_not_depend_on_the_batch_size() -> None:
    model = conv_relu_model()
    runner = ActivationRunner(model, TENSORS)
    results = []
    for batch in (1, 7, 64):
        data = open_data("random", model, batch=batch, limit=64)
        observers = observe_activations(runner, data)
        results.append({n: calibrate(o, "auto") for n, o in observers.items()})
    assert results[0] == results[1] == results[2]


def _peak_bytes(samples: int) -> int:
    model = conv_relu_model(size=32)
    runner = ActivationRunner(model, TENSORS)
    data = open_data("random", model, batch=4, limit=samples)
    tracemalloc.start()
    try:
        observe_activations(runner, data)
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_peak_memory_does_not_grow_with_the_number_of_samples() -> None:
    small, large = _peak_bytes(8), _peak_bytes(64)
    assert large <= small * 1.1 + 64 * 1024
