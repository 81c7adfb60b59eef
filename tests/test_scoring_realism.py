"""Per-sample scores against a reference set: realism, nearest reference images, the calibrated copy test's flags
(realism.py with copy_test.py) and the data-copying test C_T (copying.py), against the brute force of tests/oracles
and on the demo world's features."""

from __future__ import annotations

import math

import numpy as np
import pytest

from oracles import neighbours_reference as oracle
from probescope.core.errors import InputError
from probescope.core.scoring.copy_test import calibrate, copy_test, set_aside_calibration
from probescope.core.scoring.copying import data_copying, mann_whitney_z, training_cells
from probescope.core.scoring.per_image import columns, per_image_csv
from probescope.core.scoring.precision_recall import precision_recall
from probescope.core.scoring.realism import sample_neighbours
from probescope.core.tasks import Cancelled


def _problem(seed: int = 0):
    """Clustered reference features with a duplicated image, generated ones with an exact copy and a twin pair."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(4, 6))
    real = (centres[rng.integers(0, 4, 40)] + rng.normal(size=(40, 6))).astype(np.float32)
    real[7] = real[3]  # a reference image present twice: its ball is empty
    generated = (centres[rng.integers(0, 4, 25)] + rng.normal(scale=1.3, size=(25, 6))).astype(np.float32)
    generated[0] = real[11]  # an exact copy
    generated[1] = real[3]  # a copy of the duplicated image: nearest ties between 3 and 7
    return generated, real


def _held_out(seed: int = 0, n: int = 30):
    """Held-out real features drawn like `_problem(seed)`'s reference (the same clusters), none of them in it."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(scale=4.0, size=(4, 6))
    rng = np.random.default_rng([seed, 1])
    return (centres[rng.integers(0, 4, n)] + rng.normal(size=(n, 6))).astype(np.float32)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_equals_brute_force(k):
    generated, real = _problem()
    got = sample_neighbours(generated, real, k)
    want = oracle.per_sample(generated, real, k)
    np.testing.assert_allclose(got.realism, want["realism"], rtol=1e-6)
    assert got.nearest.tolist() == want["nearest"]
    np.testing.assert_allclose(got.distances, want["distances"], rtol=1e-9, atol=1e-6)
    assert got.nearest[1, :2].tolist() == [3, 7][:k]
    # no calibration, no copy test: nothing flagged, nothing named
    assert got.copy is None and not got.possible_copy.any() and (got.copied == -1).all() and got.copies == 0


@pytest.mark.parametrize("alpha", [0.05, 0.2])
def test_copy_flags_equal_brute_force(alpha):
    """The flags, p-values and copied images equal the brute-force conformal test's and copy_test's on the same
    held-out images; the exact copies (of an image and of a duplicated one) get the smallest p-value, 1 / (n + 1),
    and name the image copied (the first of the twins)."""
    generated, real = _problem()
    held = _held_out()
    calibration = calibrate(real, held, alpha=alpha, held_out_note="fresh draws")
    got = sample_neighbours(generated, real, 3, calibration=calibration, features="test features")
    want = oracle.copy_test(generated, real, held, alpha)
    copy = got.copy
    assert copy.flagged.tolist() == want["flagged"] and got.possible_copy.tolist() == want["flagged"]
    assert copy.p_value.tolist() == pytest.approx(want["p_value"], rel=1e-12)
    assert copy.nearest.tolist() == want["nearest"] == got.nearest[:, 0].tolist()
    np.testing.assert_allclose(copy.distance, want["distance"], rtol=1e-9, atol=1e-6)
    assert got.copied.tolist() == want["copied"] and got.copies == sum(want["flagged"])
    assert copy.p_value[:2].tolist() == [1 / 31] * 2 and got.copied[:2].tolist() == [11, 3]
    assert not all(want["flagged"])  # honest draws are not all flagged: the flags say something
    assert copy.held_out == "fresh draws" and copy.features == "test features" and copy.alpha == alpha
    direct = copy_test(generated, real, held, alpha=alpha)
    for name in ("flagged", "p_value", "nearest"):
        np.testing.assert_array_equal(getattr(copy, name), getattr(direct, name))
    assert copy.threshold == direct.threshold


def test_copy_flags_with_part_of_the_reference_set_aside():
    """Set aside, the held-out part is not searched: the copy of kept image 11 is flagged (p = 1 / 21), the copy of
    image 3, set aside with its twin 7, is compared with the kept images only and not flagged: copies of set-aside
    images are not looked for. Flags and p-values equal the brute force over the kept rows."""
    generated, real = _problem()
    calibration = set_aside_calibration(real, alpha=0.05, share=0.5, seed=2)
    kept = calibration.searched
    held = np.setdiff1d(np.arange(len(real)), kept)
    assert len(held) == 20 and calibration.held_out.startswith("20 of 40 reference images set aside")
    assert 11 in kept and {3, 7} <= set(held.tolist())
    got = sample_neighbours(generated, real, 3, calibration=calibration)
    want = oracle.copy_test(generated, real, real[held], 0.05, searched=kept.tolist())
    assert got.possible_copy.tolist() == want["flagged"] and got.copied.tolist() == want["copied"]
    assert got.copy.p_value.tolist() == pytest.approx(want["p_value"], rel=1e-12)
    assert set(got.copy.nearest.tolist()) <= set(kept.tolist())
    assert got.copied[0] == 11 and got.copy.p_value[0] == 1 / 21 and got.copied[1] == -1
    # the neighbours themselves are the whole reference's
    assert got.nearest.tolist() == sample_neighbours(generated, real, 3).nearest.tolist()


def test_blocks_and_given_radii_change_nothing(monkeypatch):
    from probescope.core.scoring import precision_recall as pr
    from probescope.core.scoring.precision_recall import knn_radii

    generated, real = _problem(1)
    calibration = calibrate(real, _held_out(1), alpha=0.1)
    whole = sample_neighbours(generated, real, 3, calibration=calibration)
    monkeypatch.setattr(pr, "BLOCK_BYTES", 8 * len(real) * 3)  # three rows a block
    calls = []
    blocked = sample_neighbours(generated, real, 3, real_radii=knn_radii(real, 3), calibration=calibration,
                                progress=lambda f, m: calls.append(f))
    for name in ("realism", "nearest", "distances"):
        np.testing.assert_allclose(getattr(whole, name), getattr(blocked, name), rtol=1e-12)  # only the rounding
    for name in ("distance", "nearest", "p_value", "flagged"):  # of the products differs
        np.testing.assert_allclose(getattr(whole.copy, name), getattr(blocked.copy, name), rtol=1e-12)
    assert len(calls) == math.ceil(len(generated) / 3) and calls[-1] == 1.0
    # in two parts, joined: the same as in one
    joined = sample_neighbours(generated[:10], real, 3, calibration=calibration).joined(
        sample_neighbours(generated[10:], real, 3, calibration=calibration))
    np.testing.assert_array_equal(joined.copy.p_value, whole.copy.p_value)
    np.testing.assert_array_equal(joined.copied, whole.copied)
    assert joined.copy.flagged_count == whole.copies
    with pytest.raises(Cancelled):
        sample_neighbours(generated, real, 3, cancel=lambda: True)


def test_realism_agrees_with_precision_when_no_ball_is_dropped():
    """Every generated sample with realism >= 1 lies in a kept ball, so their share is at most precision (which
    keeps every ball); with equal radii nothing is dropped and the two agree."""
    generated, real = _problem(2)
    nb = sample_neighbours(generated, real, 3)
    assert (nb.realism >= 1).mean() <= precision_recall(generated, real, 3).precision
    grid = np.array([[x, y] for x in range(6) for y in range(6)], np.float64)
    near = grid[:20] + 0.3  # distances 0.42, 0.76, 0.99, ...: none within 1e-5 of the radius 1
    even = sample_neighbours(near, grid, 1, real_radii=np.ones(len(grid)))
    assert (even.realism >= 1).mean() == precision_recall(near, grid, 1, real_radii=np.ones(len(grid))).precision


def test_bad_inputs():
    generated, real = _problem()
    with pytest.raises(InputError, match="1 <= k < 40"):
        sample_neighbours(generated, real, 40)
    with pytest.raises(InputError, match="dimensions"):
        sample_neighbours(generated[:, :3], real)
    with pytest.raises(InputError, match="one value per reference"):
        sample_neighbours(generated, real, 3, real_radii=np.ones(3))


def test_table_columns_and_rows():
    generated, real = _problem()
    held = _held_out()
    nb = sample_neighbours(generated, real, 3, calibration=calibrate(real, held, alpha=0.05))
    kl = np.linspace(0.0, 1.0, len(generated))
    lines = per_image_csv(kl, nb, 3).splitlines()
    assert lines[0].split(",") == columns(3) and len(lines) == 1 + len(generated)
    first = dict(zip(columns(3), lines[1].split(",")))
    assert first["possible_copy"] == "1" and first["nearest_reference"] == "11" and float(first["kl"]) == 0.0
    assert first["copied_reference"] == "11" and float(first["copy_p_value"]) == 1 / 31
    assert float(first["realism"]) == nb.realism[0] and first["nearest_reference_3"] == str(nb.nearest[0, 2])
    rows = [dict(zip(columns(3), line.split(","))) for line in lines[1:]]
    assert [float(r["copy_p_value"]) for r in rows] == nb.copy.p_value.tolist()
    assert [int(r["copied_reference"]) for r in rows] == nb.copied.tolist()
    untested = dict(zip(columns(3), per_image_csv(kl, sample_neighbours(generated, real, 3), 3).splitlines()[1]
                        .split(",")))
    assert untested["copy_p_value"] == "" and untested["possible_copy"] == "0" and untested["copied_reference"] == "-1"
    bare = per_image_csv(kl, None, 3).splitlines()
    assert bare[0] == lines[0] and bare[2].split(",")[2:] == [""] * (len(columns(3)) - 2)


# ---- the data-copying test ---------------------------------------------------------------------------------------

def test_mann_whitney_z_by_hand():
    # generated [1, 3], held-out [2, 2]: pairs q > p: (3, 2) twice -> U = 2 = mn/2: Z = 0
    assert mann_whitney_z(np.array([1.0, 3.0]), np.array([2.0, 2.0])) == 0.0
    # generated [2, 3], held-out [2, 1]: (2, 2) a tie = 1/2, (2, 1), (3, 2), (3, 1) -> U = 3.5, Z = 1.5 / sqrt(20/12)
    assert mann_whitney_z(np.array([2.0, 3.0]), np.array([2.0, 1.0])) == pytest.approx(1.5 / math.sqrt(20 / 12))
    # all generated below all held-out: U = 0, Z = -mn/2 / sqrt(mn(m+n+1)/12) = -2 / sqrt(20/12)
    assert mann_whitney_z(np.array([0.0, 0.1]), np.array([1.0, 2.0])) == pytest.approx(-2 / math.sqrt(20 / 12))
    rng = np.random.default_rng(0)
    q, p = rng.random(30), rng.random(17)
    assert mann_whitney_z(q, p) == pytest.approx(oracle.mann_whitney_z(list(q), list(p)), rel=1e-12)


def test_c_t_equals_brute_force():
    rng = np.random.default_rng(3)
    centres = rng.normal(scale=5.0, size=(3, 4))
    def draw(n, scale=1.0):
        return centres[rng.integers(0, 3, n)] + rng.normal(scale=scale, size=(n, 4))
    train, held, generated = draw(60), draw(40), draw(200, 0.8)
    for cells, tau in ((3, None), (6, 0.12), (1, None)):
        got = data_copying(train, held, generated, cells, tau, seed=1)
        want = oracle.c_t(train, held, generated, training_cells(train, cells, seed=1), got.tau)
        assert got.statistic == pytest.approx(want, rel=1e-9)
        assert 1 <= got.cells_used <= got.cells <= cells and got.tau == (20 / 200 if tau is None else tau)
    assert math.isnan(data_copying(train, held, generated, 3, tau=0.9).statistic)  # no cell holds 90% of them
    with pytest.raises(InputError, match="1 to 60 cells"):
        data_copying(train, held, generated, 0)


@pytest.fixture(scope="module")
def demo_sets(demo_world_features):
    """Held-out demo-world renders and near-copies of the reference images (pixel noise of +-6), through the demo
    classifier, beside the session's real and generated features."""
    from probescope.core.demo import world
    from probescope.core.demo.sampler import DemoSampler
    from probescope.core.scoring.classifiers import load_classifier
    from probescope.core.scoring.pipeline import embed_source
    from probescope.core.scoring.sources import ArraySource

    classifier = load_classifier("demo")
    real_images = np.stack([s.image for s in world.render_batch(11, 240)])  # the fixture's real images
    rng = np.random.default_rng(0)
    near = np.clip(real_images.astype(int) + rng.integers(-6, 7, real_images.shape), 0, 255).astype(np.uint8)
    held = np.stack([s.image for s in world.render_batch(12, 240)])
    fresh = np.stack([s.image for s in world.render_batch(13, 240)])
    embed = {name: embed_source(ArraySource(x), classifier, 60, workers=1)[0]
             for name, x in (("near", near), ("held", held), ("fresh", fresh))}
    for diversity in (1, 14):
        embed[f"diversity {diversity}"] = embed_source(DemoSampler(240, diversity=diversity, seed=5), classifier, 60,
                                                       workers=1)[0]
    return {**demo_world_features, **embed}


def test_demo_world_copies_are_flagged(demo_sets):
    """Calibrated on 240 held-out renders: near-copies of reference images (pixel noise) are flagged most of the time
    at alpha 0.01 (84%; more than half closer to their original than every held-out image is) and almost always at
    0.05 (99%), each as a copy of its own original; fresh renders of the same world about alpha's share or less
    (0.4% at 0.01, 7% at 0.05: the interval holds alpha), and the blurred, low-fidelity samples never."""
    real, held = demo_sets["real"], demo_sets["held"]
    strict, loose = calibrate(real, held, alpha=0.01), calibrate(real, held, alpha=0.05)
    near = sample_neighbours(demo_sets["near"], real, 3, calibration=strict)
    assert near.possible_copy.mean() >= 0.8 and np.median(near.copy.p_value) == 1 / 241
    assert (near.copied[near.possible_copy] == np.flatnonzero(near.possible_copy)).all()  # its own original
    near_loose = sample_neighbours(demo_sets["near"], real, 3, calibration=loose)
    assert near_loose.possible_copy.mean() >= 0.95
    assert (near_loose.copied[near_loose.possible_copy] == np.flatnonzero(near_loose.possible_copy)).mean() > 0.99
    for calibration, most in ((strict, 0.03), (loose, 0.1)):
        fresh = sample_neighbours(demo_sets["fresh"], real, 3, calibration=calibration).copy
        assert fresh.flagged_share <= most and fresh.interval[0] <= calibration.alpha <= fresh.interval[1]
        assert sample_neighbours(demo_sets["generated"], real, 3, calibration=calibration).copies == 0
    assert near.copy.interval[0] > 0.5  # far above alpha: the set-level reading says copying


def test_demo_world_c_t(demo_sets):
    """C_T with the real images as the training set: near-copies far below 0, fresh renders near 0, the low
    fidelity sampler of the session's generated set (farther from every real image) far above 0."""
    stats = {name: data_copying(demo_sets["real"], demo_sets["held"], demo_sets[name], cells=5).statistic
             for name in ("near", "fresh", "generated")}
    assert stats["near"] < -5 and abs(stats["fresh"]) < 2.5 and stats["generated"] > 3


def test_low_diversity_is_copying_to_c_t_but_not_to_the_flags(demo_sets):
    """The demo sampler at diversity 1 (harbours only) never copies: its images are fresh renders. The calibrated
    copy test flags it no more often than full diversity, and no more than alpha allows (0 of 240 vs 1 of 240 at
    alpha 0.01, 4.6% vs 6.7% at 0.05): a fresh harbour is no nearer to a real harbour than held-out images are to
    their nearest reference image. C_T, though, reads it as copying: the one cell that holds its samples also holds
    held-out images of neighbouring scenes, farther from the cell's training images than pure harbours are."""
    real, held = demo_sets["real"], demo_sets["held"]
    for alpha, most in ((0.01, 0.03), (0.05, 0.1)):
        calibration = calibrate(real, held, alpha=alpha)
        flags = {d: sample_neighbours(demo_sets[f"diversity {d}"], real, 3, calibration=calibration).copy
                 for d in (1, 14)}
        assert flags[1].flagged_share <= flags[14].flagged_share <= most
        assert flags[1].interval[0] <= alpha  # not significantly above alpha
    c_t = {d: data_copying(real, held, demo_sets[f"diversity {d}"], cells=5) for d in (1, 14)}
    assert c_t[1].statistic < -3 and abs(c_t[14].statistic) < 2 and c_t[1].cells_used < c_t[14].cells_used


def test_held_out_images_that_are_training_images_are_named(demo_sets):
    from probescope.core.errors import Note

    with pytest.warns(Note, match=r"100 of 100 held-out images are also in the training set"):
        result = data_copying(demo_sets["real"], demo_sets["real"][:100], demo_sets["fresh"], cells=3)
    assert result.in_training == 100 and result.to_dict()["data_copying_held_out_in_training"] == 100


def test_radii_of_several_k_in_one_pass(tmp_path, monkeypatch):
    """The k-NN radii of several k (precision/recall's, realism's) come from one pass over the reference, equal to
    one pass per k, and are cached beside the reference's arrays."""
    from probescope.core.scoring import precision_recall as pr
    from probescope.core.scoring.frechet import gaussian_stats
    from probescope.core.scoring.reference import ReferenceSet

    _, real = _problem(4)
    both = pr.knn_radii_of(real, (3, 1))
    for k in (1, 3):
        np.testing.assert_array_equal(both[k], pr.knn_radii(real, k))
    passes = []
    blocks = pr.distance_blocks
    monkeypatch.setattr(pr, "distance_blocks", lambda a, b: passes.append(1) or blocks(a, b))
    ref = ReferenceSet("r", gaussian_stats(real), real, cache_path=tmp_path / "ref.npz")
    got = ref.radii_of((3, 1))
    assert len(passes) == 1 and sorted(p.name for p in tmp_path.iterdir()) == ["ref-k1.npy", "ref-k3.npy"]
    again = ReferenceSet("r", gaussian_stats(real), real, cache_path=tmp_path / "ref.npz")
    assert np.array_equal(again.radii(1), got[1]) and len(passes) == 1  # read from the cache


def test_the_copy_tests_calibration_is_computed_once_per_reference():
    """The window asks for the calibration at every block of streamed samples: it is computed once per reference
    and held-out set (a set-aside fifth of 50,000 images would otherwise be 10,000 x 40,000 distances each block)."""
    from probescope.core.scoring.frechet import gaussian_stats
    from probescope.core.scoring.reference import ReferenceSet
    from probescope.core.scoring.settings import ScoreSettings
    from probescope.jobs.protocol import TaskContext
    from probescope.jobs.scoring.workflow import copy_calibration

    rng = np.random.default_rng(7)
    real = rng.normal(size=(600, 5)).astype(np.float32)
    held = rng.normal(size=(150, 5)).astype(np.float32)
    reference = ReferenceSet("r", gaussian_stats(real), real)
    held_out = ReferenceSet("h", gaussian_stats(held), held)
    ctx, settings = TaskContext(), ScoreSettings()
    aside, _ = copy_calibration(ctx, reference, None, settings)
    given, _ = copy_calibration(ctx, reference, held_out, settings)
    assert copy_calibration(ctx, reference, None, settings)[0] is aside
    assert copy_calibration(ctx, reference, held_out, settings)[0] is given and given is not aside
    assert len(given.held_out_distances) == 150 and len(aside.held_out_distances) == 120
