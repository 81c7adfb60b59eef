"""The calibrated copy test (copy_test.py): p-values and flags against a brute force written here, its calibration on
honest samples, copies found, the Clopper-Pearson interval, the reference split and the refusals."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from probescope.core.errors import InputError
from probescope.core.scoring.copy_test import (
    DEFAULT_ALPHA,
    DEFAULT_HELD_OUT_SHARE,
    clopper_pearson,
    copy_test,
    min_held_out,
    nearest_reference,
    set_aside,
)
from probescope.core.tasks import Cancelled


def _oracle(generated, reference, held_out, alpha):
    """Explicit loops: nearest by cdist (first index on ties), p = (1 + #{h_j <= d}) / (n + 1), threshold h_(k)."""
    dist = cdist(np.asarray(generated, float), np.asarray(reference, float))
    nearest = [int(np.argmin(row)) for row in dist]
    d = [float(row[j]) for row, j in zip(dist, nearest)]
    h = [float(row.min()) for row in cdist(np.asarray(held_out, float), np.asarray(reference, float))]
    n = len(h)
    p = []
    for x in d:
        count = 0
        for y in h:
            if y <= x:
                count += 1
        p.append((1 + count) / (n + 1))
    k = math.floor(alpha * (n + 1) + 1e-9)
    return {"nearest": nearest, "distance": d, "p": p, "flagged": [q <= alpha for q in p],
            "threshold": sorted(h)[k - 1], "held_out": sorted(h)}


def _gaussian(rng, *sizes, dim=8):
    return [rng.normal(size=(size, dim)) for size in sizes]


@pytest.mark.parametrize("alpha", [0.05, 0.1, 0.2, 0.29, 0.5])
def test_integer_grid_with_ties_equals_brute_force(alpha):
    """Integer coordinates: distances are exact in both computations, so ties (sample vs held-out distances, and
    between reference images) are real ties."""
    rng = np.random.default_rng(3)
    reference = rng.integers(0, 4, size=(30, 3)).astype(np.float32)
    held_out = rng.integers(0, 4, size=(39, 3)) + 0.5
    generated = np.concatenate([rng.integers(0, 4, size=(20, 3)) + 0.5, rng.integers(0, 4, size=(10, 3))])
    got = copy_test(generated, reference, held_out, alpha=alpha)
    want = _oracle(generated, reference, held_out, alpha)
    assert got.nearest.tolist() == want["nearest"] and got.nearest.dtype == np.int64
    assert got.distance.tolist() == want["distance"]
    assert got.p_value.tolist() == want["p"]
    assert got.flagged.tolist() == want["flagged"] and got.flagged.dtype == bool
    assert got.threshold == want["threshold"] and got.held_out_distances.tolist() == want["held_out"]
    assert (got.flagged == (got.distance < got.threshold)).all()
    assert len(set(want["distance"]) & set(want["held_out"])) > 0  # ties between samples and held-out images


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_continuous_data_equals_brute_force(seed):
    rng = np.random.default_rng(seed)
    reference, held_out, generated = _gaussian(rng, 60, 49, 40, dim=5)
    generated[:5] = reference[[3, 9, 27, 40, 59]] + 1e-3  # some flags
    got = copy_test(generated, reference, held_out, alpha=0.1)
    want = _oracle(generated, reference, held_out, 0.1)
    assert got.nearest.tolist() == want["nearest"]
    np.testing.assert_allclose(got.distance, want["distance"], rtol=1e-9, atol=1e-6)
    assert got.p_value.tolist() == want["p"] and got.flagged.tolist() == want["flagged"]
    assert got.flagged[:5].all() and (got.flagged == (got.distance < got.threshold)).all()


def test_nearest_reference_ties_blocks_and_cancel(monkeypatch):
    from probescope.core.scoring import precision_recall as pr

    rng = np.random.default_rng(4)
    reference = rng.normal(size=(50, 6))
    reference[20] = reference[7]  # twins: the first index wins
    points = np.concatenate([reference[[7, 20, 3]], rng.normal(size=(40, 6))])
    distance, nearest = nearest_reference(points, reference)
    assert nearest[:3].tolist() == [7, 7, 3] and distance.dtype == np.float64
    dist = cdist(points, reference)
    assert nearest[3:].tolist() == dist[3:].argmin(axis=1).tolist()
    np.testing.assert_allclose(distance, dist.min(axis=1), atol=1e-6)
    monkeypatch.setattr(pr, "BLOCK_BYTES", 8 * 50 * 7)  # 7 rows a block
    seen = []
    blocked = nearest_reference(points, reference, progress=lambda f, m: seen.append(f))
    assert np.array_equal(blocked[1], nearest)
    np.testing.assert_allclose(blocked[0], distance, rtol=1e-12, atol=1e-7)  # BLAS may round blocks differently
    assert len(seen) == 7 and seen[-1] == 1.0 and seen == sorted(seen)
    with pytest.raises(Cancelled):
        nearest_reference(points, reference, cancel=lambda: True)


def test_calibrated_on_honest_samples():
    """Samples drawn like the reference and held-out images: P(flag) = k / (n + 1) = alpha exactly (n = 19,
    alpha = 0.1: k = 2). 200 trials of 20 samples; flags within a trial share one threshold, so the spread is about
    0.0066 (Beta(2, 18) of the threshold's quantile over 200 trials, plus binomial noise)."""
    rng = np.random.default_rng(2020)
    alpha, flags, samples = 0.1, 0, 0
    for _ in range(200):
        reference, held_out, generated = _gaussian(rng, 40, 19, 20, dim=4)
        result = copy_test(generated, reference, held_out, alpha=alpha)
        flags += result.flagged_count
        samples += result.samples
    rate = flags / samples
    assert rate <= alpha + 0.025
    assert abs(rate - alpha) < 0.025


def test_calibrated_large_set_at_default_alpha():
    """One large set at alpha 0.01 (n = 999: k = 10, P(flag) = 0.01). Given the held-out set the flag rate is the
    quantile of its threshold, Beta(10, 990) (sd 0.003), so the share is about 0.01 +- 0.004, not within the binomial
    interval alone."""
    rng = np.random.default_rng(7)
    reference, held_out, generated = _gaussian(rng, 1500, 999, 2000, dim=6)
    result = copy_test(generated, reference, held_out)
    assert result.alpha == DEFAULT_ALPHA and result.threshold == result.held_out_distances[9]
    assert 0.002 < result.flagged_share < 0.025


def test_exact_copies_are_all_flagged():
    rng = np.random.default_rng(5)
    reference, held_out, honest = _gaussian(rng, 500, 200, 300, dim=16)
    copied = rng.choice(500, size=100, replace=False)
    generated = np.concatenate([reference[copied], honest])
    result = copy_test(generated, reference, held_out)
    assert result.flagged[:100].all()
    assert result.nearest[:100].tolist() == copied.tolist()
    assert (result.p_value[:100] == 1 / 201).all()
    assert result.flagged_count <= 100 + 10  # the honest ones: about 1%


def test_perturbed_copies_are_flagged():
    rng = np.random.default_rng(6)
    reference, held_out = _gaussian(rng, 500, 200, dim=16)
    typical = np.median(nearest_reference(held_out, reference)[0])
    copied = rng.choice(500, size=100, replace=False)
    noise = rng.normal(size=(100, 16))
    noise *= 0.02 * typical / np.linalg.norm(noise, axis=1, keepdims=True)  # 2% of a typical nearest distance
    result = copy_test(reference[copied] + noise, reference, held_out)
    assert result.flagged.all() and result.nearest.tolist() == copied.tolist()


@pytest.mark.parametrize("successes, trials, want", [(0, 10, (0.0, 0.30850)), (5, 10, (0.18709, 0.81291)),
                                                     (10, 10, (0.69150, 1.0)), (1, 100, (0.000253, 0.05446))])
def test_clopper_pearson(successes, trials, want):
    lo, hi = clopper_pearson(successes, trials)
    assert lo == pytest.approx(want[0], abs=5e-5) and hi == pytest.approx(want[1], abs=5e-5)
    assert lo <= successes / trials <= hi
    if successes == 0:
        assert hi == pytest.approx(1 - 0.025 ** (1 / trials))  # P(0 of n) = (1 - hi)^n = 0.025
    with pytest.raises(InputError):
        clopper_pearson(11, 10)


def test_result_interval_dict_and_summary():
    rng = np.random.default_rng(8)
    reference, held_out, generated = _gaussian(rng, 200, 199, 100, dim=4)
    generated[:3] = reference[:3]
    result = copy_test(generated, reference, held_out, held_out_note="--held-out DIR", features="inception")
    assert result.flagged_count >= 3
    assert result.interval == clopper_pearson(result.flagged_count, 100)
    lo, hi = result.interval
    assert lo <= result.flagged_share <= hi
    d = result.to_dict()
    assert set(d) == {"copy_test_alpha", "copy_test_threshold", "copy_test_flagged", "copy_test_samples",
                      "copy_test_flagged_share", "copy_test_interval", "copy_test_held_out",
                      "copy_test_held_out_images", "copy_test_features", "copy_test_held_out_in_reference"}
    assert d["copy_test_samples"] == 100 and d["copy_test_held_out_images"] == 199
    assert d["copy_test_interval"] == [lo, hi] and d["copy_test_held_out"] == "--held-out DIR"
    assert d["copy_test_features"] == "inception" and d["copy_test_flagged"] == result.flagged_count
    line = result.summary()
    assert line.startswith(f"possible copies: {result.flagged_count} of 100 samples (")
    assert "expected 1% at alpha 0.01 if no sample copies" in line and "95% CI " in line
    assert line.endswith("below the 1% quantile of 199 held-out real images' (--held-out DIR)")
    assert "\n" not in line


def test_summary_numbers():
    flagged = np.zeros(400, bool)
    flagged[:3] = True
    from probescope.core.scoring.copy_test import CopyTest

    result = CopyTest(0.01, 1.0, np.ones(400), np.zeros(400, np.int64), np.ones(400), flagged, np.ones(200),
                      "80 of 400 reference images set aside (seed 2020)")
    assert result.summary().startswith("possible copies: 3 of 400 samples (0.75%, 95% CI 0.15–2.2%; expected 1% ")


def test_set_aside():
    kept, held = set_aside(400, DEFAULT_HELD_OUT_SHARE, 2020)
    assert len(held) == 80 and len(kept) == 320
    assert np.array_equal(np.sort(np.concatenate([kept, held])), np.arange(400))
    assert (np.diff(kept) > 0).all() and (np.diff(held) > 0).all()
    again = set_aside(400, DEFAULT_HELD_OUT_SHARE, 2020)
    assert np.array_equal(again[0], kept) and np.array_equal(again[1], held)
    assert not np.array_equal(set_aside(400, DEFAULT_HELD_OUT_SHARE, 2021)[1], held)
    assert [len(set_aside(n, share, 0)[1]) for n, share in [(2, 0.01), (2, 0.99), (10, 0.25), (3, 0.5)]] == \
        [1, 1, 2, 2]
    for n, share in [(1, 0.2), (0, 0.2), (10, 0.0), (10, 1.0), (10, math.nan)]:
        with pytest.raises(InputError):
            set_aside(n, share, 0)


def test_refusals():
    rng = np.random.default_rng(9)
    reference, held_out, generated = _gaussian(rng, 50, 50, 10)
    with pytest.raises(InputError, match=r"at alpha=0\.01 the copy test needs at least 99 held-out images and got "
                                         r"50"):
        copy_test(generated, reference, held_out)
    assert copy_test(generated, reference, held_out[:19], alpha=0.05).threshold > 0
    with pytest.raises(InputError, match="needs at least 19 held-out images and got 18"):
        copy_test(generated, reference, held_out[:18], alpha=0.05)
    assert [min_held_out(a) for a in (0.01, 0.05, 0.1, 0.3, 0.5, 0.29)] == [99, 19, 9, 3, 1, 3]
    for alpha in (0.0, -0.1, 0.6, math.nan):
        with pytest.raises(InputError, match="alpha"):
            copy_test(generated, reference, held_out, alpha=alpha)
    with pytest.raises(InputError, match="10, 8 and 8 dimensions"):
        copy_test(rng.normal(size=(10, 10)), reference, held_out, alpha=0.1)
    with pytest.raises(InputError, match="8, 8 and 5 dimensions"):
        copy_test(generated, reference, held_out[:, :5], alpha=0.1)
    with pytest.raises(InputError, match="held-out features"):
        copy_test(generated, reference, np.empty((0, 8)), alpha=0.1)


def test_held_out_images_in_the_reference_are_counted_and_said():
    """Held-out images that are reference images are not held out: the result counts them and its summary carries
    the caution (no separate note that a reader of the result alone would miss)."""
    rng = np.random.default_rng(10)
    reference, held_out, generated = _gaussian(rng, 100, 40, 20)
    held_out[:3] = reference[[5, 6, 7]] * 1.0  # "held out", yet in the reference
    result = copy_test(generated, reference, held_out, alpha=0.1)
    assert result.in_reference == 3 and result.to_dict()["copy_test_held_out_in_reference"] == 3
    assert "CAUTION: 3 of the 40 held-out images are also in the reference" in result.summary()
    clean = copy_test(generated, reference, held_out[3:], alpha=0.1)
    assert clean.in_reference == 0 and "CAUTION" not in clean.summary()


def test_progress_spans_both_passes():
    rng = np.random.default_rng(11)
    reference, held_out, generated = _gaussian(rng, 30, 20, 20)
    seen = []
    copy_test(generated, reference, held_out, alpha=0.1, progress=lambda f, m: seen.append((f, m)))
    fractions = [f for f, _ in seen]
    assert fractions == sorted(fractions) and fractions[-1] == 1.0
    assert any("held-out" in m for _, m in seen) and any("generated" in m for _, m in seen)
    with pytest.raises(Cancelled):
        copy_test(generated, reference, held_out, alpha=0.1, cancel=lambda: True)
