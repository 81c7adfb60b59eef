"""Infinite-N limits (Chong & Forsyth 2020): a planted 1/N law is recovered, each point is the score of its
subset, and the sizes are theirs."""

from __future__ import annotations

import numpy as np
import pytest

from probescope.core.errors import InputError
from probescope.core.scoring.distributions import ClassScores
from probescope.core.scoring.extrapolate import (
    extrapolate,
    fid_infinity,
    fit_inverse_n,
    is_infinity,
    subset_sizes,
)
from probescope.core.scoring.frechet import FrechetReference, frechet_distance, gaussian_stats
from probescope.core.scoring.report import score_report


def test_their_subset_sizes():
    assert subset_sizes(50_000).tolist() == np.linspace(5000, 50_000, 15).astype(np.int32).tolist()
    assert subset_sizes(1000).tolist()[:2] == [500, 535] and subset_sizes(1000)[-1] == 1000
    assert subset_sizes(20_000, points=4, smallest=2000).tolist() == [2000, 8000, 14000, 20000]
    with pytest.raises(InputError, match="at least 2 subset sizes"):
        subset_sizes(3, points=1)


def test_planted_inverse_n_law_is_recovered():
    sizes = subset_sizes(50_000)
    fit = fit_inverse_n("FID", sizes, 7.25 + 1234.5 / sizes)
    assert fit.intercept == pytest.approx(7.25, rel=1e-10) and fit.slope == pytest.approx(1234.5, rel=1e-10)
    assert fit.predict(np.inf) == pytest.approx(7.25) and fit.predict(1000) == pytest.approx(7.25 + 1.2345)
    noisy = 7.25 + 1234.5 / sizes + np.random.default_rng(0).normal(scale=1e-3, size=len(sizes))
    assert fit_inverse_n("FID", sizes, noisy).intercept == pytest.approx(7.25, abs=5e-3)
    with pytest.raises(InputError, match="two or more sample sizes"):
        fit_inverse_n("IS", np.array([10, 10]), np.array([1.0, 2.0]))


def test_planted_law_through_random_subsets():
    """A score that is exactly a + b/N of its subset's size: the fit returns a whatever the subsets."""
    fit = extrapolate("FID", lambda rows: 3.0 + 50.0 / len(rows), 4000, points=6, smallest=500, seed=1)
    assert fit.intercept == pytest.approx(3.0, rel=1e-12) and fit.sizes.tolist()[0] == 500


def test_fid_infinity_points_are_subset_fids():
    rng = np.random.default_rng(1)
    real, gen = rng.normal(size=(3000, 6)), rng.normal(size=(2000, 6)) * 1.3 + 0.2
    reference = FrechetReference(gaussian_stats(real))
    fit = fid_infinity(gen, reference, points=5, smallest=400, seed=7)
    rng_again = np.random.RandomState(7)
    for size, value in zip(fit.sizes, fit.values, strict=True):
        rows = np.sort(rng_again.permutation(len(gen))[:size])
        assert value == pytest.approx(frechet_distance(gaussian_stats(gen[rows]), reference.stats), rel=1e-10)
    # the population FID of these Gaussians is 6 (0.2^2 + 0.3^2): FID_inf is nearer to it than the full-N value
    population = 6 * (0.2**2 + 0.3**2)
    assert abs(fit.intercept - population) < abs(fit.values[-1] - population)


def test_is_infinity_points_are_subset_scores():
    logits = np.random.default_rng(2).normal(scale=3.0, size=(900, 12))
    fit = is_infinity(ClassScores(logits, "logits"), points=4, smallest=100, seed=3)
    rng = np.random.RandomState(3)
    for size, value in zip(fit.sizes, fit.values, strict=True):
        rows = rng.permutation(900)[:size]
        assert value == pytest.approx(score_report(ClassScores(logits[rows], "logits"), splits=1).is_all, rel=1e-10)
    assert fit.to_dict()["sizes"] == fit.sizes.tolist() and "Chong & Forsyth" in fit.protocol
