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
