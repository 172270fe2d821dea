"""Inputs batched off axis 0 and inputs without a batch axis, checked against onnxruntime.

The truth is onnxruntime fed each sample alone, sliced straight from the arrays written: what
qdqkit feeds, batch by batch, must give the same outputs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from qdqkit.core import npy_files
from qdqkit.core.data import open_data
from qdqkit.core.errors import QdqkitError
from qdqkit.core.model_inputs import model_inputs
from tests.core.calib_models import LSTM_HIDDEN, conv_relu_model, lstm_state_model

F32 = np.float32


def _session(model: onnx.ModelProto) -> Any:
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def _arrays(count: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """x [count, 8] and state [2, count, hidden], as the model lays them out."""
    rng = np.random.default_rng(seed)
    return rng.normal(size=(count, 8)), rng.normal(size=(2, count, LSTM_HIDDEN))


def _truth(session: Any, x: np.ndarray, state: np.ndarray, gains: np.ndarray) -> np.ndarray:
    """Y_h [2, samples, hidden] of onnxruntime run on one sample at a time."""
    outputs = [session.run(None, {"x": x[i : i + 1].astype(F32),
                                  "state": state[:, i : i + 1].astype(F32),
                                  "gain": np.asarray(gains[i], F32)})[0]
               for i in range(len(x))]
    return np.concatenate(outputs, axis=1)


def _fed(session: Any, batches: list[dict[str, np.ndarray]]) -> np.ndarray:
    return np.concatenate([session.run(None, b)[0] for b in batches], axis=1)


def _error(source: Any, model: onnx.ModelProto, **options: Any) -> str:
    with pytest.raises(QdqkitError) as info:
        list(open_data(source, model, **options))
    assert "\n" not in str(info.value)
    return str(info.value)


def test_batch_axes_follow_the_name_of_the_batch() -> None:
    def axes(model: onnx.ModelProto) -> list[int | None]:
        return [i.batch_axis for i in model_inputs(model)]

    assert axes(lstm_state_model()) == [0, 1, None]
    # Every leading dimension fixed and disagreeing (1 and 2): nothing says which is the batch.
    assert axes(lstm_state_model(batch=1, gain=False)) == [None, None]
    assert axes(conv_relu_model(batch=2)) == [0]


@pytest.mark.parametrize("batch", [None, 2, 5])
def test_state_batched_on_axis_1_and_a_0d_scalar_feed_onnxruntime(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch: int | None
) -> None:
    # Chunks of two rows of x: the state member, read whole, is sliced in step with them.
    monkeypatch.setattr(npy_files, "NPZ_CHUNK_BYTES", 2 * 8 * 8)
    model = lstm_state_model()
    x, state = _arrays(5)
    np.savez(tmp_path / "d.npz", x=x, state=state, gain=np.array(1.5))
    data = open_data(tmp_path / "d.npz", model, batch=batch)
    batches = list(data)
    size = batch or 1
    assert data.total_samples == 5
    assert [b["state"].shape for b in batches] == [
        (2, min(size, 5 - start), LSTM_HIDDEN) for start in range(0, 5, size)]
    assert all(b["gain"].shape == () for b in batches)
    session = _session(model)
    np.testing.assert_allclose(_fed(session, batches), _truth(session, x, state, np.full(5, 1.5)),
                               rtol=1e-5, atol=1e-6)


def test_a_scalar_per_sample_splits_batches_where_its_value_changes(tmp_path: Path) -> None:
    model = lstm_state_model()
    x, state = _arrays(5, seed=1)
    gains = np.array([1.0, 1.0, 2.0, 2.0, 2.0])
    np.savez(tmp_path / "d.npz", x=x, state=state, gain=gains)
    batches = list(open_data(tmp_path / "d.npz", model, batch=4))
    assert [(b["x"].shape[0], float(b["gain"])) for b in batches] == [(2, 1.0), (3, 2.0)]
    session = _session(model)
    np.testing.assert_allclose(_fed(session, batches), _truth(session, x, state, gains),
                               rtol=1e-5, atol=1e-6)


def test_a_leading_axis_of_whole_batches_works_off_axis_0(tmp_path: Path) -> None:
    model = lstm_state_model()
    x, state = _arrays(6, seed=2)
    # Three batches of two samples: [3, 2, 8] and [3, 2 (directions), 2, hidden].
    batched_state = state.reshape(2, 3, 2, LSTM_HIDDEN).transpose(1, 0, 2, 3)
    np.savez(tmp_path / "d.npz", x=x.reshape(3, 2, 8), state=batched_state, gain=np.array(0.5))
    data = open_data(tmp_path / "d.npz", model, batch=2)
    batches = list(data)
    assert data.total_samples == 6 and len(batches) == 3
    session = _session(model)
    np.testing.assert_allclose(_fed(session, batches), _truth(session, x, state, np.full(6, 0.5)),
                               rtol=1e-5, atol=1e-6)


def test_a_fixed_model_whose_leading_dims_disagree_is_fed_sample_by_sample(
    tmp_path: Path
) -> None:
    model = lstm_state_model(batch=1)  # x [1, 8], state [2, 1, hidden], gain []
    x, state = _arrays(3, seed=3)
    np.savez(tmp_path / "d.npz", x=x[:, None], state=state.transpose(1, 0, 2)[:, :, None],
             gain=np.array(2.0))
    data = open_data(tmp_path / "d.npz", model)
    batches = list(data)
    assert data.total_samples == 3 and [b["state"].shape for b in batches] == [
        (2, 1, LSTM_HIDDEN)] * 3
    session = _session(model)
    np.testing.assert_allclose(_fed(session, batches), _truth(session, x, state, np.full(3, 2.0)),
                               rtol=1e-5, atol=1e-6)
    assert "no model input has a batch axis" in _error(tmp_path / "d.npz", model, batch=2)


def test_random_data_sets_the_batch_on_the_batch_axis() -> None:
    model = lstm_state_model(gain=False)
    session = _session(model)
    one = list(open_data("random", model, limit=6))
    three = list(open_data("random", model, batch=3, limit=6))
    assert [b["state"].shape for b in three] == [(2, 3, LSTM_HIDDEN)] * 2
    # onnxruntime runs every batch, and the samples do not depend on the batch size.
    np.testing.assert_allclose(_fed(session, three), _fed(session, one), rtol=1e-5, atol=1e-6)
    shaped = list(open_data("random", model, shapes={"x": [2, 8], "state": [2, 2, LSTM_HIDDEN]},
                            limit=4))
    assert [b["state"].shape for b in shaped] == [(2, 2, LSTM_HIDDEN)] * 2
    assert "different batch sizes (2 for 'x', 3 for 'state')" in _error(
        "random", model, shapes={"x": [2, 8], "state": [2, 3, LSTM_HIDDEN]})
    assert "'gain' is a scalar, whose value random data cannot guess" in _error(
        "random", lstm_state_model())


def test_data_that_fits_no_rule_gets_one_line_errors(tmp_path: Path) -> None:
    model = lstm_state_model()
    x, state = _arrays(5)

    def error(**arrays: np.ndarray) -> str:
        np.savez(tmp_path / "bad.npz", **{"x": x, "state": state, "gain": np.array(1.0),
                                          **arrays})
        return _error(tmp_path / "bad.npz", model)

    assert "different numbers of samples ('x' 5 on axis 0, 'state' 4 on axis 1)" in error(
        state=state[:, :4])
    assert "'state' has shape [5, 6] (rank 2) but the model takes [2, batch, 6] (rank 3; " \
           "samples lie on axis 1" in error(state=state[0])
    assert "'gain' has shape [5, 2] (rank 2) but the model takes [] (rank 0; it has no batch " \
           "axis: give one value, or one per sample on a leading axis)" in error(
               gain=np.ones((5, 2)))
    assert "'state' has shape [3, 5, 6] but the model takes [2, batch, 6] (axis 0 differs)" in \
        error(state=np.zeros((3, 5, LSTM_HIDDEN)))
    assert "'gain' has NaN or infinite values" in error(gain=np.array(np.nan))
