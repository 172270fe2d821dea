"""The explicit ``random`` calibration source: seeded values shaped and ranged from the model.

1. Shapes: the model's fixed dimensions; a dynamic dimension takes its value from ``shapes`` when
   given, else the batch axis (``ModelInput.batch_axis``, e.g. axis 1 of ``state [2, batch,
   128]``) is 1 and any other axis is ``RANDOM_DYNAMIC_DIM`` (32). A scalar input is refused: its
   value (a sample rate, a threshold) is not something to guess.
2. Values: a float input quantized by a QuantizeLinear in the model spans that Q's range
   (+-127*scale for symmetric int8); other float inputs are uniform in [-1, 1]; integer and bool
   inputs are zero (safe as indices and masks).
3. A batch of one input larger than 1 GiB is refused, naming the input: its declared shape is not
   one anybody runs (``--shapes`` gives a real one).
4. ``RANDOM_SAMPLES`` (8) samples unless a limit says otherwise, drawn one at a time from one
   seeded generator, so the values do not depend on the batch size. An input without a batch axis
   is drawn once, before the samples, and fed with every one: a batch holds one value of it.
5. The symbolic dimensions rule 1 guessed are known (``guessed_dims``): when onnxruntime then
   fails on the model (an audio front end whose 512-sample window does not fit 32 samples), the
   error names them and asks for ``--shapes``, since the guess, not the model, is the likely
   cause.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Mapping, Sequence

import numpy as np
import onnx

from qdqkit.core.errors import QdqkitError
from qdqkit.core.model_inputs import ModelInput, input_quant_ranges

RANDOM_SAMPLES = 8
RANDOM_DYNAMIC_DIM = 32
MAX_RANDOM_BYTES = 1 << 30  # one batch of one input; more is a declaration error, not data


def _sample_shape(spec: ModelInput, shapes: Mapping[str, Sequence[int]]) -> tuple[int, ...]:
    """The shape of one sample of ``spec``: 1 on its batch axis (the whole value if it has none)."""
    if spec.dims is None:
        if spec.name not in shapes:
            raise QdqkitError(
                f"model input '{spec.name}' has no declared shape; give its shape for random data"
            )
        return (1, *(int(d) for d in shapes[spec.name][1:]))
    if not spec.dims:
        raise QdqkitError(f"model input '{spec.name}' is a scalar, whose value random data cannot "
                          "guess; give real data that holds it")
    given = shapes.get(spec.name)
    if given is not None and len(given) != len(spec.dims):
        raise QdqkitError(
            f"the shape {list(given)} given for '{spec.name}' has rank {len(given)}; the model "
            f"takes {spec.shape_text()}"
        )
    dims = []
    for axis, want in enumerate(spec.dims):
        if axis == spec.batch_axis:
            dims.append(1)  # one sample; batching stacks samples on this axis
            continue
        if given is not None and want is not None and int(given[axis]) != want:
            raise QdqkitError(
                f"the shape {list(given)} given for '{spec.name}' differs from the model's "
                f"{spec.shape_text()} on axis {axis}"
            )
        if want is not None:
            dims.append(want)
        else:
            dims.append(int(given[axis]) if given is not None else RANDOM_DYNAMIC_DIM)
    return tuple(dims)


def guessed_dims(inputs: Sequence[ModelInput],
                 shapes: Mapping[str, Sequence[int]] | None) -> tuple[str, ...]:
    """Rule 5: the symbolic dimensions rule 1 filled with ``RANDOM_DYNAMIC_DIM``, as
    ``'input'[axis] name = 32``; a batch axis holds one sample and is not a guess."""
    given = shapes or {}
    return tuple(
        f"'{spec.name}'[{axis}] {(spec.dim_names or ('',) * len(spec.dims))[axis] or '?'} "
        f"= {RANDOM_DYNAMIC_DIM}"
        for spec in inputs if spec.dims and spec.name not in given
        for axis, dim in enumerate(spec.dims)
        if dim is None and axis != spec.batch_axis)


@contextlib.contextmanager
def explaining_guesses(guessed: Sequence[str]) -> Iterator[None]:
    """Rule 5: an onnxruntime failure inside the block, on random data that guessed
    ``guessed``, names the guesses and asks for the shapes the model runs at."""
    try:
        yield
    except QdqkitError as exc:
        if not guessed or "onnxruntime" not in str(exc):
            raise
        raise QdqkitError(
            f"{exc} (random data guessed the symbolic dimensions {', '.join(guessed)}: give "
            "--shapes with shapes the model runs at)") from None


def check_random_size(spec: ModelInput, sample_shape: Sequence[int], batch: int) -> None:
    """Refuse random batches too large to make: a declared [1, 8, 2^20, 2^20] is not a size."""
    shape = list(sample_shape)
    if spec.batch_axis is not None:
        shape[spec.batch_axis] = batch
    size = math.prod(shape) * spec.dtype.itemsize
    if size > MAX_RANDOM_BYTES:
        raise QdqkitError(
            f"model input '{spec.name}' would take {size / 2**30:.3g} GiB of random data a batch "
            f"({'x'.join(map(str, shape))}, from its declared shape {spec.shape_text()}); give "
            f"realistic shapes with --shapes {spec.name}:{'x'.join(map(str, sample_shape))} or "
            "real data"
        )


def random_chunks(
    model: onnx.ModelProto,
    inputs: Sequence[ModelInput],
    shapes: Mapping[str, Sequence[int]] | None,
    seed: int,
    limit: int | None,
) -> tuple[int, Callable[[], Iterator[tuple[str, Mapping[str, np.ndarray]]]]]:
    """(number of samples, a factory of one-sample chunks) for the random source."""
    given = dict(shapes or {})
    unknown = sorted(set(given) - {i.name for i in inputs})
    if unknown:
        raise QdqkitError(
            f"shapes name {', '.join(unknown)}, which the model does not take; its inputs are "
            f"{', '.join(i.name for i in inputs)}"
        )
    sample_shapes = {spec.name: _sample_shape(spec, given) for spec in inputs}
    for spec in inputs:
        check_random_size(spec, sample_shapes[spec.name], 1)
    ranges = input_quant_ranges(model)
    samples = limit if limit is not None else RANDOM_SAMPLES

    def chunks() -> Iterator[tuple[str, Mapping[str, np.ndarray]]]:
        rng = np.random.default_rng(seed)
        # Drawn once: a batch feeds one value of an input without a batch axis (rule 4).
        whole = {spec.name: _draw(rng, spec, sample_shapes[spec.name], ranges)
                 for spec in inputs if spec.batch_axis is None}
        for index in range(samples):
            sample = {spec.name: whole[spec.name] if spec.name in whole
                      else _draw(rng, spec, sample_shapes[spec.name], ranges) for spec in inputs}
            yield f"random sample {index}", sample

    return samples, chunks


def _draw(rng: np.random.Generator, spec: ModelInput, shape: tuple[int, ...],
          ranges: Mapping[str, tuple[float, float]]) -> np.ndarray:
    if spec.dtype.kind == "f":
        low, high = ranges.get(spec.name, (-1.0, 1.0))
        return rng.uniform(low, high, size=shape).astype(spec.dtype)
    return np.zeros(shape, dtype=spec.dtype)
