"""From a tensor's observed statistics to its INT8 amax and scale (symmetric: scale = amax/127).

Methods, all on the observer's 2048-bin histogram of |x| except ``max``:

- ``max``: the largest |x| seen.
- ``percentile``: the upper edge of the bin where the cumulative count of |x| reaches the
  percentile (default 99.99), never above the max.
- ``entropy``: TensorRT's KL-divergence search (see :func:`entropy_amax`).
- ``mse``: the clip value with the least expected quantization error on the histogram (see
  :func:`expected_mse`), searched over bin edges.
- ``auto``: per tensor, whichever of the above gives the least expected error; the result records
  the method picked. (``qdqkit quantize``'s ``auto`` starts from these picks and then judges by
  the network's output: ``quantization.by_output``.)

An all-zero tensor gets amax 0 and scale 1.0: any scale represents zeros exactly.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from qdqkit.core.errors import QdqkitError
from qdqkit.core.observers import TensorObserver

METHODS = ("max", "percentile", "entropy", "mse", "auto")
DEFAULT_PERCENTILE = 99.99
INT8_MAX = 127
_QUANTIZED_BINS = 128  # TensorRT's entropy calibrator: 128 levels for |x| (int8 magnitudes)


@dataclass(frozen=True)
class TensorCalibration:
    """The calibrated INT8 parameters of one tensor and the evidence behind them."""

    tensor: str
    amax: float
    scale: float
    method: str  # the method that produced amax (what ``auto`` picked, when it was asked)
    requested: str
    minimum: float
    maximum: float
    clipped_fraction: float  # share of observed values beyond amax (estimated from the histogram)
    count: int

    def as_dict(self) -> dict[str, object]:
        return {
            "tensor": self.tensor, "amax": self.amax, "scale": self.scale, "method": self.method,
            "requested": self.requested, "min": self.minimum, "max": self.maximum,
            "clipped_fraction": self.clipped_fraction, "count": self.count,
        }


def calibrate(
    observer: TensorObserver, method: str = "auto", *, percentile: float = DEFAULT_PERCENTILE
) -> TensorCalibration:
    """The INT8 amax and scale of ``observer``'s tensor by ``method`` (one of ``METHODS``)."""
    if method not in METHODS:
        raise QdqkitError(f"unknown calibration method {method!r}; use one of {', '.join(METHODS)}")
    if observer.count == 0:
        raise QdqkitError(f"tensor '{observer.name}' saw no data during calibration")
    if method != "max" and observer.histogram is None:
        raise QdqkitError(
            f"tensor '{observer.name}': method {method} needs a histogram; observe with histograms"
        )
    if not 0.0 < percentile <= 100.0:
        raise QdqkitError(f"the percentile must be in (0, 100], not {percentile}")
    chosen = method
    if observer.absmax == 0.0:
        amax = 0.0
    elif method == "auto":
        candidates = {
            "max": observer.absmax,
            "percentile": percentile_amax(observer, percentile),
            "entropy": entropy_amax(observer),
            "mse": mse_amax(observer),
        }
        errors = {name: expected_mse(observer, value) for name, value in candidates.items()}
        chosen = min(errors, key=lambda name: errors[name])  # ties keep the earlier, simpler one
        amax = candidates[chosen]
    elif method == "max":
        amax = observer.absmax
    elif method == "percentile":
        amax = percentile_amax(observer, percentile)
    elif method == "entropy":
        amax = entropy_amax(observer)
    else:
        amax = mse_amax(observer)
    return TensorCalibration(
        tensor=observer.name,
        amax=float(amax),
        scale=float(amax) / INT8_MAX if amax > 0 else 1.0,
        method=chosen,
        requested=method,
        minimum=observer.minimum,
        maximum=observer.maximum,
        clipped_fraction=clipped_fraction(observer, amax),
        count=observer.count,
    )


def _histogram(observer: TensorObserver) -> np.ndarray:
    assert observer.histogram is not None
    return observer.histogram.astype(np.float64)


def percentile_amax(observer: TensorObserver, percentile: float) -> float:
    """Upper edge of the bin where the cumulative |x| count reaches ``percentile``, capped at max."""
    counts = _histogram(observer)
    cumulative = np.cumsum(counts)
    # The value of rank floor(p * (n - 1)) in sorted order, as numpy's percentile indexes it.
    rank = math.floor(percentile / 100.0 * (cumulative[-1] - 1))
    index = int(np.searchsorted(cumulative, rank, side="right"))
    return min((index + 1) * observer.bin_width, observer.absmax)


def clipped_fraction(observer: TensorObserver, amax: float) -> float:
    """Share of values with |x| > amax; bins straddling amax count as uniformly filled."""
    if amax >= observer.absmax or observer.histogram is None or observer.count == 0:
        return 0.0
    counts = _histogram(observer)
    width = observer.bin_width
    index = int(amax // width)
    above = counts[index + 1 :].sum() + counts[index] * ((index + 1) * width - amax) / width
    return float(above / observer.count)


def _error_integral(t: np.ndarray, step: np.ndarray, clip: np.ndarray) -> np.ndarray:
    """∫_0^t (x - q(x))^2 dx for symmetric quantization with ``step`` clipped at ``clip``.

    Below the clip the rounding error is a sawtooth of period ``step`` (each full period adds
    step^3/12); above it the error is (x - clip), whose square integrates to a cubic. (In place
    on two candidate-by-point arrays: this is the hot loop of ``mse`` and ``auto``.)
    """
    half = step / 2.0
    shifted = np.minimum(t, clip)
    shifted += half
    periods = shifted / step
    np.floor(periods, out=periods)
    rest = periods * step
    np.subtract(shifted, rest, out=rest)
    sawtooth = np.multiply(periods, step**3, out=periods)
    sawtooth /= 12.0
    rest -= half
    np.power(rest, 3, out=rest)
    rest += half**3
    rest /= 3.0
    sawtooth += rest
    sawtooth -= half**3 / 3.0
    beyond = np.subtract(t, clip, out=shifted)
    np.maximum(beyond, 0.0, out=beyond)
    np.power(beyond, 3, out=beyond)
    beyond /= 3.0
    sawtooth += beyond
    return sawtooth


def _mse_for(counts: np.ndarray, bins: np.ndarray, width: float, amaxes: np.ndarray) -> np.ndarray:
    """Expected squared error per candidate amax (rows) over the given non-empty ``bins``.

    The error integral is evaluated once per bin edge (a bin's upper edge is the next one's
    lower edge), not twice per bin.
    """
    clip = amaxes[:, None]
    step = clip / INT8_MAX
    edges = np.union1d(bins, bins + 1)
    integral = _error_integral((edges * width)[None, :], step, clip)
    lower = np.searchsorted(edges, bins)
    per_bin = integral[:, lower + 1] - integral[:, lower]
    per_bin /= width
    per_bin *= counts[None, :]
    return per_bin.sum(axis=1)


def expected_mse(observer: TensorObserver, amax: float) -> float:
    """Mean squared int8 quantization error at ``amax``, values spread uniformly within bins.

    The error of a bin is the exact integral of (x - q(x))^2 over it: rounding error inside
    the clip plus clipping error beyond it.
    """
    if amax <= 0.0:
        return float("inf")
    counts = _histogram(observer)
    nonzero = np.flatnonzero(counts)
    total = _mse_for(counts[nonzero], nonzero, observer.bin_width, np.array([amax]))
    return float(total[0] / observer.count)


def mse_amax(observer: TensorObserver) -> float:
    """The bin edge (or the max) with the least :func:`expected_mse`, searched coarse to fine."""
    counts = _histogram(observer)
    width = observer.bin_width
    nonzero = np.flatnonzero(counts)
    weights = counts[nonzero]
    last_edge = int(nonzero[-1]) + 1
    absmax = observer.absmax

    def best(edges: np.ndarray) -> float:
        amaxes = np.minimum(edges * width, absmax)
        errors = _mse_for(weights, nonzero, width, amaxes)
        return float(amaxes[int(np.argmin(errors))])

    # Coarse to fine (every 64th edge, then 8th, then each) keeps this to ~80 candidates.
    stride = 64
    candidates = np.unique(np.append(np.arange(stride, last_edge + 1, stride), last_edge))
    amax = best(candidates)
    for finer in (8, 1):
        centre = round(amax / width)
        candidates = np.arange(max(1, centre - stride), min(last_edge, centre + stride) + 1, finer)
        amax = best(candidates)
        stride = finer
    return amax


def entropy_amax(observer: TensorObserver) -> float:
    """TensorRT's entropy calibration: the clip whose 128-level quantization loses least information.

    For every candidate count i of leading bins (128 up to the last non-empty bin), the reference
    distribution P is those i bins with all counts beyond them added to the last one (clipping
    moves them to the edge). The candidate Q merges the same i bins (without the outliers) into
    128 groups of nearly equal width (group g spans bins floor(g*i/128) to floor((g+1)*i/128))
    and spreads each group's count evenly over its non-empty bins, as an int8 grid over [0, i bins]
    would represent them. The clip is the edge of the i with the least KL(P || Q). A candidate
    whose last bin is empty while outliers exist puts mass where Q has none (infinite KL) and is
    never chosen. Every candidate is evaluated at once from prefix sums, so the search is linear
    in bins times candidates with no Python loop.
    """
    counts = _histogram(observer)
    width = observer.bin_width
    last_edge = int(np.flatnonzero(counts)[-1]) + 1
    if last_edge <= _QUANTIZED_BINS:
        return observer.absmax
    total = counts.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        xlogx = np.where(counts > 0, counts * np.log(np.where(counts > 0, counts, 1.0)), 0.0)
    kept = np.concatenate(([0.0], np.cumsum(counts)))
    filled = np.concatenate(([0], np.cumsum(counts > 0)))
    kept_xlogx = np.concatenate(([0.0], np.cumsum(xlogx)))

    sizes = np.arange(_QUANTIZED_BINS, last_edge + 1)
    outliers = total - kept[sizes]
    last_bin = counts[sizes - 1]
    groups = np.arange(_QUANTIZED_BINS + 1)
    bounds = (groups[None, :] * sizes[:, None]) // _QUANTIZED_BINS
    group_count = kept[bounds[:, 1:]] - kept[bounds[:, :-1]]
    group_filled = filled[bounds[:, 1:]] - filled[bounds[:, :-1]]
    with np.errstate(divide="ignore", invalid="ignore"):
        level = np.log(group_count / np.maximum(group_filled, 1))
        cross = np.where(group_count > 0, group_count * level, 0.0).sum(axis=1)
        cross += np.where(last_bin > 0, outliers * level[:, -1], 0.0)
        p_log_p = (kept_xlogx[sizes - 1] + _xlogx(last_bin + outliers)) / total - np.log(total)
        p_log_q = cross / total - np.log(kept[sizes])
        divergence = p_log_p - p_log_q
    divergence[(last_bin == 0) & (outliers > 0)] = np.inf
    divergence[~np.isfinite(divergence)] = np.inf
    if not np.isfinite(divergence).any():
        return observer.absmax
    best = int(sizes[int(np.argmin(divergence))])
    return min(best * width, observer.absmax)


def _xlogx(values: np.ndarray) -> np.ndarray:
    safe = np.where(values > 0, values, 1.0)
    return np.where(values > 0, values * np.log(safe), 0.0)
