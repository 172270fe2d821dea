from __future__ import annotations

import math

import numpy as np
import onnx_ir as ir
import pytest

from qdqkit.core.errors import QdqkitError
from qdqkit.core.numerics import (
    ErrorAccumulator,
    error_metrics,
    input_specs,
    make_session,
    random_feeds,
    run,
)
from qdqkit.core.qdq import QdqView
from qdqkit.core.qdq_math import fake_quantize
from tests.models import qdq_conv_model


def test_metrics_match_their_definitions() -> None:
    rng = np.random.default_rng(1)
    ref = rng.normal(size=1000)
    noise = rng.normal(scale=0.01, size=1000)
    m = error_metrics(ref, ref + noise)
    assert m.snr_db == pytest.approx(10 * math.log10((ref @ ref) / (noise @ noise)))
    cos = ref @ (ref + noise) / (np.linalg.norm(ref) * np.linalg.norm(ref + noise))
    assert m.cosine == pytest.approx(cos)
    assert m.max_abs == pytest.approx(np.abs(noise).max())
    assert error_metrics(ref, ref).snr_db == math.inf


def test_accumulator_equals_one_shot_over_concatenation() -> None:
    rng = np.random.default_rng(2)
    parts = [(rng.normal(size=50), rng.normal(size=50)) for _ in range(4)]
    acc = ErrorAccumulator()
    for a, b in parts:
        acc.add(a, b)
    whole = error_metrics(
        np.concatenate([a for a, _ in parts]), np.concatenate([b for _, b in parts])
    )
    assert acc.result().snr_db == pytest.approx(whole.snr_db)
    assert acc.result().cosine == pytest.approx(whole.cosine)


def test_runner_executes_qdq_model_as_the_spec_says() -> None:
    """The ORT run of x->Q->DQ->Conv equals numpy fake-quant followed by a float conv."""
    model = ir.serde.deserialize_model(qdq_conv_model())
    session = make_session(model)
    feeds = random_feeds(input_specs(session), seed=3)
    out = run(session, feeds)["y"]
    view = QdqView(model.graph)
    xq = fake_quantize(feeds["x"], view.params(view.quantize_nodes[0]))  # type: ignore[arg-type]
    wq_params = view.params(view.quantize_nodes[1])
    w = model.graph.initializers["w"].const_value.numpy()  # type: ignore[union-attr]
    wq = fake_quantize(w, wq_params)  # type: ignore[arg-type]
    padded = np.pad(xq, ((0, 0), (0, 0), (1, 1), (1, 1)))
    expected = np.zeros((1, 4, 8, 8), np.float32)
    for i in range(8):
        for j in range(8):
            patch = padded[0, :, i : i + 3, j : j + 3]
            expected[0, :, i, j] = np.tensordot(wq, patch, axes=([1, 2, 3], [0, 1, 2]))
    np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("layout", [False, True])
def test_optimized_sessions_keep_both_roundings_of_back_to_back_qdq_pairs(layout: bool) -> None:
    """x -> Q/DQ(0.1) -> Identity -> Q/DQ(0.07): two roundings, as the spec and TensorRT's
    requantization do. onnxruntime's DoubleQDQPairsRemover would merge the pairs once Identity
    elimination joins them, and it is not turned off by ``session.disable_quant_qdq``."""
    from onnx import TensorProto, helper, numpy_helper

    scales = {"a": np.float32(0.1), "b": np.float32(0.07)}
    nodes, inits, x = [], [], "x"
    for tag, scale in scales.items():
        inits += [numpy_helper.from_array(np.array(scale), f"{tag}_s"),
                  numpy_helper.from_array(np.array(0, np.int8), f"{tag}_z")]
        nodes += [helper.make_node("QuantizeLinear", [x, f"{tag}_s", f"{tag}_z"], [f"{tag}_q"]),
                  helper.make_node("DequantizeLinear", [f"{tag}_q", f"{tag}_s", f"{tag}_z"],
                                   [f"{tag}_dq"])]
        x = f"{tag}_dq"
        if tag == "a":
            nodes.append(helper.make_node("Identity", [x], ["copy"]))
            x = "copy"
    graph = helper.make_graph(
        nodes, "double_qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [64])], inits)
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    session = make_session(proto.SerializeToString(), optimize=True, layout=layout)
    values = np.linspace(-3, 3, 64, dtype=np.float32)
    expected = values
    for scale in scales.values():
        expected = np.clip(np.rint(expected / scale), -128, 127).astype(np.float32) * scale
    single = np.clip(np.rint(values / scales["b"]), -128, 127).astype(np.float32) * scales["b"]
    assert not np.array_equal(expected, single)  # the case tells the two apart
    np.testing.assert_array_equal(run(session, {"x": values})[x], expected)


def test_random_feeds_are_seeded() -> None:
    session = make_session(ir.serde.deserialize_model(qdq_conv_model()))
    a = random_feeds(input_specs(session), seed=7)["x"]
    b = random_feeds(input_specs(session), seed=7)["x"]
    np.testing.assert_array_equal(a, b)
    assert a.min() >= -1 and a.max() <= 1


def test_runner_errors_are_one_line() -> None:
    session = make_session(ir.serde.deserialize_model(qdq_conv_model()))
    with pytest.raises(QdqkitError) as info:
        run(session, {"x": np.zeros((1, 5, 8, 8), np.float32)})
    assert "\n" not in str(info.value)
    # onnxruntime puts which axis is wrong on a later line: it must survive the joining.
    assert "following indices; index: 1 Got: 5 Expected: 3" in str(info.value)


def test_progress_draws_only_when_enabled(capsys) -> None:  # type: ignore[no-untyped-def]
    from qdqkit.core.progress import Progress

    with Progress("quiet", total=3, enabled=False) as bar:
        for _ in range(3):
            bar.advance()
    assert capsys.readouterr().err == ""
    with Progress("shown", total=2, enabled=True) as bar:
        bar.advance(2)
    err = capsys.readouterr().err
    assert "shown [" in err and "2/2" in err and err.endswith("\n")
