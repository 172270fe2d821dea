from __future__ import annotations

import math

import numpy as np
import pytest

from qdqkit.core.calibration import METHODS, calibrate, expected_mse
from qdqkit.core.errors import QdqkitError
from qdqkit.core.observers import HISTOGRAM_BINS, TensorObserver, merged


def _data(seed: int = 0, size: int = 64 * 500) -> np.ndarray:
    """Gaussian activations with a few far outliers, as calibration data often looks."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=size).astype(np.float32)
    x[rng.choice(size, 12, replace=False)] = rng.uniform(9.0, 13.0, size=12).astype(np.float32)
    return x


def _observe(parts: list[np.ndarray], histogram: bool = True) -> TensorObserver:
    observer = TensorObserver("t", histogram=histogram)
    for part in parts:
        observer.update(part)
    return observer


def _brute_force_mse(x: np.ndarray, amax: float) -> float:
    step = amax / 127.0
    q = np.clip(np.rint(x.astype(np.float64) / step), -127, 127) * step
    return float(np.mean((x - q) ** 2))


def test_running_stats_equal_numpy_on_the_concatenation() -> None:
    x = _data()
    observer = _observe(np.array_split(x, 9), histogram=False)
    assert observer.count == x.size
    assert observer.minimum == float(x.min())
    assert observer.maximum == float(x.max())
    assert observer.absmax == float(np.abs(x).max())
    result = calibrate(observer, "max")
    assert result.amax == float(np.abs(x).max())
    assert result.scale == pytest.approx(result.amax / 127.0)
    assert result.clipped_fraction == 0.0


def test_histogram_equals_a_one_pass_histogram_over_the_final_power_of_two() -> None:
    x = _data(1)
    observer = _observe([x[:100] * 0.01, x[100:5000], x[5000:]])
    exponent = math.frexp(float(np.abs(np.concatenate([x[:100] * 0.01, x[100:]])).max()))[1]
    values = np.abs(np.concatenate([x[:100] * np.float32(0.01), x[100:]]).astype(np.float64))
    truth = np.bincount(np.floor(values / 2.0**exponent * HISTOGRAM_BINS).astype(np.int64),
                        minlength=HISTOGRAM_BINS)
    assert observer.range_exponent == exponent
    assert observer.histogram is not None
    np.testing.assert_array_equal(observer.histogram, truth)


def test_a_batch_whose_range_widens_between_chunks_bins_as_one_pass_does() -> None:
    # Three chunks' worth of one batch: ReLU-like runs of zeros, small values, then an outlier
    # in the last chunk that widens the range after two chunks were already counted.
    rng = np.random.default_rng(7)
    x = np.maximum(rng.normal(size=3 * 65536 + 123), 0.0).astype(np.float32) * np.float32(0.01)
    x[-5] = np.float32(37.5)
    x[70000:90000] = 0.0
    observer = _observe([x.reshape(1, -1)])
    exponent = math.frexp(float(np.abs(x).max()))[1]
    truth = np.bincount(np.floor(np.abs(x.astype(np.float64)) / 2.0**exponent * HISTOGRAM_BINS)
                        .astype(np.int64), minlength=HISTOGRAM_BINS)
    assert observer.range_exponent == exponent
    assert observer.histogram is not None
    np.testing.assert_array_equal(observer.histogram, truth)
    assert observer.count == x.size
    assert (observer.minimum, observer.maximum) == (0.0, 37.5)


def test_percentile_is_within_one_bin_of_numpy() -> None:
    x = _data(2)
    observer = _observe(np.array_split(x, 5))
    for percentile in (99.0, 99.9, 99.99):
        result = calibrate(observer, "percentile", percentile=percentile)
        # "lower": the sample at numpy's rank, not an interpolation across a gap between outliers.
        truth = float(np.percentile(np.abs(x), percentile, method="lower"))
        assert truth <= result.amax <= truth + observer.bin_width
        assert result.amax <= observer.absmax


def test_mse_amax_minimizes_the_brute_force_error_on_raw_data() -> None:
    x = _data(3)
    observer = _observe(np.array_split(x, 4))
    result = calibrate(observer, "mse")
    width = observer.bin_width
    candidates = np.arange(1, int(observer.absmax / width) + 2) * width
    errors = np.array([_brute_force_mse(x, c) for c in candidates])
    best = float(candidates[int(np.argmin(errors))])
    assert abs(result.amax - best) <= 4 * width
    assert _brute_force_mse(x, result.amax) <= errors.min() * 1.01
    # The histogram's expected error is the raw data's error, to a fraction of a percent.
    assert expected_mse(observer, result.amax) == pytest.approx(
        _brute_force_mse(x, result.amax), rel=0.01
    )


def test_entropy_clips_a_gaussian_with_outliers_well_below_its_max() -> None:
    x = _data(4)
    observer = _observe([x])
    result = calibrate(observer, "entropy")
    assert 2.5 < result.amax < 0.6 * observer.absmax
    assert 0.0 < result.clipped_fraction < 0.01


def test_auto_picks_the_least_expected_error_and_records_it() -> None:
    observer = _observe([_data(5)])
    auto = calibrate(observer, "auto")
    assert auto.requested == "auto"
    assert auto.method in ("max", "percentile", "entropy", "mse")
    others = [calibrate(observer, m) for m in ("max", "percentile", "entropy", "mse")]
    assert expected_mse(observer, auto.amax) == min(expected_mse(observer, r.amax) for r in others)


@pytest.mark.parametrize("method", METHODS)
def test_scales_do_not_depend_on_batch_size_or_order(method: str) -> None:
    x = _data(6, size=64 * 100)
    reference = calibrate(_observe([x]), method)
    for batch in (1, 7, 64):
        parts = [x[i : i + batch] for i in range(0, x.size, batch)]
        assert calibrate(_observe(parts), method) == reference
    shuffled = np.random.default_rng(7).permutation(x)
    assert calibrate(_observe(np.array_split(shuffled, 13)), method) == reference


def test_merge_equals_observing_the_union() -> None:
    a, b = _data(8)[:1000] * 0.1, _data(9)[:3000]
    union = merged("u", [_observe([a]), _observe([b])])
    direct = _observe([a, b])
    assert union.histogram is not None and direct.histogram is not None
    np.testing.assert_array_equal(union.histogram, direct.histogram)
    assert (union.count, union.minimum, union.maximum) == (
        direct.count, direct.minimum, direct.maximum
    )


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_non_finite_values_name_the_tensor(bad: float) -> None:
    observer = TensorObserver("conv3_out")
    with pytest.raises(QdqkitError, match="tensor 'conv3_out' has NaN or infinite"):
        observer.update(np.array([1.0, bad, 2.0], np.float32))


def test_all_zero_tensor_gets_amax_zero_and_a_finite_scale() -> None:
    observer = _observe([np.zeros(100, np.float32)])
    for method in METHODS:
        result = calibrate(observer, method)
        assert (result.amax, result.scale) == (0.0, 1.0)


def test_method_errors_are_one_line() -> None:
    observer = _observe([_data(10)], histogram=False)
    with pytest.raises(QdqkitError, match="needs a histogram"):
        calibrate(observer, "entropy")
    with pytest.raises(QdqkitError, match="unknown calibration method 'kl'"):
        calibrate(observer, "kl")
    with pytest.raises(QdqkitError, match="saw no data"):
        calibrate(TensorObserver("empty"), "max")
