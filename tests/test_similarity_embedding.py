"""Psychological embeddings: recovery of a planted structure, information gain against brute force, correlations,
proposals, saving, warm starts and cancellation."""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy.stats import spearmanr

from oracles.simulated_trials import clustered_points, simulate_trials
from probescope.core.similarity.active import information_gain, nearest_neighbours, propose_trials, query_probability
from probescope.core.similarity.correlation import (
    embedding_correlation,
    expected_similarity,
    spearman,
    upper_pairs,
    within_ensemble_correlation,
)
from probescope.core.similarity.embedding import Ensemble, FitOptions, ensemble_cross_entropy, fit_ensemble
from probescope.core.tasks import Cancelled

FAST = FitOptions(max_epochs=150, patience=20)


@pytest.fixture(scope="module")
def planted() -> tuple[np.ndarray, object]:
    rng = np.random.default_rng(0)
    z = clustered_points(60, 2, 5, rng)
    return z, simulate_trials(z, 1500, rng)


@pytest.fixture(scope="module")
def fitted(planted) -> object:
    z, trials = planted
    return fit_ensemble(trials, len(z), dims=[1, 2], n_members=2, options=FAST, seed=1)


def test_fit_recovers_planted_structure(planted, fitted) -> None:
    z, trials = planted
    ens = fitted.ensemble
    assert ens.dims == 2 and fitted.dims_loss[2] < fitted.dims_loss[1]  # held-out cross-entropy picks the truth
    i, j, sampled = upper_pairs(len(z))
    assert not sampled
    fitted_sim = expected_similarity(ens, i, j).mean(0)
    true_sim = np.exp(-10 * np.linalg.norm(z[i] - z[j], axis=1))
    assert spearman(fitted_sim, true_sim) > 0.9
    assert within_ensemble_correlation(ens).value > 0.8
    # coarse-grained loss on fresh random trials: well below chance (ln 56)
    fresh = simulate_trials(z, 300, np.random.default_rng(5))
    assert ensemble_cross_entropy(ens, fresh) < np.log(56) - 0.5


def test_save_load_and_warm_start(tmp_path: Path, planted, fitted) -> None:
    z, trials = planted
    path = tmp_path / "emb.npz"
    fitted.ensemble.save(path)
    back = Ensemble.load(path)
    np.testing.assert_allclose(back.loc, fitted.ensemble.loc, rtol=1e-6)
    assert back.meta["dims_loss"].keys() == {"1", "2"}
    again = fit_ensemble(trials, len(z) + 3, n_members=2, previous=back,
                         options=FitOptions(max_epochs=10, patience=10))
    assert again.warm_started == (True, False) and again.ensemble.dims == 2 and again.ensemble.n_stimuli == 63


def test_progress_and_cancel(planted) -> None:
    z, trials = planted
    seen: list[float] = []
    with pytest.raises(Cancelled):
        fit_ensemble(trials, len(z), dims=[2], n_members=1, options=FAST,
                     progress=lambda f, m: seen.append(f), cancel=lambda: len(seen) >= 3)
    assert len(seen) == 3 and all(0 <= f <= 1 for f in seen)
    with pytest.raises(Exception, match="dimensionalities"):
        fit_ensemble(trials, len(z), dims=[0])


def brute_information_gain(samples: np.ndarray, q: int, refs: list[int], beta: float = 10.0) -> float:
    """H(mean_s p_s) - mean_s H(p_s) over the 56 outcomes, one sample and one outcome at a time."""
    probs = []
    for z in samples:
        s = [np.exp(-beta * np.linalg.norm(z[q] - z[r])) for r in refs]
        row = []
        for a, b in itertools.permutations(range(len(refs)), 2):
            row.append(s[a] / sum(s) * s[b] / (sum(s) - s[a]))
        probs.append(row)
    probs = np.array(probs)

    def entropy(p: np.ndarray) -> float:
        return float(-(p * np.log(p)).sum())

    return entropy(probs.mean(0)) - np.mean([entropy(p) for p in probs])


def test_information_gain_matches_brute_force() -> None:
    rng = np.random.default_rng(3)
    loc = rng.normal(0, 0.3, (2, 12, 3))
    ens = Ensemble(loc, np.full_like(loc, 0.1), np.ones(2), np.zeros(2))
    query = np.array([0, 5])
    refs = np.array([[1, 2, 3, 4, 5, 6, 7, 8], [0, 1, 2, 3, 4, 6, 9, 11]])
    got = information_gain(ens, query, refs, n_samples=4, seed=7)
    samples = ens.sample(4, torch.Generator().manual_seed(7)).numpy()  # the same pooled draws
    want = [brute_information_gain(samples, int(q), list(r)) for q, r in zip(query, refs)]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    certain = Ensemble(loc[:1], np.zeros_like(loc[:1]), np.ones(1), np.zeros(1))
    np.testing.assert_allclose(information_gain(certain, query, refs, n_samples=3), 0.0, atol=1e-6)


def test_embedding_correlation_and_pair_sampling() -> None:
    rng = np.random.default_rng(4)
    loc = rng.normal(0, 0.3, (1, 40, 3))
    ens = Ensemble(loc, np.full_like(loc, 1e-4), np.ones(1), np.zeros(1))
    features = np.concatenate([loc[0], np.ones((40, 1))], axis=1)
    full = embedding_correlation(ens, features, "cosine")
    assert not full.sampled and full.n_pairs == 780 and 0.3 < full.value <= 1.0
    i, j, _ = upper_pairs(40)
    psych = expected_similarity(ens, i, j).mean(0)
    norms = np.linalg.norm(features, axis=1)
    model = (features[i] * features[j]).sum(1) / norms[i] / norms[j]
    assert full.value == pytest.approx(spearmanr(psych, model).statistic, abs=1e-9)
    part = embedding_correlation(ens, features, "cosine", max_pairs=300, seed=2)
    assert part.sampled and part.n_pairs == 300 and abs(part.value - full.value) < 0.15
    i, j, sampled = upper_pairs(50_000, 1000, seed=0)
    assert sampled and (i < j).all() and j.max() < 50_000


def test_query_probability_frequency_adjustment() -> None:
    p = query_probability(np.zeros(4), np.array([0, 1, 3, 0]), np.array([True, True, True, False]))
    np.testing.assert_allclose(p, np.array([1, 1 / 2, 1 / 4, 0]) / 1.75)


def test_propose(fitted) -> None:
    ens = fitted.ensemble
    eligible = np.ones(ens.n_stimuli, dtype=bool)
    eligible[:5] = False
    prop = propose_trials(ens, n_queries=6, n_candidates=50, n_confirmation=4, eligible=eligible, seed=3)
    t = prop.trials
    assert len(t) == 6 * 3 + 4 and (prop.kind == "active").sum() == 18
    assert (t.references >= 5).all() and (t.query >= 5).all()
    assert all(len(set(row)) == 8 and q not in row for q, row in zip(t.query, t.references.tolist()))
    assert (t.n_select == 0).all() and (prop.info_gain >= 0).all()
    # the kept trials are the best of their candidates: above the average random trial
    rng = np.random.default_rng(0)
    rq = rng.integers(5, ens.n_stimuli, 200)
    from probescope.core.similarity.simulate import random_references

    rr = random_references(rng, rq, np.arange(5, ens.n_stimuli), 8)
    assert prop.info_gain[prop.kind == "active"].mean() > information_gain(ens, rq, rr).mean()


def test_confirmation_trials_mix_neighbours_and_far_stimuli(fitted) -> None:
    sharp = Ensemble(fitted.ensemble.loc, np.full_like(fitted.ensemble.loc, 1e-5), np.ones(2), np.zeros(2))
    prop = propose_trials(sharp, n_queries=2, n_candidates=5, n_confirmation=10, n_neighbors=12, seed=1)
    conf = prop.trials.subset(prop.kind == "confirmation")
    pool = np.arange(sharp.n_stimuli)
    near, _ = nearest_neighbours(sharp, conf.query, pool, 12)
    assert [int(np.isin(row, near[k]).sum()) for k, row in enumerate(conf.references)] == [2] * 10
