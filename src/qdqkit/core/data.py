"""Calibration data: every source becomes a stream of ``{input name: array}`` batches.

Sources: a ``.npy`` (one-input models), a ``.npz`` (keys = input names), a folder of them (read in
name order), a folder of images with a :class:`~qdqkit.core.images.Preprocess` spec, any Python
iterable of dicts, or ``"random"``. The rules every batch obeys:

1. Arrays are laid out as the model takes them, samples on each input's batch axis (see
   ``qdqkit.core.model_inputs``: axis 0, or e.g. axis 1 of ``state [2, batch, 128]`` beside
   ``input [batch, 512]``); every other axis must match the model wherever the model fixes it,
   and dynamic dimensions come from the data. An array with one more axis than the input holds
   whole batches on a leading axis; they are fed one after another.
2. An input without a batch axis (a scalar such as ``sr []``, or ``scale [1]`` beside
   ``x [N, 3]``) is fed whole: an array of the input's rank is one value for every sample (a 0-d
   ``sr``); one with an extra leading axis holds a value per sample (``sr`` of shape ``(N,)``).
   A run takes one value, so samples whose values differ go in different batches.
3. Values are cast to each input's ONNX element type; non-finite floats are refused, naming the
   file (or batch) and input.
4. Files are streamed (``.npy`` memory-mapped, ``.npz`` read a chunk at a time, images decoded one
   by one): memory holds one batch, whatever the number of samples. ``batch`` re-batches samples
   across files; ``limit`` stops after that many samples.
5. ``random`` is never silent: the returned :class:`CalibrationData` says ``is_random``, and
   ``guessed`` names the symbolic dimensions it filled; ``explaining_guesses()`` turns an
   onnxruntime failure on such data into an error that names them (``core.data_random`` rule 5).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import onnx

from qdqkit.core.data_random import (
    RANDOM_SAMPLES,
    check_random_size,
    explaining_guesses,
    guessed_dims,
    random_chunks,
)
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
    guessed: tuple[str, ...] = ()

    def explaining_guesses(self) -> contextlib.AbstractContextManager[None]:
        """A block whose onnxruntime failures name the dimensions random data guessed (rule 5)."""
        return explaining_guesses(self.guessed)

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
        if size > 1 and _fixed_batch_input(inputs, size) is not None:
            # Every run of the model takes ``size`` samples: random data draws whole batches.
            limit = -(-(limit or RANDOM_SAMPLES) // size) * size
        samples, chunks = random_chunks(model, inputs, shapes, seed, limit)
        if size > 1:
            first = next(iter(chunks()))[1]
            for item in inputs:
                check_random_size(item, first[item.name].shape, size)
        return CalibrationData("random data (seeded; scales are meaningless for accuracy)",
                               inputs, True, samples, size, limit, chunks,
                               guessed_dims(inputs, shapes))
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
    batched = [i for i in inputs if i.batch_axis is not None]
    if not batched:
        if batch not in (None, 1):
            raise QdqkitError(
                f"no model input has a batch axis ({_shapes_text(inputs)}); each run takes one "
                f"sample, so batch {batch} cannot be fed: use batch 1"
            )
        return 1
    fixed: dict[str, int] = {}  # the batch sizes of the inputs whose batch the model fixes
    given: dict[str, int] = {}  # the batch sizes ``shapes`` gives
    for spec in batched:
        axis = spec.batch_axis or 0
        if spec.dims is not None and (size := spec.dims[axis]) is not None:
            fixed[spec.name] = size
        shape = (shapes or {}).get(spec.name)
        if shape is not None and len(shape) > axis and shape[axis] > 0:
            given[spec.name] = int(shape[axis])
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
    if len(set(given.values())) > 1:
        listed = ", ".join(f"{size} for '{name}'" for name, size in given.items())
        raise QdqkitError(f"the shapes give different batch sizes ({listed}); give one")
    return next(iter(given.values()), 1)


def _shapes_text(inputs: Sequence[ModelInput]) -> str:
    return ", ".join(f"{i.name} {i.shape_text()}" for i in inputs)


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
            spec = _npy_input(file, inputs)
            try:
                with file.open("rb") as stream:
                    shapes = {spec.name: read_header(stream, str(file)).shape}
            except OSError as exc:
                raise QdqkitError(f"{file}: cannot be read ({exc.strerror})") from None
        else:
            reader = NpzReader(file)
            reader.close()
            _check_names(str(file), reader.headers.keys(), inputs)
            shapes = {spec.name: reader.headers[spec.name].shape for spec in inputs}
        counts = [_sample_count(str(file), spec, shapes[spec.name])
                  for spec in inputs if spec.name in shapes]
        total += next((count for count in counts if count is not None), 1)
    return total


def _npy_input(file: Path, inputs: Sequence[ModelInput]) -> ModelInput:
    if len(inputs) != 1:
        raise QdqkitError(
            f"{file}: a .npy holds one array but the model has {len(inputs)} inputs "
            f"({', '.join(i.name for i in inputs)}); save an .npz with one key per input"
        )
    return inputs[0]


def _sample_axis(origin: str, spec: ModelInput, shape: Sequence[int]) -> int | None:
    """The axis counting the samples in an array of ``shape`` for ``spec``; None when the array
    is one value for every sample (rules 1 and 2 of the module docstring)."""
    where = f"{origin}: input '{spec.name}'"
    if spec.dims is None:
        if not shape:
            raise QdqkitError(f"{where} is a scalar; samples must lie on axis 0")
        return 0
    if len(shape) == len(spec.dims) + 1:
        return 0  # whole batches, or a value per sample of an input without a batch axis
    if len(shape) == len(spec.dims):
        return spec.batch_axis
    hint = (f"samples lie on axis {spec.batch_axis}, the model's batch axis"
            if spec.batch_axis is not None else
            "it has no batch axis: give one value, or one per sample on a leading axis")
    raise QdqkitError(
        f"{where} has shape {list(shape)} (rank {len(shape)}) but the model takes "
        f"{spec.shape_text()} (rank {len(spec.dims)}; {hint})"
    )


def _sample_count(origin: str, spec: ModelInput, shape: Sequence[int]) -> int | None:
    """Samples in an array of ``shape`` for ``spec``; None for one value for every sample."""
    axis = _sample_axis(origin, spec, shape)
    if axis is None:
        return None
    if spec.dims is not None and len(shape) > len(spec.dims) and spec.batch_axis is not None:
        return shape[0] * shape[spec.batch_axis + 1]  # batches of samples
    return shape[axis]


def _origin(chunks: Iterator[dict[str, np.ndarray]], files: Sequence[Path]) -> Iterator[Chunk]:
    for file, chunk in zip(files, chunks, strict=False):
        yield str(file), chunk


def _array_chunks(files: Sequence[Path], inputs: Sequence[ModelInput]) -> Iterator[Chunk]:
    for file in files:
        if file.suffix.lower() == ".npy":
            yield str(file), {_npy_input(file, inputs).name: open_npy(file)}
            continue
        reader = NpzReader(file)
        try:
            _check_names(str(file), reader.headers.keys(), inputs)
            axes = {s.name: _sample_axis(str(file), s, reader.headers[s.name].shape)
                    for s in inputs}
            for chunk in reader.chunks(axes):
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


@dataclass(frozen=True)
class _Column:
    """One input's array in a chunk, vetted (not yet cast or read from disk).

    A batched input's samples lie on its batch axis; an input without one holds a value per
    sample on axis 0 (``per_sample``) or one value for every sample.
    """

    spec: ModelInput
    array: np.ndarray
    per_sample: bool

    def count(self) -> int | None:
        if self.spec.batch_axis is not None:
            return int(self.array.shape[self.spec.batch_axis])
        return len(self.array) if self.per_sample else None

    def run(self, start: int, most: int) -> int:
        """How many of ``most`` samples from ``start`` one feed holds: one value of an input
        without a batch axis, so as many as share the value of sample ``start``."""
        if not self.per_sample:
            return most
        first = self.array[start]
        for offset in range(1, most):
            if not np.array_equal(self.array[start + offset], first):
                return offset
        return most

    def piece(self, start: int, take: int) -> np.ndarray:
        axis = self.spec.batch_axis
        if axis is not None:
            return self.array[(slice(None),) * axis + (slice(start, start + take),)]
        return self.array[start, ...] if self.per_sample else self.array  # 0-d stays an array


def _column(origin: str, spec: ModelInput, value: object) -> _Column:
    array = value if isinstance(value, np.ndarray) else np.asarray(value)
    where = f"{origin}: input '{spec.name}'"
    if array.dtype.hasobject or array.dtype.kind not in NUMERIC_KINDS:
        raise QdqkitError(f"{where} has dtype {array.dtype}, not numbers; give numeric arrays")
    axis = _sample_axis(origin, spec, array.shape)
    if spec.dims is None:
        return _Column(spec, array, False)
    per_sample = spec.batch_axis is None and axis is not None
    if array.ndim > len(spec.dims) and spec.batch_axis is not None:
        # A leading axis over whole batches: the samples of every batch, in order, on the
        # batch axis.
        b = spec.batch_axis
        array = np.moveaxis(array, 0, b)
        array = array.reshape((*array.shape[:b], array.shape[b] * array.shape[b + 1],
                               *array.shape[b + 2:]))
    value_shape = array.shape[1:] if per_sample else array.shape
    for dim, (want, got) in enumerate(zip(spec.dims, value_shape, strict=True)):
        if dim != spec.batch_axis and want is not None and want != got:
            raise QdqkitError(
                f"{where} has shape {list(array.shape)} but the model takes "
                f"{spec.shape_text()} (axis {dim + per_sample} differs)"
            )
    return _Column(spec, array, per_sample)


def _materialize(origin: str, spec: ModelInput, piece: np.ndarray, first: int,
                 count: int) -> np.ndarray:
    out = piece.astype(spec.dtype)  # a copy: mapped files are read here, one batch at a time
    if piece.dtype.kind == "f" and not np.isfinite(piece).all():
        raise QdqkitError(
            f"{origin}: input '{spec.name}' has NaN or infinite values in samples "
            f"{first}..{first + count - 1}; clean the data"
        )
    return out


def _stackable(inputs: Sequence[ModelInput], batch: Mapping[str, np.ndarray],
               piece: Mapping[str, np.ndarray]) -> bool:
    """Whether ``piece`` joins ``batch`` in one feed: same shapes off the batch axis (dynamic
    dimensions may change between files) and the same value of every input without one."""
    for spec in inputs:
        a, b = batch[spec.name], piece[spec.name]
        if spec.batch_axis is None:
            if a.shape != b.shape or not np.array_equal(a, b):
                return False
        elif a.shape[:spec.batch_axis] + a.shape[spec.batch_axis + 1:] != (
                b.shape[:spec.batch_axis] + b.shape[spec.batch_axis + 1:]):
            return False
    return True


def _fixed_batch_input(inputs: Sequence[ModelInput], batch: int) -> str | None:
    """The first input whose batch axis the model fixes at ``batch``, by name."""
    return next((s.name for s in inputs if s.batch_axis is not None and s.dims is not None
                 and s.dims[s.batch_axis] == batch), None)


def _rebatch(
    chunks: Iterator[Chunk], inputs: Sequence[ModelInput], batch: int, limit: int | None
) -> Iterator[dict[str, np.ndarray]]:
    pending: list[dict[str, np.ndarray]] = []
    pending_count = 0
    emitted = 0

    # An input whose batch the model fixes takes that many samples in every run, no fewer.
    fixed = _fixed_batch_input(inputs, batch) if batch > 1 else None

    def flush() -> dict[str, np.ndarray]:
        nonlocal pending, pending_count, emitted
        if fixed is not None and pending_count != batch:
            raise QdqkitError(
                f"model input '{fixed}' has a fixed batch of {batch}, and {pending_count} "
                f"samples are left to fill one (after {emitted}): give a multiple of {batch} "
                "samples of one shape (--limit)")
        if len(pending) == 1:
            merged = pending[0]
        else:
            merged = {s.name: pending[0][s.name] if s.batch_axis is None
                      else np.concatenate([p[s.name] for p in pending], axis=s.batch_axis)
                      for s in inputs}
        emitted += pending_count
        pending, pending_count = [], 0
        return merged

    for origin, chunk in chunks:
        _check_names(origin, chunk.keys(), inputs)
        columns = [_column(origin, s, chunk[s.name]) for s in inputs]
        counts = {c.spec.name: n for c in columns if (n := c.count()) is not None}
        if len(set(counts.values())) > 1:
            raise QdqkitError(
                f"{origin}: the inputs hold different numbers of samples "
                f"({', '.join(f'{k} {n}' for k, n in counts.items())})"
            )
        available = next(iter(counts.values()), 1)  # values for every sample make one sample
        start = 0
        while start < available:
            if limit is not None and emitted + pending_count >= limit:
                break
            take = min(available - start, batch - pending_count)
            if limit is not None:
                take = min(take, limit - emitted - pending_count)
            take = min(c.run(start, take) for c in columns)
            piece = {c.spec.name: _materialize(origin, c.spec, c.piece(start, take), start, take)
                     for c in columns}
            if pending and not _stackable(inputs, pending[0], piece):
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
