"""Reading ``.npy`` and ``.npz`` calibration files without trusting them and without loading them.

1. The header is read and checked before any data: object dtypes (pickled content) are refused,
   as are strings and other non-numeric types, and a header that declares more bytes than the
   file (or the ``.npz`` member) holds.
2. A ``.npy`` is memory-mapped (``mmap_mode="r"``), so only the rows a batch touches are read.
3. A ``.npz`` member is compressed or stored, so it cannot be mapped: its rows are streamed from
   the zip member a chunk at a time, all members in step, so memory holds one chunk. A member
   whose samples are not on axis 0 (``state [2, N, 128]``), a column-major one, and one value
   shared by every sample (no sample axis, e.g. a 0-d sample rate) are read whole, once.
"""

from __future__ import annotations

import math
import os
import zipfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np

from qdqkit.core.errors import QdqkitError

# Bytes of one streamed .npz chunk (per member): large enough to amortize zip reads.
NPZ_CHUNK_BYTES = 8 << 20
# Kinds numpy data may have to be fed to a model: bool, signed, unsigned, float.
NUMERIC_KINDS = frozenset("biuf")


@dataclass(frozen=True)
class ArrayHeader:
    shape: tuple[int, ...]
    dtype: np.dtype
    fortran_order: bool
    data_offset: int

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize


def read_header(stream: IO[bytes], origin: str) -> ArrayHeader:
    """Parse and vet an .npy header; ``origin`` names the file (and member) in errors."""
    try:
        version = np.lib.format.read_magic(stream)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(stream)
        else:
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(stream)
    except Exception:
        raise QdqkitError(
            f"{origin}: not a valid .npy array; save the data with numpy.save or numpy.savez"
        ) from None
    dtype = np.dtype(dtype)
    if dtype.hasobject:
        raise QdqkitError(
            f"{origin}: holds Python objects (pickled content), which qdqkit never loads; "
            "save plain numeric arrays"
        )
    if dtype.kind not in NUMERIC_KINDS:
        raise QdqkitError(
            f"{origin}: has dtype {dtype}, not numbers; save bool, integer or float arrays"
        )
    return ArrayHeader(tuple(int(d) for d in shape), dtype, bool(fortran), stream.tell())


def _check_size(header: ArrayHeader, available: int, origin: str) -> None:
    if header.nbytes > available:
        raise QdqkitError(
            f"{origin}: its header declares shape {list(header.shape)} ({header.nbytes} bytes) "
            f"but only {available} bytes follow; the file is truncated or not a real .npy"
        )


def open_npy(path: Path) -> np.ndarray:
    """The array of a ``.npy`` file, memory-mapped read-only after its header is vetted."""
    try:
        with path.open("rb") as stream:
            header = read_header(stream, str(path))
        size = os.path.getsize(path)
    except OSError as exc:
        raise QdqkitError(f"{path}: cannot be read ({exc.strerror})") from None
    _check_size(header, size - header.data_offset, str(path))
    if header.nbytes == 0:
        return np.zeros(header.shape, header.dtype)
    try:
        array = np.load(path, mmap_mode="r", allow_pickle=False)
    except Exception as exc:
        raise QdqkitError(f"{path}: cannot be memory-mapped ({exc})") from None
    return np.asarray(array)


class NpzReader:
    """The members of an ``.npz`` archive, vetted up front and read row-chunk by row-chunk."""

    def __init__(self, path: Path) -> None:
        self.path = path
        try:
            self._zip = zipfile.ZipFile(path)
        except (OSError, zipfile.BadZipFile):
            raise QdqkitError(
                f"{path}: not a readable .npz archive; save the data with numpy.savez"
            ) from None
        self.headers: dict[str, ArrayHeader] = {}
        for info in self._zip.infolist():
            if not info.filename.endswith(".npy"):
                continue
            key = info.filename[: -len(".npy")]
            origin = f"{path} (key '{key}')"
            with self._zip.open(info) as stream:
                header = read_header(stream, origin)
            _check_size(header, info.file_size - header.data_offset, origin)
            self.headers[key] = header

    def close(self) -> None:
        self._zip.close()

    def chunks(self, axes: Mapping[str, int | None]) -> Iterator[dict[str, np.ndarray]]:
        """Yield ``{key: part}`` for the keys of ``axes``, first to last, in step.

        ``axes[key]`` is the axis of that member's samples; every part holds the same number of
        them. A key whose axis is None has no samples: its whole value is in every part.
        """
        lengths = {key: self.headers[key].shape[axis] for key, axis in axes.items()
                   if axis is not None}
        if len(set(lengths.values())) > 1:
            listed = ", ".join(f"'{k}' {n} on axis {axes[k]}" for k, n in lengths.items())
            raise QdqkitError(
                f"{self.path}: the arrays hold different numbers of samples ({listed}); "
                "give every input the same number of samples"
            )
        total = next(iter(lengths.values()), 1)  # values without samples make one part
        streamed = [key for key, axis in axes.items()
                    if axis == 0 and not self.headers[key].fortran_order]
        row_bytes = {
            key: math.prod(self.headers[key].shape[1:]) * self.headers[key].dtype.itemsize
            for key in streamed
        }
        rows_per_chunk = max(1, NPZ_CHUNK_BYTES // max([1, *row_bytes.values()]))
        streams: dict[str, IO[bytes]] = {}
        try:
            # Rows off axis 0 (or column-major) are not contiguous: such members are read whole.
            whole = {key: self._whole(key) for key in axes if key not in streamed}
            for key in streamed:
                streams[key] = self._zip.open(key + ".npy")
                streams[key].read(self.headers[key].data_offset)
            for start in range(0, total, rows_per_chunk):
                rows = min(rows_per_chunk, total - start)
                chunk = {}
                for key, axis in axes.items():
                    if axis is None:
                        chunk[key] = whole[key]
                    elif key in whole:
                        part = (slice(None),) * axis + (slice(start, start + rows),)
                        chunk[key] = whole[key][part]
                    else:
                        data = self._read(key, streams[key], rows * row_bytes[key])
                        shape = (rows, *self.headers[key].shape[1:])
                        chunk[key] = np.frombuffer(data, self.headers[key].dtype).reshape(shape)
                yield chunk
        finally:
            for stream in streams.values():
                stream.close()

    def _whole(self, key: str) -> np.ndarray:
        header = self.headers[key]
        with self._zip.open(key + ".npy") as stream:
            stream.read(header.data_offset)
            flat = self._read(key, stream, header.nbytes)
        array = np.frombuffer(flat, header.dtype)
        return array.reshape(header.shape, order="F" if header.fortran_order else "C")

    def _read(self, key: str, stream: IO[bytes], size: int) -> bytes:
        try:
            data = stream.read(size)
        except (OSError, zipfile.BadZipFile, EOFError) as exc:
            raise QdqkitError(f"{self.path} (key '{key}'): cannot be read ({exc})") from None
        if len(data) != size:
            raise QdqkitError(f"{self.path} (key '{key}'): the archive member is truncated")
        return data
