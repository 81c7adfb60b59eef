"""The live estimator equals the batch computation after every update."""

from __future__ import annotations

import math

import numpy as np
import pytest

from probescope.core.errors import InputError
from probescope.core.scoring.distributions import ClassScores
from probescope.core.scoring.live import LiveInceptionScore
from probescope.core.scoring.report import score_report


def batch_reference(p: np.ndarray) -> dict[str, object]:
    """From scratch, by the definitions: q, H(q), mean H(p|x), per-image KL, IS."""
    q = p.mean(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = np.where(p > 0, p * np.log(p), 0.0)
        kl = np.where(p > 0, p * (np.log(p) - np.log(q)), 0.0).sum(axis=1)
    h_q = -np.where(q > 0, q * np.log(np.where(q > 0, q, 1)), 0).sum()
    return {"q": q, "h_q": h_q, "h_cond": -plogp.sum(axis=1).mean(), "kl": kl, "is": math.exp(kl.mean())}


@pytest.mark.parametrize("unit", ["nats", "bits"])
def test_live_equals_batch_after_every_update(unit):
    rng = np.random.default_rng(3)
    logits = rng.normal(scale=5.0, size=(230, 12))
    logits[:, 11] = -np.inf  # a class nobody predicts: exact zeros throughout
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    live = LiveInceptionScore(unit=unit)
    scale = 1.0 if unit == "nats" else 1.0 / math.log(2)
    seen = 0
    for size in [1, 2, 7, 50, 0, 100, 70]:
        live.add(p[seen : seen + size])
        seen += size
        if seen == 0:
            continue
        ref = batch_reference(p[:seen])
        assert live.n == seen
        np.testing.assert_allclose(live.marginal, ref["q"], rtol=1e-12, atol=1e-15)
        assert live.is_ == pytest.approx(ref["is"], rel=1e-12)
        assert live.marginal_entropy == pytest.approx(ref["h_q"] * scale, rel=1e-12)
        assert live.conditional_entropy == pytest.approx(ref["h_cond"] * scale, rel=1e-12)
        assert live.mutual_information == pytest.approx(math.log(ref["is"]) * scale, rel=1e-9, abs=1e-15)
        np.testing.assert_allclose(live.contributions(), ref["kl"] * scale, rtol=1e-9, atol=1e-12)
        assert live.argmax_counts.sum() == seen
    ns, values = live.history
    assert ns.tolist() == [1, 3, 10, 60, 160, 230]
    assert values[-1] == pytest.approx(live.is_)
    assert 11 in live.classes_never_predicted


def test_live_logits_match_report():
    rng = np.random.default_rng(5)
    logits = rng.normal(scale=3.0, size=(90, 20)).astype(np.float32)
    live = LiveInceptionScore()
    for start in range(0, 90, 16):
        live.add_logits(logits[start : start + 16])
    report = score_report(ClassScores(logits, "logits"), splits=3)
    assert live.is_ == pytest.approx(report.is_all, rel=1e-12)
    np.testing.assert_allclose(live.contributions(), report.contributions, rtol=1e-9, atol=1e-12)
    np.testing.assert_array_equal(live.argmax_counts, report.argmax_counts)


def test_live_rejects_bad_batches():
    live = LiveInceptionScore()
    with pytest.raises(InputError, match="no images"):
        _ = live.is_
    live.add(np.array([[0.5, 0.5]]))
    with pytest.raises(InputError, match="3 classes"):
        live.add(np.array([[0.2, 0.3, 0.5]]))
    with pytest.raises(InputError, match="row 1 contains NaN"):
        live.add(np.array([[0.5, np.nan]]))  # rows are numbered over the whole stream
    assert live.n == 1  # a rejected batch leaves the estimate as it was


def test_without_rows_contributions_are_unavailable():
    live = LiveInceptionScore(keep_rows=False)
    live.add(np.eye(3))
    assert live.is_ == pytest.approx(3.0)
    with pytest.raises(InputError, match="keep_rows"):
        live.contributions()


@pytest.mark.parametrize("keep_rows", [True, False])
def test_a_copy_keeps_its_estimate_while_the_original_grows(keep_rows):
    rng = np.random.default_rng(9)
    logits = rng.normal(scale=2.0, size=(300, 7)).astype(np.float32)
    live = LiveInceptionScore(keep_rows=keep_rows)
    for start in range(0, 150, 10):
        live.add_logits(logits[start : start + 10])
    twin = live.copy()
    before = (twin.is_, twin.marginal.copy(), twin.argmax_counts.copy(), [a.copy() for a in twin.history])
    for start in range(150, 300, 10):  # grows past the kept rows' capacity: the shared rows are reallocated
        live.add_logits(logits[start : start + 10])
    assert twin.n == 150 and live.n == 300
    assert twin.is_ == before[0]
    np.testing.assert_array_equal(twin.marginal, before[1])
    np.testing.assert_array_equal(twin.argmax_counts, before[2])
    for got, kept in zip(twin.history, before[3]):
        np.testing.assert_array_equal(got, kept)
    report = score_report(ClassScores(logits[:150], "logits"), splits=1)
    assert twin.is_ == pytest.approx(report.is_all, rel=1e-9)
    if keep_rows:
        np.testing.assert_allclose(twin.contributions(), report.contributions, rtol=1e-9, atol=1e-12)
