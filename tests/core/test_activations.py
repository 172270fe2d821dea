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


def _half_model(opset: int) -> onnx.ModelProto:
    """x -> Conv -> Relu, plus a float16 branch (Cast) and a Log that makes NaN of negatives."""
    from qdqkit.examples.graph import GraphBuilder

    g = GraphBuilder("ranges", opset=opset)
    rng = np.random.default_rng(3)
    w = g.const(rng.normal(size=(4, 3, 3, 3)).astype(np.float32), "w")
    x = g.input("x", ["N", 3, 8, 8])
    c = g.node("Conv", [x, w], name="conv", out="c", pads=[1, 1, 1, 1])
    g.node("Relu", [c], name="relu", out="r")
    g.node("Cast", [c], name="half", out="h", to=onnx.TensorProto.FLOAT16)
    g.node("Log", [c], name="log", out="logged")
    g.output("r")
    g.output("h", dtype=onnx.TensorProto.FLOAT16)
    g.output("logged")
    return g.proto()


@pytest.mark.parametrize("opset", [13, 17, 19])
def test_ranges_reduced_in_the_session_equal_the_whole_tensors_bit_for_bit(opset: int) -> None:
    from qdqkit.core.observers import TensorObserver, TensorRange

    model = _half_model(opset)
    names = ["c", "r", "h"]
    whole = ActivationRunner(model, names)
    reduced = ActivationRunner(model, names, ranges_only=names)
    rng = np.random.default_rng(0)
    for n in (1, 2):
        feeds = {"x": rng.standard_normal((n, 3, 8, 8)).astype(np.float32) * 1000}
        arrays = next(whole.run([feeds]))
        ranges = next(reduced.run_reduced([feeds]))
        for name in names:
            got = ranges[name]
            assert isinstance(got, TensorRange)
            truth = arrays[name].astype(np.float32)
            assert (got.minimum, got.maximum, got.count, got.finite) == (
                float(truth.min()), float(truth.max()), truth.size, True)
            a, b = TensorObserver(name, histogram=False), TensorObserver(name, histogram=False)
            a.update(truth)
            b.update(got)
            assert (a.minimum, a.maximum, a.count) == (b.minimum, b.maximum, b.count)
    with pytest.raises(ValueError, match="run_reduced"):
        next(reduced.run([feeds]))


@pytest.mark.parametrize("position", [0, 77, -1])
def test_a_single_nan_anywhere_is_found_by_the_reduction(position: int) -> None:
    from qdqkit.core.observers import TensorObserver
    from qdqkit.examples.graph import GraphBuilder

    g = GraphBuilder("log", opset=17)
    x = g.input("x", [1, 3, 8, 8])
    g.node("Relu", [g.node("Log", [x], name="log", out="logged")], name="relu", out="r")
    g.output("r")
    runner = ActivationRunner(g.proto(), ["logged", "r"], ranges_only=["logged", "r"])
    pixels = np.full((1, 3, 8, 8), 2.0, np.float32)
    ranges = next(runner.run_reduced([{"x": pixels}]))
    assert ranges["logged"].finite  # type: ignore[union-attr]
    # One negative pixel: one NaN, which ReduceMin and ReduceMax alone skip unless it comes first.
    pixels.reshape(-1)[position] = -1.0
    ranges = next(runner.run_reduced([{"x": pixels}]))
    assert not ranges["logged"].finite  # type: ignore[union-attr]
    observer = TensorObserver("logged", histogram=False)
    with pytest.raises(QdqkitError, match="tensor 'logged' has NaN or infinite"):
        observer.update(ranges["logged"])
    pixels.reshape(-1)[position] = 0.0  # log(0) = -inf: min reveals it
    ranges = next(runner.run_reduced([{"x": pixels}]))
    with pytest.raises(QdqkitError, match="tensor 'logged' has NaN or infinite"):
        TensorObserver("logged", histogram=False).update(ranges["logged"])


def test_a_sum_that_overflows_on_finite_values_is_rechecked_exactly() -> None:
    """Values near float32's limit make the plain-sum NaN test overflow: the batch is reduced
    again with the exact ``x - x`` test, so huge finite values pass and a NaN among them does
    not."""
    from qdqkit.core.observers import TensorRange
    from qdqkit.examples.graph import GraphBuilder

    g = GraphBuilder("huge", opset=17)
    x = g.input("x", [1, 4096])
    big = g.const(np.array(1e35, np.float32), "big")
    g.node("Relu", [g.node("Mul", [x, big], name="scale", out="huge")], name="relu", out="r")
    g.output("r")
    runner = ActivationRunner(g.proto(), ["huge"], ranges_only=["huge"])
    values = np.full((1, 4096), 3.0, np.float32)  # 3e35 each: the sum overflows to +inf
    assert float(np.finfo(np.float32).max) < 3e35 * 4096
    got = next(runner.run_reduced([{"x": values}]))["huge"]
    assert isinstance(got, TensorRange)
    assert got.finite and got.maximum == float(np.float32(3.0) * np.float32(1e35))
    assert runner._rechecker is not None
    values[0, 100] = np.nan
    got = next(runner.run_reduced([{"x": values}]))["huge"]
    assert isinstance(got, TensorRange) and not got.finite
    # Ordinary values never need the second session.
    plain = ActivationRunner(g.proto(), ["huge"], ranges_only=["huge"])
    small = np.full((1, 4096), 1e-3, np.float32)
    small[0, 7] = np.nan
    assert not next(plain.run_reduced([{"x": small}]))["huge"].finite  # type: ignore[union-attr]
    assert plain._rechecker is None


@pytest.mark.parametrize("bad", [-np.inf, np.inf])
def test_a_tolerant_tensor_comes_out_as_the_range_of_its_finite_values(bad: float) -> None:
    """Rule 7: a tensor that holds infinities by design (an additive mask of -inf) comes out as
    the min and max of its finite values, flagged; the values checked against numpy on the same
    tensor run whole. Only the batches that need it are reduced again; a NaN is still one."""
    from qdqkit.core.observers import TensorObserver, TensorRange
    from qdqkit.examples.graph import GraphBuilder

    g = GraphBuilder("masked", opset=17)
    x = g.input("x", [1, 8, 8])
    mask = np.triu(np.full((8, 8), bad, np.float32), 1)
    mask[np.tril_indices(8)] = 0.0
    g.node("Add", [x, g.const(mask, "mask")], name="add", out="masked")
    g.node("Softmax", [g.node("Where", [g.node("IsNaN", [g.node("Add", ["masked", g.const(
        np.float32(0.0))])]), g.const(np.float32(-1e4)), "masked"])], axis=-1, out="p")
    g.output("p")
    whole = ActivationRunner(g.proto(), ["masked"])
    runner = ActivationRunner(g.proto(), ["masked"], ranges_only=["masked"], tolerant=["masked"])
    feeds = {"x": np.random.default_rng(0).normal(0, 3, (1, 8, 8)).astype(np.float32)}
    values = next(whole.run([feeds]))["masked"]
    finite = values[np.isfinite(values)]
    got = next(runner.run_reduced([feeds]))["masked"]
    assert isinstance(got, TensorRange) and got.non_finite and got.finite
    assert (got.minimum, got.maximum) == (float(finite.min()), float(finite.max()))
    assert got.count == values.size
    observer = TensorObserver("masked", histogram=False)
    observer.update(got)
    assert observer.non_finite and (observer.minimum, observer.maximum) == (got.minimum,
                                                                           got.maximum)
    # The same tensor in an ordinary runner is an error, as before.
    plain = ActivationRunner(g.proto(), ["masked"], ranges_only=["masked"])
    with pytest.raises(QdqkitError, match="tensor 'masked' has NaN or infinite"):
        TensorObserver("masked", histogram=False).update(
            next(plain.run_reduced([feeds]))["masked"])
    # A NaN among the infinities is still reported.
    holed = {"x": feeds["x"].copy()}
    holed["x"][0, 3, 1] = np.nan
    with pytest.raises(QdqkitError, match="tensor 'masked' has NaN or infinite"):
        TensorObserver("masked", histogram=False).update(
            next(runner.run_reduced([holed]))["masked"])
    # A finite batch is taken as it comes, with no second session.
    clean = ActivationRunner(g.proto(), ["x"], ranges_only=["x"], tolerant=["x"])
    next(clean.run_reduced([feeds]))
    assert clean._finite_checker is None


def test_a_nan_the_model_replaces_itself_is_tolerated_and_one_it_does_not_is_named() -> None:
    """Rule 7: BERT exports guard each attention softmax with Where(IsNaN(p), 0, p), since a
    row masked whole is NaN there: such a tensor comes out as its finite range, flagged. The same
    NaN in a tensor something else also reads stays an error naming it."""
    from qdqkit.core.observers import TensorObserver, TensorRange
    from qdqkit.examples.graph import GraphBuilder

    def model(guard_only: bool) -> onnx.ModelProto:
        g = GraphBuilder("guarded", opset=17)
        x = g.input("x", [1, 4, 4])
        p = g.node("Softmax", [g.node("Add", [x, g.const(np.array(
            [[0, 0, 0, 0], [0, 0, -np.inf, -np.inf], [-np.inf] * 4, [0, -np.inf, 0, 0]],
            np.float32), "mask")])], axis=-1, out="p")
        clean = g.node("Where", [g.node("IsNaN", [p]), g.const(np.float32(0.0), "zero"), p])
        out = clean if guard_only else g.node("Add", [clean, p])
        g.output(g.node("Identity", [out], out="y"))
        return g.proto()

    feeds = {"x": np.random.default_rng(0).normal(0, 1, (1, 4, 4)).astype(np.float32)}
    guarded = ActivationRunner(model(True), ["p"], ranges_only=["p"], tolerant=["p"])
    got = next(guarded.run_reduced([feeds]))["p"]
    assert isinstance(got, TensorRange) and got.finite and got.non_finite
    values = next(ActivationRunner(model(True), ["p"]).run([feeds]))["p"]
    finite = values[np.isfinite(values)]
    assert np.isnan(values).sum() == 4 and (got.minimum, got.maximum) == (
        float(finite.min()), float(finite.max()))
    TensorObserver("p", histogram=False).update(got)
    unguarded = ActivationRunner(model(False), ["p"], ranges_only=["p"], tolerant=["p"])
    with pytest.raises(QdqkitError, match="tensor 'p' has NaN or infinite"):
        TensorObserver("p", histogram=False).update(next(unguarded.run_reduced([feeds]))["p"])
