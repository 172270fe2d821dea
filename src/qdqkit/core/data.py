"""Calibration data: every source becomes a stream of ``{input name: array}`` batches.

Sources: a ``.npy`` (one-input models), a ``.npz`` (keys = input names), a folder of them (read in
name order), a folder of images with a :class:`~qdqkit.core.images.Preprocess` spec, any Python
iterable of dicts, or ``"random"``. The rules every batch obeys:

1. Samples lie on axis 0, which is the model's batch axis; every other axis must match the model
   wherever the model fixes it, and dynamic dimensions come from the data. An array with one more
   axis than the input holds whole batches on a leading axis; they are fed one after another.
2. Values are cast to each input's ONNX element type; non-finite floats are refused, naming the
   file (or batch) and input.
3. Files are streamed (``.npy`` memory-mapped, ``.npz`` read a chunk at a time, images decoded one
   by one): memory holds one batch, whatever the number of samples. ``batch`` re-batches samples
   across files; ``limit`` stops after that many samples.
4. ``random`` is never silent: the returned :class:`CalibrationData` says ``is_random``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from qdqkit.core.data_random import check_random_size, random_chunks
from qdqkit.core.errors import QdqkitError
from qdqkit.core.images import IMAGE_SUFFIXES, Preprocess, image_chunks
from qdqkit.core.model_inputs import ModelInput, model_inputs
from qdqkit.core.npy_files import NUMERIC_KINDS, NpzReader, open_npy, read_header

Chunk = tuple[str, Mapping[str, np.ndarray]]
DataSource = str | os.PathLike[str] | Iterable[Mapping[str, np.ndarray]]
ARRAY_SUFFIXES = frozenset({".npy", ".npz"})


@dataclass
class CalibrationData:
    """A re-iterable stream of validated batches, and what it was made from.

    ``is_random`` is True for the ``random`` source, whose scales mean nothing for accuracy:
    callers must record it. ``total_samples`` is known for files and random data (after
    ``limit``), None for Python iterables.
    """

    description: str
    inputs: tuple[ModelInput, ...]
    is_random: bool
    total_samples: int | None
    batch: int
    limit: int | None
    _chunks: Callable[[], Iterator[Chunk]] = field(repr=False)

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        """The batches, from the start (a one-shot Python iterator gives them once)."""
        return _rebatch(self._chunks(), self.inputs, self.batch, self.limit)


@dataclass(frozen=True)
class DataRequest:
    """A data source and how to read it: what every command that runs a model on data takes.

    The command line's data options (``--data``, ``--preprocess``, ``--shapes``, ``--batch``,
    ``--limit``, ``--seed``) become one of these; ``open(model)`` reads it for a model.
    """

    source: DataSource
    batch: int | None = None
    limit: int | None = None
    shapes: Mapping[str, Sequence[int]] | None = None
    preprocess: Preprocess | None = None
    seed: int = 0

    def open(self, model: onnx.ModelProto) -> CalibrationData:
        return open_data(self.source, model, batch=self.batch, limit=self.limit,
                         shapes=self.shapes, preprocess=self.preprocess, seed=self.seed)


def open_data(
    source: DataSource,
    model: onnx.ModelProto,
    *,
    batch: int | None = None,
    limit: int | None = None,
    shapes: Mapping[str, Sequence[int]] | None = None,
    preprocess: Preprocess | None = None,
    seed: int = 0,
) -> CalibrationData:
    """Calibration batches for ``model`` from ``source`` (see the module docstring for the rules).

    ``batch`` defaults to the model's fixed batch size, else 1. ``shapes`` (random data only) gives
    full input shapes for dynamic dimensions; ``preprocess`` is required for image folders.
    """
    inputs = model_inputs(model)
    if limit is not None and limit < 1:
        raise QdqkitError(f"the sample limit must be at least 1, not {limit}")
    if isinstance(source, str) and source == "random":
        size = _batch_size(inputs, batch, shapes)
        samples, chunks = random_chunks(model, inputs, shapes, seed, limit)
        if size > 1:
            first = next(iter(chunks()))[1]
            for item in inputs:
                check_random_size(item, first[item.name].shape, size)
        return CalibrationData("random data (seeded; scales are meaningless for accuracy)",
                               inputs, True, samples, size, limit, chunks)
    if shapes:
        raise QdqkitError("shapes only apply to random data; real data brings its own shapes")
    size = _batch_size(inputs, batch, None)
    if isinstance(source, (str, os.PathLike)):
        path = Path(source)
        files, description = _files_of(path, inputs, preprocess)
        total = _count_samples(files, inputs)
        if limit is not None:
            total = min(total, limit)
        if files and files[0].suffix.lower() in IMAGE_SUFFIXES:
            spec = preprocess or Preprocess()
            return CalibrationData(description, inputs, False, total, size, limit,
                                   lambda: _origin(image_chunks(files, inputs[0], spec), files))
        return CalibrationData(description, inputs, False, total, size, limit,
                               lambda: _array_chunks(files, inputs))
    if isinstance(source, Mapping) or not isinstance(source, Iterable):
        raise QdqkitError(
            "calibration data must be a file, a folder, 'random' or an iterable of "
            "{input name: array} dicts"
        )
    return CalibrationData("Python iterable", inputs, False, None, size, limit,
                           lambda: _iterable_chunks(source))


def _batch_size(
    inputs: Sequence[ModelInput], batch: int | None, shapes: Mapping[str, Sequence[int]] | None
) -> int:
    fixed = {i.name: i.dims[0] for i in inputs if i.dims and i.dims[0] is not None}
    if batch is not None:
        if batch < 1:
            raise QdqkitError(f"the batch size must be at least 1, not {batch}")
        for name, size in fixed.items():
            if size != batch:
                raise QdqkitError(
                    f"model input '{name}' has a fixed batch of {size}; batch {batch} cannot be fed"
                )
        return batch
    if fixed:
        return next(iter(fixed.values()))
    for shape in (shapes or {}).values():
        if len(shape) > 0 and shape[0] > 0:
            return int(shape[0])
    return 1


def _files_of(
    path: Path, inputs: Sequence[ModelInput], preprocess: Preprocess | None
) -> tuple[list[Path], str]:
    if path.is_dir():
        entries = sorted(p for p in path.iterdir() if p.is_file())
        arrays = [p for p in entries if p.suffix.lower() in ARRAY_SUFFIXES]
        images = [p for p in entries if p.suffix.lower() in IMAGE_SUFFIXES]
        if arrays and images:
            raise QdqkitError(
                f"{path}: mixes .npy/.npz files and images; keep one kind of data per folder"
            )
        if not arrays and not images:
            raise QdqkitError(
                f"{path}: the folder has no .npy, .npz or image files; put calibration data in it"
            )
        if images and len(inputs) != 1:
            raise QdqkitError(
                f"{path}: images can feed a one-input model only; this model has "
                f"{len(inputs)} inputs ({', '.join(i.name for i in inputs)}); use .npz files"
            )
        if images and preprocess is None:
            raise QdqkitError(
                f"{path}: a folder of images needs a preprocessing spec (size, mean/std, "
                "channel order, layout, scale)"
            )
        files = arrays or images
        kind = "images" if images else "array files"
        return files, f"{path} ({len(files)} {kind})"
    if not path.exists():
        raise QdqkitError(f"{path}: no such file or folder")
    suffix = path.suffix.lower()
    if suffix not in ARRAY_SUFFIXES:
        raise QdqkitError(
            f"{path}: calibration data must be a .npy, a .npz or a folder (of those or of images)"
        )
    return [path], str(path)


def _count_samples(files: Sequence[Path], inputs: Sequence[ModelInput]) -> int:
    """Samples in ``files``, from headers only (which also vets every file before any work)."""
    if files and files[0].suffix.lower() in IMAGE_SUFFIXES:
        return len(files)
    total = 0
    for file in files:
        if file.suffix.lower() == ".npy":
            try:
                with file.open("rb") as stream:
                    header = read_header(stream, str(file))
            except OSError as exc:
                raise QdqkitError(f"{file}: cannot be read ({exc.strerror})") from None
        else:
            reader = NpzReader(file)
            reader.close()
            _check_names(str(file), reader.headers.keys(), inputs)
            header = reader.headers[inputs[0].name]
        total += header.shape[0] if header.shape else 1
    return total


def _origin(chunks: Iterator[dict[str, np.ndarray]], files: Sequence[Path]) -> Iterator[Chunk]:
    for file, chunk in zip(files, chunks, strict=False):
        yield str(file), chunk


def _array_chunks(files: Sequence[Path], inputs: Sequence[ModelInput]) -> Iterator[Chunk]:
    names = [i.name for i in inputs]
    for file in files:
        if file.suffix.lower() == ".npy":
            if len(inputs) != 1:
                raise QdqkitError(
                    f"{file}: a .npy holds one array but the model has {len(inputs)} inputs "
                    f"({', '.join(names)}); save an .npz with one key per input"
                )
            yield str(file), {names[0]: open_npy(file)}
            continue
        reader = NpzReader(file)
        try:
            _check_names(str(file), reader.headers.keys(), inputs)
            for chunk in reader.chunks(names):
                yield str(file), chunk
        finally:
            reader.close()


def _iterable_chunks(source: Iterable[Mapping[str, np.ndarray]]) -> Iterator[Chunk]:
    for index, item in enumerate(source):
        origin = f"batch {index} of the data"
        if not isinstance(item, Mapping):
            raise QdqkitError(
                f"{origin}: is a {type(item).__name__}, not a dict of {{input name: array}}"
            )
        yield origin, item


def _check_names(origin: str, names: Iterable[str], inputs: Sequence[ModelInput]) -> None:
    given = set(names)
    expected = [i.name for i in inputs]
    missing = [n for n in expected if n not in given]
    extra = sorted(given - set(expected))
    if missing or extra:
        what = (f"has no array for input(s) {', '.join(missing)}" if missing
                else f"has arrays for {', '.join(extra)}, which the model does not take")
        raise QdqkitError(f"{origin}: {what}; the model's inputs are {', '.join(expected)}")


def _checked_array(origin: str, spec: ModelInput, value: object) -> np.ndarray:
    """The array for ``spec`` from one chunk, vetted (not yet cast or read from disk)."""
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    where = f"{origin}: input '{spec.name}'"
    if array.dtype.hasobject or array.dtype.kind not in NUMERIC_KINDS:
        raise QdqkitError(f"{where} has dtype {array.dtype}, not numbers; give numeric arrays")
    if spec.dims is None:
        if array.ndim == 0:
            raise QdqkitError(f"{where} is a scalar; samples must lie on axis 0")
        return array
    if array.ndim == len(spec.dims) + 1 and array.ndim > 1:
        # A leading sample axis over whole batches ([samples, N, ...]): the samples of every
        # batch, in order, on the batch axis.
        array = array.reshape((array.shape[0] * array.shape[1], *array.shape[2:]))
    if array.ndim != len(spec.dims):
        hint = " (samples lie on axis 0, the model's batch axis)"
        raise QdqkitError(
            f"{where} has shape {list(array.shape)} (rank {array.ndim}) but the model takes "
            f"{spec.shape_text()} (rank {len(spec.dims)}){hint}"
        )
    for axis, (want, got) in enumerate(zip(spec.dims, array.shape, strict=True)):
        if axis > 0 and want is not None and want != got:
            raise QdqkitError(
                f"{where} has shape {list(array.shape)} but the model takes "
                f"{spec.shape_text()} (axis {axis} differs)"
            )
    return array


def _materialize(origin: str, spec: ModelInput, piece: np.ndarray, first: int) -> np.ndarray:
    out = piece.astype(spec.dtype)  # a copy: mapped files are read here, one batch at a time
    if piece.dtype.kind == "f" and not np.isfinite(piece).all():
        raise QdqkitError(
            f"{origin}: input '{spec.name}' has NaN or infinite values in samples "
            f"{first}..{first + len(piece) - 1}; clean the data"
        )
    return out


def _rebatch(
    chunks: Iterator[Chunk], inputs: Sequence[ModelInput], batch: int, limit: int | None
) -> Iterator[dict[str, np.ndarray]]:
    pending: list[dict[str, np.ndarray]] = []
    pending_count = 0
    emitted = 0

    def flush() -> dict[str, np.ndarray]:
        nonlocal pending, pending_count, emitted
        if len(pending) == 1:
            merged = pending[0]
        else:
            merged = {s.name: np.concatenate([p[s.name] for p in pending]) for s in inputs}
        emitted += pending_count
        pending, pending_count = [], 0
        return merged

    for origin, chunk in chunks:
        _check_names(origin, chunk.keys(), inputs)
        arrays = {s.name: _checked_array(origin, s, chunk[s.name]) for s in inputs}
        counts = {a.shape[0] for a in arrays.values()}
        if len(counts) > 1:
            raise QdqkitError(
                f"{origin}: the inputs hold different numbers of samples on axis 0 "
                f"({', '.join(f'{k} {v.shape[0]}' for k, v in arrays.items())})"
            )
        available = counts.pop()
        start = 0
        while start < available:
            if limit is not None and emitted + pending_count >= limit:
                break
            take = min(available - start, batch - pending_count)
            if limit is not None:
                take = min(take, limit - emitted - pending_count)
            piece = {s.name: _materialize(origin, s, arrays[s.name][start : start + take], start)
                     for s in inputs}
            if pending and any(piece[n].shape[1:] != pending[0][n].shape[1:] for n in piece):
                # Dynamic dimensions changed between files: samples of two shapes cannot stack.
                yield flush()
            pending.append(piece)
            pending_count += take
            start += take
            if pending_count == batch:
                yield flush()
        if limit is not None and emitted + pending_count >= limit:
            break
    if pending:
        yield flush()
