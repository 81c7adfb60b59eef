"""LiveScores, the gallery's running state: after every batch its FID, KID, IS, precision/recall and coverage equal
the batch computations on everything added so far."""

from __future__ import annotations

import numpy as np
import pytest

from probescope.core.errors import InputError
from probescope.core.scoring.coverage import class_coverage
from probescope.core.scoring.distributions import ClassScores
from probescope.core.scoring.extrapolate import fid_infinity, is_infinity
from probescope.core.scoring.frechet import frechet_distance, gaussian_stats
from probescope.core.scoring.kid import mmd2_unbiased
from probescope.core.scoring.live_scores import LiveScores
from probescope.core.scoring.precision_recall import precision_recall
from probescope.core.scoring.reference import ReferenceSet
from probescope.core.scoring.report import score_report


def reference_set(rng, n=300, d=12, classes=5) -> tuple[ReferenceSet, np.ndarray]:
    features = np.abs(rng.normal(size=(n, d))).astype(np.float32)
    logits = rng.normal(size=(n, classes))
    counts = np.bincount(logits.argmax(1), minlength=classes)
    return ReferenceSet("test reference", gaussian_stats(features), features, counts), features


def test_live_scores_equal_batch_scores_after_every_update():
    rng = np.random.default_rng(0)
    ref, real = reference_set(rng)
    gen = (np.abs(rng.normal(size=(250, 12))) * 1.2 + 0.1).astype(np.float32)
    logits = rng.normal(scale=2.0, size=(250, 5))
    live, seen = LiveScores(ref, class_names="abcde"), 0
    for size in [2, 1, 17, 64, 100, 66]:
        live.add(gen[seen : seen + size], logits[seen : seen + size])
        seen += size
        assert live.n == seen
        # below N = d the fit is rank-deficient: rounding in its zero eigenvalues moves FID by ~1e-9 relative
        assert live.fid() == pytest.approx(frechet_distance(gaussian_stats(gen[:seen]), ref.stats), rel=1e-7)
        assert live.kid() == pytest.approx(mmd2_unbiased(gen[:seen], real), rel=1e-9, abs=1e-12)
        assert live.is_ == pytest.approx(score_report(ClassScores(logits[:seen], "logits"), splits=1).is_all)
        if seen >= 4:
            assert live.precision_recall() == precision_recall(gen[:seen], real)
        counts = np.bincount(logits[:seen].argmax(1), minlength=5)
        np.testing.assert_array_equal(live.coverage().generated_counts, counts)
    assert live.coverage() == live.coverage()  # cached until the next batch
    assert [n for n, _ in live.history["FID"]] == [2, 3, 20, 84, 184, 250]
    np.testing.assert_allclose(live.gaussian.cov, np.cov(gen.astype(np.float64), rowvar=False), rtol=1e-10,
                               atol=1e-13)


def test_live_infinite_n_fits_equal_the_batch_fits():
    rng = np.random.default_rng(1)
    ref, _ = reference_set(rng, n=400)
    gen = np.abs(rng.normal(size=(300, 12))).astype(np.float32)
    logits = rng.normal(size=(300, 5))
    live = LiveScores(ref, seed=9)
    live.add(gen, logits)
    fit = live.fid_infinity(points=5, smallest=100)
    expected = fid_infinity(gen, ref.frechet, points=5, smallest=100, seed=9)
    np.testing.assert_allclose(fit.values, expected.values, rtol=1e-10)
    assert live.is_infinity(points=5, smallest=100).intercept == pytest.approx(
        is_infinity(ClassScores(logits, "logits"), 5, 100, 9).intercept, rel=1e-12)


def test_a_snapshot_stays_as_it_was_while_the_scores_grow():
    rng = np.random.default_rng(4)
    ref, _ = reference_set(rng)
    gen = np.abs(rng.normal(size=(120, 12))).astype(np.float32)
    logits = rng.normal(size=(120, 5))
    live = LiveScores(ref, seed=1)
    live.add(gen[:60], logits[:60])
    frozen = live.snapshot()
    before = (frozen.fid(), frozen.kid(), frozen.is_, frozen.gaussian.cov.copy())
    live.add(gen[60:], logits[60:])
    assert (frozen.fid(), frozen.kid(), frozen.is_) == before[:3] and frozen.n == 60 and live.n == 120
    np.testing.assert_array_equal(frozen.gaussian.cov, before[3])
    assert frozen.fid() == pytest.approx(frechet_distance(gaussian_stats(gen[:60]), ref.stats), rel=1e-7)
    assert live.fid() == pytest.approx(frechet_distance(gaussian_stats(gen), ref.stats), rel=1e-7)


def test_a_worker_folds_the_gaussian_sums_and_the_live_scores_take_them_back():
    import copy

    from probescope.core.scoring.frechet import RunningGaussian

    rng = np.random.default_rng(5)
    x = rng.normal(size=(90, 6))
    live = RunningGaussian()
    live.add(x[:30])
    live.add(x[30:60], lambda rows: 2 * rows)  # (a transform, as the whitening is applied)
    frozen = copy.copy(live)
    assert live._pending and frozen._pending is live._pending  # nothing folded yet: adding is O(1)
    expected = np.cov(np.vstack([x[:30], 2 * x[30:60]]), rowvar=False)
    np.testing.assert_allclose(frozen.cov, expected, rtol=1e-12)  # folded in the snapshot (a worker's read)
    live.add(x[60:])
    live.adopt(frozen)
    assert live._gram is frozen._gram and len(live._pending) == 1 and live.n == 90
    np.testing.assert_allclose(live.cov, np.cov(np.vstack([x[:30], 2 * x[30:60], x[60:]]), rowvar=False),
                               rtol=1e-12)
    stale = copy.copy(live)
    live.add(x[:5])
    live.mean  # noqa: B018  (folded here since the stale snapshot was taken)
    stale.mean  # noqa: B018
    gram = live._gram
    live.adopt(stale)
    assert live._gram is gram  # a snapshot of an older state is not taken back


def test_kid_pool_is_a_fixed_subset_of_a_large_reference():
    rng = np.random.default_rng(2)
    ref, real = reference_set(rng, n=500)
    gen = np.abs(rng.normal(size=(40, 12))).astype(np.float32)
    live = LiveScores(ref, kid_reference_size=100, seed=3)
    live.add(gen, rng.normal(size=(40, 5)))
    pool = real[np.sort(np.random.RandomState(3).choice(500, 100, replace=False))]
    assert live.kid() == pytest.approx(mmd2_unbiased(gen, pool), rel=1e-9)


def test_live_kid_covers_the_first_samples_only():
    """Past kid_sample_size the running KID stops growing (each batch would cost O(N) more): it is then the unbiased
    MMD^2 of the first kid_sample_size samples, also when the cap falls inside a batch."""
    rng = np.random.default_rng(5)
    ref, real = reference_set(rng)
    gen = np.abs(rng.normal(size=(90, 12))).astype(np.float32)
    live = LiveScores(ref, kid_sample_size=50)
    for start in range(0, 90, 30):
        live.add(gen[start : start + 30], rng.normal(size=(30, 5)))
    assert live.n == 90 and live.kid_samples == 50
    assert live.kid() == pytest.approx(mmd2_unbiased(gen[:50], real), rel=1e-9)
    assert live.fid() == pytest.approx(frechet_distance(gaussian_stats(gen), ref.stats), rel=1e-7)  # FID: all 90


def test_what_each_reference_allows():
    rng = np.random.default_rng(3)
    gen, logits = rng.normal(size=(10, 12)), rng.normal(size=(10, 5))
    alone = LiveScores()
    alone.add(gen, logits)
    assert alone.is_ > 1.0 and alone.is_infinity(points=3, smallest=2).sizes.tolist() == [2, 6, 10]
    with pytest.raises(InputError, match="FID needs a reference set"):
        alone.fid()
    ref, _ = reference_set(rng)
    stats_only = LiveScores(ReferenceSet("stats.npz", ref.stats))
    stats_only.add(gen, logits)
    assert stats_only.fid() > 0
    for reader, what in [(stats_only.kid, "KID"), (stats_only.precision_recall, "precision and recall"),
                         (stats_only.coverage, "coverage")]:
        with pytest.raises(InputError, match=what):
            reader()


def test_bad_batches_change_nothing():
    rng = np.random.default_rng(4)
    ref, _ = reference_set(rng)
    live = LiveScores(ref)
    live.add(rng.normal(size=(3, 12)), rng.normal(size=(3, 5)))
    before = live.fid()
    with pytest.raises(InputError, match="3 feature rows but 2 logit rows"):
        live.add(rng.normal(size=(3, 12)), rng.normal(size=(2, 5)))
    with pytest.raises(InputError, match="11 features per row"):
        live.add(rng.normal(size=(2, 11)), rng.normal(size=(2, 5)))
    with pytest.raises(InputError, match="6 classes"):
        live.add(rng.normal(size=(2, 12)), rng.normal(size=(2, 6)))
    with pytest.raises(InputError, match="row 1 contains NaN"):
        live.add(np.array([[0.0] * 12, [np.nan] * 12]), rng.normal(size=(2, 5)))
    assert live.n == 3 and live.fid() == before
    assert class_coverage(ref.class_counts, live.inception.argmax_counts).n_classes == 5
