"""Streaming error statistics against numpy computed here, including sequences that end early."""

from __future__ import annotations

import math

import numpy as np
import pytest

from qdqkit.comparison.stats import Error
from qdqkit.core.errors import QdqkitError


def test_the_error_sums_match_numpy() -> None:
    rng = np.random.default_rng(0)
    reference, test = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 4))
    error = Error()
    error.add(reference, test)
    expected = 10 * math.log10(np.sum(reference ** 2) / np.sum((reference - test) ** 2))
    assert error.metrics().snr_db == pytest.approx(expected, rel=1e-5)


def test_a_sequence_one_model_ends_early_counts_its_missing_steps_as_error() -> None:
    """A decoder's Loop stopping at an end token: 5 steps of 2 values in float, 3 quantized."""
    error = Error()
    error.add(np.ones((1, 5, 2)), np.ones((1, 3, 2)), "tokens")
    assert error.noise == 4.0 and error.ref_sq == 10.0
    assert error.metrics().snr_db == pytest.approx(10 * math.log10(10 / 4))


def test_shapes_that_differ_on_more_than_one_axis_are_a_pairing_error() -> None:
    with pytest.raises(QdqkitError, match="tensor t has shape \\[2, 3\\] in one model and \\[3, 2\\]"):
        Error().add(np.ones((2, 3)), np.ones((3, 2)), "t")
    with pytest.raises(QdqkitError, match="must have the same shape"):
        Error().add(np.ones((2, 3)), np.ones(6), "t")


def test_infinities_both_models_hold_agree_and_others_are_an_infinite_error() -> None:
    """An attention mask of -inf is in both models' scores: it agrees there (no NaN from
    -inf - -inf, no numpy warning), and the finite values are compared as usual; an infinity
    only one model has is an infinite error."""
    import warnings

    reference = np.array([1.0, -np.inf, 2.0, -np.inf], np.float32)
    test = np.array([1.0, -np.inf, 2.5, -np.inf], np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        both = Error()
        both.add(reference, test)
        finite = Error()
        finite.add(reference[[0, 2]], test[[0, 2]])
        assert both.metrics() == finite.metrics()
        assert math.isfinite(both.metrics().snr_db)
        one = Error()
        one.add(reference, np.array([1.0, 0.0, 2.0, -np.inf], np.float32))
        assert one.metrics().snr_db == -math.inf and one.metrics().max_abs == math.inf
