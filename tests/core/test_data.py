from __future__ import annotations

import builtins
import io
import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from qdqkit.core.data import open_data
from qdqkit.core.data_random import RANDOM_DYNAMIC_DIM, RANDOM_SAMPLES
from qdqkit.core.errors import QdqkitError
from qdqkit.core.images import Preprocess
from tests.core.calib_models import conv_relu_model, quantized_input_model, two_input_model


def _samples(n: int, size: int = 8, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).normal(size=(n, 3, size, size))


def _stack(batches: list[dict[str, np.ndarray]], name: str) -> np.ndarray:
    return np.concatenate([b[name] for b in batches])


def _error(source: Any, model: Any, **options: Any) -> str:
    with pytest.raises(QdqkitError) as info:
        list(open_data(source, model, **options))
    message = str(info.value)
    assert "\n" not in message
    return message


def test_npy_is_memory_mapped_cast_and_rebatched(tmp_path: Path) -> None:
    data = _samples(10)  # float64 on disk; the model takes float32
    np.save(tmp_path / "x.npy", data)
    source = open_data(tmp_path / "x.npy", conv_relu_model(), batch=4)
    batches = list(source)
    assert [b["x"].shape[0] for b in batches] == [4, 4, 2]
    assert all(b["x"].dtype == np.float32 for b in batches)
    np.testing.assert_array_equal(_stack(batches, "x"), data.astype(np.float32))
    assert (source.total_samples, source.is_random) == (10, False)


def test_limit_stops_after_that_many_samples(tmp_path: Path) -> None:
    np.save(tmp_path / "x.npy", _samples(10))
    batches = list(open_data(tmp_path / "x.npy", conv_relu_model(), batch=3, limit=5))
    assert [b["x"].shape[0] for b in batches] == [3, 2]


def test_npz_keys_are_input_names_and_stream_in_step(tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=(7, 4)), rng.normal(size=(7, 4))
    k = np.array([0, 1, 2, 0, 1, 2, 0], np.int32)
    np.savez_compressed(tmp_path / "d.npz", a=a, b=b, k=k)
    batches = list(open_data(tmp_path / "d.npz", two_input_model(), batch=2))
    np.testing.assert_array_equal(_stack(batches, "a"), a.astype(np.float32))
    np.testing.assert_array_equal(_stack(batches, "b"), b.astype(np.float32))
    assert _stack(batches, "k").dtype == np.int64


def test_folder_is_read_in_name_order_and_batches_cross_files(tmp_path: Path) -> None:
    parts = [_samples(3, seed=i) for i in range(3)]
    for i, part in zip((2, 0, 1), parts, strict=True):
        np.save(tmp_path / f"part{i}.npy", part)
    batches = list(open_data(tmp_path, conv_relu_model(), batch=4))
    ordered = np.concatenate([parts[1], parts[2], parts[0]]).astype(np.float32)
    np.testing.assert_array_equal(_stack(batches, "x"), ordered)
    assert [b["x"].shape[0] for b in batches] == [4, 4, 1]


def test_dynamic_dims_come_from_the_data(tmp_path: Path) -> None:
    model = conv_relu_model(size=None)
    np.save(tmp_path / "a.npy", _samples(2, size=8))
    np.save(tmp_path / "b.npy", _samples(2, size=12))
    batches = list(open_data(tmp_path, model, batch=4))
    # Samples of two shapes cannot stack: the batch closes where the shape changes.
    assert [b["x"].shape for b in batches] == [(2, 3, 8, 8), (2, 3, 12, 12)]


def test_python_iterable_of_dicts_is_validated_and_cast() -> None:
    items = [{"x": _samples(2, seed=i)} for i in range(3)]
    batches = list(open_data(items, conv_relu_model(), batch=3))
    assert [b["x"].shape[0] for b in batches] == [3, 3]
    assert batches[0]["x"].dtype == np.float32


def test_random_is_marked_seeded_and_sized_from_the_model() -> None:
    source = open_data("random", conv_relu_model(size=None))
    assert source.is_random and source.total_samples == RANDOM_SAMPLES
    batches = list(source)
    assert batches[0]["x"].shape == (1, 3, RANDOM_DYNAMIC_DIM, RANDOM_DYNAMIC_DIM)
    again = list(open_data("random", conv_relu_model(size=None), batch=4))
    np.testing.assert_array_equal(_stack(batches, "x"), _stack(again, "x"))
    shaped = list(open_data("random", conv_relu_model(size=None), shapes={"x": [2, 3, 16, 20]},
                            limit=4))
    assert [b["x"].shape for b in shaped] == [(2, 3, 16, 20)] * 2


def test_random_spans_the_range_of_the_q_on_the_input() -> None:
    batches = list(open_data("random", quantized_input_model(scale=0.05), limit=200))
    values = _stack(batches, "x")
    assert np.abs(values).max() <= 127 * 0.05
    assert np.abs(values).max() > 0.95 * 127 * 0.05


def test_random_integer_inputs_are_zero() -> None:
    batches = list(open_data("random", two_input_model(), limit=2))
    assert not _stack(batches, "k").any()
    assert np.abs(_stack(batches, "a")).max() <= 1.0


def _write_npz_with_header(path: Path, name: str, header_shape: tuple[int, ...]) -> None:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(
        buffer, {"descr": "<f4", "fortran_order": False, "shape": header_shape}
    )
    buffer.write(np.zeros(4, np.float32).tobytes())
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr(f"{name}.npy", buffer.getvalue())


def test_bad_data_gets_one_line_errors(tmp_path: Path) -> None:
    model = conv_relu_model()
    np.savez(tmp_path / "names.npz", image=_samples(2))
    assert "has no array for input(s) x; the model's inputs are x" in _error(
        tmp_path / "names.npz", model
    )
    assert "has arrays for c" in _error(
        [{"a": np.zeros((1, 4)), "b": np.zeros((1, 4)), "k": np.zeros(1), "c": 1}],
        two_input_model(),
    )
    np.save(tmp_path / "rank.npy", np.zeros((3, 8, 8)))
    assert "rank.npy: input 'x' has shape [3, 8, 8] (rank 3)" in _error(tmp_path / "rank.npy", model)
    np.save(tmp_path / "dim.npy", np.zeros((2, 3, 8, 9)))
    assert "axis 3 differs" in _error(tmp_path / "dim.npy", model)
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert "obj.npy: holds Python objects (pickled content)" in _error(tmp_path / "obj.npy", model)
    np.save(tmp_path / "str.npy", np.array(["a", "b"]))
    assert "str.npy: has dtype <U1, not numbers" in _error(tmp_path / "str.npy", model)
    _write_npz_with_header(tmp_path / "huge.npz", "x", (10**9, 3, 8, 8))
    assert "huge.npz (key 'x'): its header declares shape" in _error(tmp_path / "huge.npz", model)
    nan = _samples(3)
    nan[1, 0, 0, 0] = np.nan
    np.save(tmp_path / "nan.npy", nan)
    assert "nan.npy: input 'x' has NaN or infinite values" in _error(tmp_path / "nan.npy", model)
    (tmp_path / "empty").mkdir()
    assert "the folder has no .npy, .npz or image files" in _error(tmp_path / "empty", model)
    np.save(tmp_path / "multi.npy", np.zeros((2, 4)))
    assert "a .npy holds one array but the model has 3 inputs (a, b, k)" in _error(
        tmp_path / "multi.npy", two_input_model()
    )
    (tmp_path / "trunc.npy").write_bytes((tmp_path / "dim.npy").read_bytes()[:200])
    assert "truncated" in _error(tmp_path / "trunc.npy", model)
    assert "fixed batch of 2; batch 3" in _error(
        tmp_path / "dim.npy", conv_relu_model(batch=2), batch=3
    )
    assert "no such file or folder" in _error(tmp_path / "missing.npy", model)


def _write_images(folder: Path, count: int) -> list[np.ndarray]:
    image_module = pytest.importorskip("PIL.Image")
    folder.mkdir()
    pixels = []
    for i in range(count):
        array = np.random.default_rng(i).integers(0, 256, size=(10, 12, 3), dtype=np.uint8)
        image_module.fromarray(array).save(folder / f"img{i}.png")
        pixels.append(array)
    return pixels


def test_images_are_resized_normalized_and_laid_out(tmp_path: Path) -> None:
    pixels = _write_images(tmp_path / "images", 3)
    spec = Preprocess(size=(10, 12), mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25),
                      channel_order="BGR", layout="NCHW")
    batches = list(open_data(tmp_path / "images", conv_relu_model(size=None), preprocess=spec))
    assert len(batches) == 3 and batches[0]["x"].shape == (1, 3, 10, 12)
    expected = ((pixels[0][:, :, ::-1] / 255.0 - 0.5) / 0.25).transpose(2, 0, 1)
    np.testing.assert_allclose(batches[0]["x"][0], expected, atol=1e-5)
    resized = list(open_data(tmp_path / "images", conv_relu_model(size=8), preprocess=Preprocess()))
    assert resized[0]["x"].shape == (1, 3, 8, 8)


def test_an_image_size_the_model_does_not_take_names_the_size_it_does(tmp_path: Path) -> None:
    _write_images(tmp_path / "images", 1)
    model = conv_relu_model(size=8)
    message = _error(tmp_path / "images", model, preprocess=Preprocess(size=(8, 6)))
    assert "the size 8x6 does not match model input 'x'" in message
    assert "use size=8x8" in message and "\n" not in message

def test_unreadable_images_and_missing_pillow_are_one_line_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _write_images(tmp_path / "images", 1)
    (tmp_path / "images" / "zz.jpg").write_bytes(b"not an image")
    model = conv_relu_model(size=8)
    assert "zz.jpg: not a readable image" in _error(tmp_path / "images", model,
                                                     preprocess=Preprocess())
    assert "needs a preprocessing spec" in _error(tmp_path / "images", model)
    real_import = builtins.__import__

    def no_pillow(name: str, *args: Any, **kwargs: Any) -> Any:
        if name == "PIL" or name.startswith("PIL."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pillow)
    assert "pip install 'qdqkit[images]'" in _error(tmp_path / "images", model,
                                                     preprocess=Preprocess())


def test_samples_that_cannot_fill_a_fixed_batch_are_a_one_line_error(tmp_path: Path) -> None:
    """A model fixing its batch at 4 takes 4 samples a run: 8 make two runs, 10 leave 2 that
    onnxruntime would refuse with its own message; the data layer says what to give."""
    model = conv_relu_model(batch=4)
    np.save(tmp_path / "x8.npy", _samples(8))
    assert [b["x"].shape[0] for b in open_data(tmp_path / "x8.npy", model)] == [4, 4]
    np.save(tmp_path / "x10.npy", _samples(10))
    message = _error(tmp_path / "x10.npy", model)
    assert message == ("model input 'x' has a fixed batch of 4, and 2 samples are left to fill "
                       "one (after 8): give a multiple of 4 samples of one shape (--limit)")
    assert "fixed batch of 4" in _error(tmp_path / "x8.npy", model, limit=6)


def test_random_data_draws_whole_batches_for_a_model_that_fixes_its_batch() -> None:
    """Random samples are drawn in whole batches when the model fixes its batch (a run of a
    batch-3 model takes 3): the default 8 become 9, a limit of 5 becomes 6."""
    model = conv_relu_model(batch=3)
    plain = open_data("random", model)
    assert plain.total_samples == 9 and [b["x"].shape[0] for b in plain] == [3, 3, 3]
    limited = open_data("random", model, limit=5)
    assert limited.total_samples == 6 and [b["x"].shape[0] for b in limited] == [3, 3]
    dynamic = open_data("random", conv_relu_model(), batch=3)  # chosen, not fixed: as asked
    assert [b["x"].shape[0] for b in dynamic] == [3, 3, 2]
