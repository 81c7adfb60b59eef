"""Outcome enumeration, the Luce likelihood and the triplet expansion against brute force."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from probescope.core.similarity.luce import OutcomeModel, log_similarity, observed_log_likelihood
from probescope.core.similarity.trials import (
    PAD,
    Trials,
    n_outcomes,
    n_triplets,
    outcome_index,
    outcome_table,
    triplets,
)


def brute_luce(s: np.ndarray, picks: tuple[int, ...]) -> float:
    """P(picks in order) by Luce's ratio of strengths, written out term by term."""
    remaining = list(range(len(s)))
    p = 1.0
    for a in picks:
        p *= s[a] / sum(s[j] for j in remaining)
        remaining.remove(a)
    return p


@pytest.mark.parametrize("r,c", [(8, 2), (5, 3), (4, 1), (2, 1), (6, 2)])
def test_outcome_table_is_lexicographic_permutations(r: int, c: int) -> None:
    table = outcome_table(r, c)
    assert len(table) == n_outcomes(r, c) == math.factorial(r) // math.factorial(r - c)
    assert [tuple(row) for row in table] == list(itertools.permutations(range(r), c))
    np.testing.assert_array_equal(outcome_index(table, r), np.arange(len(table)))


def test_outcome_index_rule_8_rank_2_and_mixed_sizes() -> None:
    assert n_outcomes(8, 2) == 56
    picks = np.array([[0, 1], [1, 0], [7, 6], [3, 5], [1, 0]])
    r = np.array([8, 8, 8, 8, 3])
    expected = [7 * a + b - (b > a) for a, b in picks[:4]] + [2]  # 3-rank-2: (1,0) is the 3rd of 6
    np.testing.assert_array_equal(outcome_index(picks, r), expected)


@pytest.mark.parametrize("r,c", [(8, 2), (5, 3), (4, 1)])
def test_all_outcome_log_probs_match_brute_force(r: int, c: int) -> None:
    rng = np.random.default_rng(r * 10 + c)
    log_s = rng.normal(0, 2, (3, r))
    model = OutcomeModel(r, c)
    got = model.log_probs(torch.as_tensor(log_s, dtype=torch.float64)).numpy()
    for t in range(3):
        s = np.exp(log_s[t])
        want = [brute_luce(s, tuple(o)) for o in outcome_table(r, c)]
        np.testing.assert_allclose(np.exp(got[t]), want, rtol=1e-9)
        assert np.exp(got[t]).sum() == pytest.approx(1.0)


def test_observed_likelihood_with_padding_matches_brute_force() -> None:
    rng = np.random.default_rng(0)
    z = rng.normal(0, 0.3, (12, 3))
    # trial 0: 8-rank-2; trial 1: 4 references, 1 pick (padded); trial 2: 3-rank-2, picks out of order
    refs = np.array([[1, 2, 3, 4, 5, 6, 7, 8], [2, 9, 10, 11, PAD, PAD, PAD, PAD], [4, 5, 6, PAD, PAD, PAD, PAD, PAD]])
    choices = np.array([[3, 0], [2, PAD], [2, 1]])
    trials = Trials.make([0, 1, 11], refs, choices)
    ordered = trials.chosen_first()
    valid = ordered != PAD
    zt = torch.as_tensor(z)
    log_s = log_similarity(zt[trials.query][None], zt[np.where(valid, ordered, 0)][None])
    got = observed_log_likelihood(log_s, torch.as_tensor(valid), torch.as_tensor(trials.n_select))[0].numpy()
    for t in range(3):
        ids = refs[t][refs[t] != PAD]
        s = np.exp(-10 * np.linalg.norm(z[ids] - z[trials.query[t]], axis=1))
        picks = tuple(int(p) for p in choices[t] if p != PAD)
        assert got[t] == pytest.approx(np.log(brute_luce(s, picks)), rel=1e-9)


def test_chosen_first_layout() -> None:
    trials = Trials.make([0], [[10, 11, 12, 13, PAD]], [[2, 0]])
    np.testing.assert_array_equal(trials.chosen_first(), [[12, 10, 11, 13, PAD]])


def test_thirteen_triplets_of_an_8_rank_2_trial() -> None:
    # q:a>b>[c..h] with a = 30 (position 3) and b = 10 (position 0)
    trials = Trials.make([99], [[10, 20, 25, 30, 40, 50, 60, 70]], [[3, 0]])
    q, closer, farther, rows = triplets(trials)
    assert n_triplets(8, 2) == 13 == len(q)
    got = set(zip(closer.tolist(), farther.tolist()))
    others = [20, 25, 40, 50, 60, 70]
    want = {(30, 10)} | {(30, o) for o in others} | {(10, o) for o in others}
    assert got == want and set(q.tolist()) == {99} and set(rows.tolist()) == {0}


def test_triplets_of_padded_and_unanswered_trials() -> None:
    trials = Trials.make([0, 1, 2], [[5, 6, 7, PAD], [5, 6, 7, 8], [5, 6, 7, 8]], [[1, PAD], [PAD, PAD], [0, 3]])
    _, _, _, rows = triplets(trials)
    assert np.bincount(rows, minlength=3).tolist() == [2, 0, 3 + 2]


def test_trials_reject_a_choice_past_the_references() -> None:
    with pytest.raises(ValueError):
        Trials.make([0], [[1, 2, PAD]], [[2]])
