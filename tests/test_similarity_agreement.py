"""Triplet accuracy and per-trial agreement against a straightforward implementation and hand-worked cases."""

from __future__ import annotations

import numpy as np
import pytest

from probescope.core.similarity.agreement import pair_distances, triplet_agreement
from probescope.core.similarity.trials import PAD, Trials, triplets


def naive_accuracy(trials: Trials, features: np.ndarray, metric: str) -> tuple[float, list[int]]:
    """Loop over trials and their implied triplets one by one."""

    def dist(a: np.ndarray, b: np.ndarray) -> float:
        if metric == "l1":
            return float(np.abs(a - b).sum())
        if metric == "l2":
            return float(np.sqrt(((a - b) ** 2).sum()))
        na, nb = np.linalg.norm(a), np.linalg.norm(b)
        return 1.0 - (float(a @ b) / (na * nb) if na > 0 and nb > 0 else 0.0)

    right, total, per_trial = 0, 0, []
    for t in range(len(trials)):
        refs = [int(r) for r in trials.references[t] if r != PAD]
        picks = [refs[int(p)] for p in trials.choices[t] if p != PAD]
        remaining = list(refs)
        q = features[trials.query[t]]
        count = 0
        for a in picks:
            remaining.remove(a)
            for b in remaining:
                ok = dist(q, features[a]) < dist(q, features[b])
                count += ok
                total += 1
        right += count
        per_trial.append(count)
    return right / total, per_trial


@pytest.mark.parametrize("metric", ["cosine", "l1", "l2"])
def test_matches_naive_loop(metric: str) -> None:
    rng = np.random.default_rng(1)
    features = rng.normal(size=(30, 5))
    features[7] = features[3]  # a tie with stimulus 3
    features[8] = 0.0  # a zero vector (cosine distance 1)
    m = 40
    query = rng.integers(0, 30, m)
    refs = np.stack([rng.choice(np.setdiff1d(np.arange(30), [q]), 8, replace=False) for q in query])
    refs[:5, 6:] = PAD  # some 6-reference trials
    choices = np.stack([rng.choice(6, 2, replace=False) for _ in range(m)])
    choices[5:8, 1] = PAD  # some with one pick
    trials = Trials.make(query, refs, choices)
    got = triplet_agreement(trials, features, metric)
    want, per_trial = naive_accuracy(trials, features, metric)
    assert got.accuracy == pytest.approx(want, abs=1e-12)
    assert got.per_trial_correct.tolist() == per_trial
    assert got.n_triplets == len(triplets(trials)[0])


def test_hand_worked_case_and_ties_count_as_wrong() -> None:
    # 1-D features; query 0 at 0.0; references 1..4 at 1, 2, 2, 3; picks: 2 (at 2.0) then 1 (at 1.0)
    features = np.array([[0.0], [1.0], [2.0], [2.0], [3.0]])
    trials = Trials.make([0], [[1, 2, 3, 4]], [[1, 0]])
    # triplets: 2>1 wrong, 2>3 tie -> wrong, 2>4 right; 1>3 right, 1>4 right  => 3 of 5
    result = triplet_agreement(trials, features, "l2")
    assert result.accuracy == pytest.approx(3 / 5)
    assert result.per_trial_correct.tolist() == [3] and result.per_trial_total.tolist() == [5]
    assert triplet_agreement(trials, np.ones((5, 2)), "cosine").accuracy == 0.0  # all ties


def test_pair_distances() -> None:
    f = np.array([[3.0, 4.0], [0.0, 1.0], [0.0, 0.0]])
    i, j = np.array([0, 0, 2]), np.array([1, 0, 1])
    np.testing.assert_allclose(pair_distances(f, i, j, "l1"), [6.0, 0.0, 1.0])
    np.testing.assert_allclose(pair_distances(f, i, j, "l2"), [np.sqrt(18), 0.0, 1.0])
    np.testing.assert_allclose(pair_distances(f, i, j, "cosine"), [1 - 0.8, 0.0, 1.0])
    with pytest.raises(ValueError):
        pair_distances(f, i, j, "chebyshev")


def test_features_too_short() -> None:
    trials = Trials.make([0], [[1, 5]], [[0]])
    with pytest.raises(ValueError):
        triplet_agreement(trials, np.zeros((3, 2)), "l2")
