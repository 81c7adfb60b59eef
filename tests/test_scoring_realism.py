"""Per-sample scores against a reference set: realism, nearest reference images, possible copies (realism.py) and
the data-copying test C_T (copying.py), against the brute force of tests/oracles and on the demo world's features."""

from __future__ import annotations

import math

import numpy as np
import pytest

from oracles import neighbours_reference as oracle
from probescope.core.errors import InputError
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


@pytest.mark.parametrize("k", [1, 3, 5])
def test_equals_brute_force(k):
    generated, real = _problem()
    got = sample_neighbours(generated, real, k)
    want = oracle.per_sample(generated, real, k)
    np.testing.assert_allclose(got.realism, want["realism"], rtol=1e-6)
    assert got.nearest.tolist() == want["nearest"]
    np.testing.assert_allclose(got.distances, want["distances"], rtol=1e-9, atol=1e-6)
    assert got.possible_copy.tolist() == want["copy"] and got.copied.tolist() == want["copied"]
    assert got.possible_copy[0] and got.copied[0] == 11 and got.nearest[0, 0] == 11
    assert got.nearest[1, :2].tolist() == [3, 7][:k] and got.copied[1] not in (3, 7)  # a twin vouches for none


def test_blocks_and_given_radii_change_nothing(monkeypatch):
    from probescope.core.scoring import precision_recall as pr
    from probescope.core.scoring.precision_recall import knn_radii

    generated, real = _problem(1)
    whole = sample_neighbours(generated, real, 3)
    monkeypatch.setattr(pr, "BLOCK_BYTES", 8 * len(real) * 3)  # three rows a block
    calls = []
    blocked = sample_neighbours(generated, real, 3, real_radii=knn_radii(real, 3), real_nn1=knn_radii(real, 1),
                                progress=lambda f, m: calls.append(f))
    for a, b in zip(whole.__dict__.values(), blocked.__dict__.values()):
        np.testing.assert_allclose(a, b, rtol=1e-12)  # only the rounding of the products differs
    assert len(calls) == math.ceil(len(generated) / 3) and calls[-1] == 1.0
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
    nb = sample_neighbours(generated, real, 3)
    kl = np.linspace(0.0, 1.0, len(generated))
    lines = per_image_csv(kl, nb, 3).splitlines()
    assert lines[0].split(",") == columns(3) and len(lines) == 1 + len(generated)
    first = dict(zip(columns(3), lines[1].split(",")))
    assert first["possible_copy"] == "1" and first["nearest_reference"] == "11" and float(first["kl"]) == 0.0
    assert float(first["realism"]) == nb.realism[0] and first["nearest_reference_3"] == str(nb.nearest[0, 2])
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
    """Near-copies of reference images are flagged far more often than fresh renders of the same world (which a
    240-image reference's wide balls still flag often: the flag says 'possible'), and the blurred, low-fidelity
    samples least."""
    real = demo_sets["real"]
    flags = {name: sample_neighbours(demo_sets[name], real, 3).possible_copy.mean()
             for name in ("near", "fresh", "generated")}
    assert flags["near"] >= 0.95 and flags["fresh"] <= flags["near"] - 0.2 and flags["generated"] < flags["fresh"]
    near = sample_neighbours(demo_sets["near"], real, 3)
    assert (near.copied[near.possible_copy] == np.flatnonzero(near.possible_copy)).mean() > 0.9  # its own original


def test_demo_world_c_t(demo_sets):
    """C_T with the real images as the training set: near-copies far below 0, fresh renders near 0, the low
    fidelity sampler of the session's generated set (farther from every real image) far above 0."""
    stats = {name: data_copying(demo_sets["real"], demo_sets["held"], demo_sets[name], cells=5).statistic
             for name in ("near", "fresh", "generated")}
    assert stats["near"] < -5 and abs(stats["fresh"]) < 2.5 and stats["generated"] > 3


def test_low_diversity_is_copying_to_c_t_but_not_to_the_flags(demo_sets):
    """The demo sampler at diversity 1 (harbours only) never copies: its images are fresh renders. Per sample it is
    flagged no more often than at full diversity (a harbour lies inside a real harbour's 1-NN ball as often as any
    scene inside its own). C_T, though, reads it as copying: the one cell that holds its samples also holds held-out
    images of neighbouring scenes, farther from the cell's training images than pure harbours are."""
    real, held = demo_sets["real"], demo_sets["held"]
    flags = {d: sample_neighbours(demo_sets[f"diversity {d}"], real, 3).possible_copy.mean() for d in (1, 14)}
    assert flags[1] <= flags[14]
    c_t = {d: data_copying(real, held, demo_sets[f"diversity {d}"], cells=5) for d in (1, 14)}
    assert c_t[1].statistic < -3 and abs(c_t[14].statistic) < 2 and c_t[1].cells_used < c_t[14].cells_used


def test_held_out_images_that_are_training_images_are_named(demo_sets):
    from probescope.core.errors import Note

    with pytest.warns(Note, match=r"\d+ of \d+ held-out images are also in the training set"):
        data_copying(demo_sets["real"], demo_sets["real"][:100], demo_sets["fresh"], cells=3)


def test_radii_of_several_k_in_one_pass(tmp_path, monkeypatch):
    """The copy flag's 1-NN distances and precision/recall's k-NN radii come from one pass over the reference,
    equal to one pass per k, and are cached beside the reference's arrays."""
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
