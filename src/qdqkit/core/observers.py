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
"""

from __future__ import annotations

import math
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
    max, so the reduction reports it apart).
    """

    minimum: float
    maximum: float
    finite: bool
    count: int


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
        low = float(x.min())
        high = float(x.max())
        self._check_finite(math.isfinite(low) and math.isfinite(high))
        self.count += x.size
        self.minimum = min(self.minimum, low)
        self.maximum = max(self.maximum, high)
        if self.histogram is None:
            return
        batch_absmax = max(-low, high)
        if batch_absmax == 0.0:
            self.histogram[0] += x.size
            return
        exponent = math.frexp(batch_absmax)[1]  # batch_absmax < 2**exponent, tightest such
        if self.range_exponent is None:
            self.range_exponent = exponent
        elif exponent > self.range_exponent:
            self._widen(exponent)
        self.histogram += _bin_counts(x, _BINS_LOG2 - self.range_exponent)

    def _update_range(self, batch: TensorRange) -> None:
        if self.histogram is not None:
            raise ValueError(f"'{self.name}' keeps a histogram: it needs the whole tensor")
        if batch.count == 0:
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


def _bin_counts(x: np.ndarray, scale_log2: int) -> np.ndarray:
    """Counts of ``floor(|x| * 2**scale_log2)`` over 2048 bins; every |x| must map below 2048."""
    if -120 < scale_log2 < 120:
        # A power-of-two factor keeps float32 multiplication exact, so bins never depend on the
        # range the batch arrived under.
        scaled = np.abs(x)
        scaled *= np.float32(math.ldexp(1.0, scale_log2))
    else:  # ranges beyond float32's exponent: float64 stays exact there
        scaled = np.abs(x.astype(np.float64)) * math.ldexp(1.0, scale_log2)
    # uint16 holds 0..2047 and makes bincount's index conversion cheapest.
    indices = scaled.astype(np.uint16).reshape(-1)
    return np.bincount(indices, minlength=HISTOGRAM_BINS)
