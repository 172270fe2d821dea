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
