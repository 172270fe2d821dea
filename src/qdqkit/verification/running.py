"""Running the two models of ``verify`` one after the other, and comparing their outputs.

``verify`` never holds both sessions at once, so its peak memory is the larger model's, not their
sum: the Q/DQ model runs over every batch first (``run_reference``) and only its outputs are kept
(``OutputStore``) while its session is freed and the emulation's is built; the emulation then runs
over the same batches (``compare``; the data source re-reads them in the same order) and each
output streams into an ``Accumulator``. Outputs are usually small (logits, boxes); past
``MEMORY_BUDGET`` bytes (dense outputs over many samples) further batches go to ``.npy`` files in
a temporary folder, read back memory-mapped, so memory stays bounded whatever the sample count.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import onnx_ir as ir

from qdqkit.core import numerics
from qdqkit.core.lazy_proto import write_streaming
from qdqkit.core.progress import Progress

MEMORY_BUDGET = 256 << 20


class OutputStore:
    """Batches of ``{output name: array}`` in the order added; iterate to read them back."""

    def __init__(self, names: list[str], memory_budget: int | None = None) -> None:
        self.names = names
        self._budget = MEMORY_BUDGET if memory_budget is None else memory_budget
        self._held = 0
        self._batches: list[dict[str, np.ndarray] | Path] = []
        self._spill: tempfile.TemporaryDirectory[str] | None = None

    def __len__(self) -> int:
        return len(self._batches)

    def add(self, outputs: dict[str, np.ndarray]) -> None:
        size = sum(outputs[n].nbytes for n in self.names)
        if self._held + size <= self._budget:
            self._held += size
            self._batches.append({n: outputs[n] for n in self.names})
            return
        if self._spill is None:
            self._spill = tempfile.TemporaryDirectory(prefix="qdqkit-verify-")
        folder = Path(self._spill.name) / str(len(self._batches))
        folder.mkdir()
        for index, name in enumerate(self.names):  # index, not name: names may not be file names
            np.save(folder / f"{index}.npy", np.asarray(outputs[name], order="C"),
                    allow_pickle=False)
        self._batches.append(folder)

    def __iter__(self) -> Iterator[dict[str, np.ndarray]]:
        for batch in self._batches:
            if isinstance(batch, Path):
                yield {name: np.load(batch / f"{index}.npy", mmap_mode="r", allow_pickle=False)
                       for index, name in enumerate(self.names)}
            else:
                yield batch

    def close(self) -> None:
        """Drop the outputs and delete any spilled files."""
        self._batches.clear()
        if self._spill is not None:
            self._spill.cleanup()
            self._spill = None


def write_temporary(model: ir.Model, folder: str | Path) -> Path:
    """``model`` saved as ``folder``/model.onnx, its weights streamed rather than copied.

    A model we built reaches onnxruntime through a file, not as arrays: onnxruntime copies the
    initializers it is handed in memory (ours and its copy both live while it runs), but from a
    file it holds one copy, and the caller frees its own before the session is built.
    """
    path = Path(folder) / "model.onnx"
    with open(path, "wb") as stream:
        write_streaming(model, stream)
    return path


def run_reference(
    model: Path, data: Any, names: list[str]
) -> tuple[OutputStore, dict[str, list[int]], int]:
    """The Q/DQ model's outputs on every batch, the input shapes used, the sample count.

    Float optimizations are on here and in the emulation, so both sides run the same kernels:
    onnxruntime folds each weight's Q/DQ once, with the kernels a run would use, and computes
    activation Q/DQ as the spec says (none of its Q/DQ fusions).
    """
    session = numerics.make_session(model, optimize=True, spin=False)
    expected = OutputStore(names)
    shapes: dict[str, list[int]] = {}
    count = 0
    try:
        with Progress("running the Q/DQ model", total=data.total_samples) as bar:
            for batch in data:
                for name, array in batch.items():
                    shapes.setdefault(name, list(array.shape))
                expected.add(numerics.run(session, batch, names))
                size = next(iter(batch.values())).shape[0] if batch else 1
                count += size
                bar.advance(size)
    except BaseException:
        expected.close()
        raise
    finally:
        del session
        numerics.release_freed_memory()
    return expected, shapes, count


def compare(
    expected: OutputStore, emulation: Emulated, data: Any, label: str
) -> dict[str, Accumulator]:
    """Run ``emulation`` on the same batches and compare with the stored outputs; then free its
    session (``emulation.session`` becomes None)."""
    names = expected.names
    accumulators = {n: Accumulator() for n in names}
    try:
        with Progress(label, total=data.total_samples) as bar:
            for batch, want in zip(data, expected, strict=True):
                feed = {k: v.astype(emulation.input_types.get(k, v.dtype), copy=False)
                        for k, v in batch.items()}
                got = numerics.run(emulation.session, feed, names)
                for n in names:
                    accumulators[n].add(want[n], got[n])
                bar.advance(next(iter(batch.values())).shape[0] if batch else 1)
    finally:
        emulation.session = None
        numerics.release_freed_memory()
    return accumulators


class Emulated(Protocol):
    """What ``compare`` needs of an emulation: its session and its inputs' element types."""

    session: Any
    input_types: dict[str, np.dtype]


class Accumulator(numerics.ErrorAccumulator):
    """The streaming metrics, plus whether either side ever produced NaN or infinity."""

    def __init__(self) -> None:
        super().__init__()
        self.non_finite = ""

    def add(self, reference: np.ndarray, test: np.ndarray) -> None:
        if not self.non_finite:
            if not np.isfinite(reference).all():
                self.non_finite = "the Q/DQ model"
            elif not np.isfinite(test).all():
                self.non_finite = "the emulation"
        if self.non_finite:
            return
        super().add(reference, test)
