"""Inception Score arithmetic: the seed's worked example, zeros, validation, and the split protocol against
torch-fidelity and against a straightforward reference written here."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from probescope.core.errors import InputError
from probescope.core.scoring.distributions import ClassScores, rows_from_logits
from probescope.core.scoring.examples import EXPECTED, WORKED_EXAMPLE
from probescope.core.scoring.report import score_report
from probescope.core.scoring.splits import split_inception_score


def reference_is(p: np.ndarray) -> float:
    """The seed's textbook formula, term by term, with 0 log 0 = 0 via explicit skipping."""
    q = p.mean(axis=0)
    kls = []
    for row in p:
        kls.append(sum(a * math.log(a / b) for a, b in zip(row, q, strict=True) if a > 0))
    return math.exp(sum(kls) / len(kls))


def reference_splits(p: np.ndarray, splits: int, shuffle: bool, seed: int) -> tuple[float, float]:
    """The protocol as described in the reference notes, one split at a time."""
    n = len(p)
    if shuffle:
        p = p[np.random.RandomState(seed).permutation(n)]
    scores = [reference_is(p[k * n // splits : (k + 1) * n // splits]) for k in range(splits)]
    return float(np.mean(scores)), float(np.std(scores))


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@pytest.mark.parametrize("generator", ["A", "B", "C", "D"])
def test_worked_example(generator):
    report = score_report(ClassScores(WORKED_EXAMPLE[generator], "probs"), splits=1)
    is_, h_marg, h_cond, kl = EXPECTED[generator]
    assert round(report.is_all, 2) == is_
    assert round(report.split.mean, 2) == is_
    assert report.marginal_entropy == pytest.approx(h_marg, abs=5e-4)
    assert report.conditional_entropy == pytest.approx(h_cond, abs=5e-4)
    assert report.mutual_information == pytest.approx(kl, abs=5e-4)
    assert report.contributions.mean() == pytest.approx(report.mutual_information, abs=1e-12)


def test_worked_example_d_per_image_divergences():
    report = score_report(ClassScores(WORKED_EXAMPLE["D"], "probs"), splits=1)
    np.testing.assert_allclose(report.contributions, [0.245, 0.245, 0.768], atol=5e-4)
    assert report.classes_never_predicted.tolist() == [2]  # the husky mode is dropped


def test_exact_zeros_give_finite_scores():
    p = np.array([[1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]])
    report = score_report(ClassScores(p, "probs"), splits=1)
    assert report.is_all == pytest.approx(reference_is(p), rel=1e-14)
    assert np.isfinite(report.contributions).all()
    assert report.classes_never_predicted.tolist() == [2, 3]
    one_hot_uniform = np.eye(5)  # the maximum: IS = n exactly
    assert score_report(ClassScores(one_hot_uniform, "probs"), splits=1).is_all == pytest.approx(5.0, rel=1e-14)


def test_xlogx_is_scipys_xlogy():
    from scipy.special import xlogy

    from probescope.core.scoring.distributions import xlogx

    q = np.concatenate([np.random.default_rng(3).dirichlet(np.full(50, 0.1), 40).ravel(),
                        [0.0, 1.0, 1e-300, 5e-324, np.inf, -0.5, np.nan]])
    np.testing.assert_allclose(xlogx(q), xlogy(q, q), rtol=2e-16, atol=0)
    assert np.array_equal(np.isnan(xlogx(q)), np.isnan(xlogy(q, q))) and xlogx(np.float32(0.0)) == 0.0


def test_logits_with_minus_infinity_are_exact_zeros():
    logits = np.array([[0.0, -np.inf, 2.0], [1.0, 0.5, -np.inf], [-np.inf, -np.inf, 0.0]])
    rows = rows_from_logits(logits)
    assert (rows.p[np.isinf(logits)] == 0).all()
    report = score_report(ClassScores(logits, "logits"), splits=1)
    assert report.is_all == pytest.approx(reference_is(softmax(logits)), rel=1e-12)


def test_logits_and_probability_paths_agree():
    rng = np.random.default_rng(1)
    logits = rng.normal(scale=4.0, size=(200, 30))
    a = score_report(ClassScores(logits, "logits"), splits=4)
    b = score_report(ClassScores(softmax(logits), "probs"), splits=4)
    assert a.split.scores == pytest.approx(b.split.scores, rel=1e-12)
    assert a.is_all == pytest.approx(b.is_all, rel=1e-12)
    np.testing.assert_allclose(a.contributions, b.contributions, rtol=1e-9, atol=1e-12)


def test_bits_give_the_same_score():
    p = WORKED_EXAMPLE["D"]
    nats = score_report(ClassScores(p, "probs"), splits=1)
    bits = score_report(ClassScores(p, "probs"), splits=1, unit="bits")
    assert bits.is_all == nats.is_all
    assert bits.in_unit(bits.mutual_information) == pytest.approx(nats.mutual_information / math.log(2))
    assert 2 ** bits.in_unit(bits.mutual_information) == pytest.approx(nats.is_all, rel=1e-12)
    assert bits.to_dict()["mutual_information_bits"] == pytest.approx(nats.mutual_information / math.log(2))


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("n,splits", [(103, 10), (57, 3), (40, 1), (12, 12)])
def test_split_protocol_against_reference(n, splits, shuffle):
    rng = np.random.default_rng(n)
    logits = rng.normal(scale=3.0, size=(n, 17))
    got = split_inception_score(ClassScores(logits, "logits"), splits, shuffle, seed=7)
    mean, std = reference_splits(softmax(logits), splits, shuffle, seed=7)
    assert got.mean == pytest.approx(mean, rel=1e-12)
    assert got.std == pytest.approx(std, rel=1e-9, abs=1e-14)


def test_split_protocol_matches_torch_fidelity():
    from torch_fidelity.metric_isc import isc_features_to_metric

    rng = np.random.default_rng(0)
    for n, classes, splits in [(1000, 1008, 10), (777, 50, 7)]:
        logits = (rng.normal(size=(n, classes)) * rng.uniform(0.5, 8.0, size=(n, 1))).astype(np.float32)
        logits[:, : classes // 3] -= 200.0  # classes whose probability underflows to 0 in many rows
        ref = isc_features_to_metric(torch.from_numpy(logits), splits=splits, shuffle=True, rng_seed=2020)
        got = split_inception_score(ClassScores(logits, "logits"), splits)
        assert abs(got.mean - ref["inception_score_mean"]) < 1e-9
        assert abs(got.std - ref["inception_score_std"]) < 1e-9
        ref = isc_features_to_metric(torch.from_numpy(logits), splits=splits, shuffle=False)
        got = split_inception_score(ClassScores(logits, "logits"), splits, shuffle=False)
        assert abs(got.mean - ref["inception_score_mean"]) < 1e-9


def test_fewer_images_than_splits():
    with pytest.raises(InputError, match="N=3 images into 10 splits"):
        split_inception_score(ClassScores(WORKED_EXAMPLE["A"], "probs"), 10)


@pytest.mark.parametrize(
    "probs,message",
    [
        ([[0.5, np.nan], [0.5, 0.5]], "row 0 contains NaN"),
        ([[0.5, 0.5], [1.2, -0.2]], "row 1 has a negative entry"),
        ([[0.5, 0.5], [0.5, 0.4]], "row 1 sums to 0.9"),
        ([[0.2, 0.3, 0.5]] * 3 + [[0.9, 0.9, 0.9]], "row 3 sums to 2.7"),
    ],
)
def test_malformed_probabilities_are_rejected(probs, message):
    with pytest.raises(InputError, match=message):
        score_report(ClassScores(np.array(probs), "probs", "p.npy"), splits=1)


@pytest.mark.parametrize("array", [np.zeros(5), np.zeros((0, 4)), np.zeros((4, 1)), np.array([["a", "b"]])])
def test_malformed_shapes_are_rejected(array):
    with pytest.raises(InputError):
        ClassScores(array, "probs")


def test_nan_logits_are_rejected():
    logits = np.zeros((5, 3))
    logits[4, 1] = np.nan
    with pytest.raises(InputError, match="logits row 4"):
        split_inception_score(ClassScores(logits, "logits"), 1)


def test_report_diagnostics():
    probs = np.array([[0.98, 0.01, 0.01, 0.0]] * 6 + [[0.01, 0.98, 0.01, 0.0]] * 2 + [[0.3, 0.3, 0.4, 0.0]])
    report = score_report(ClassScores(probs, "probs"), splits=3, class_names=["a", "b", "c", "d"])
    assert report.argmax_counts.tolist() == [6, 2, 1, 0]
    assert report.classes_never_predicted.tolist() == [3]
    most, least = report.ranked_images(2)
    assert set(most.tolist()) == {6, 7}  # the rare class's images carry the most information
    assert set(least.tolist()) <= set(range(6))  # the majority class's images the least
    assert report.curve_n[-1] == 9 and report.curve_is[-1] == pytest.approx(report.is_all)
    assert report.curve_is[0] == pytest.approx(1.0)  # one image: the marginal is that image
    d = report.to_dict()
    for key in ("n", "splits", "is_mean", "is_std", "is_all", "marginal_entropy", "conditional_entropy",
                "mutual_information", "classes_never_predicted"):
        assert key in d
    assert d["classes_never_predicted_names"] == ["d"]
    assert "classes never predicted: 1 of 4: d" in report.summary()
