"""Density/coverage (Naeem et al. 2020) and the Vendi score (Friedman & Dieng 2023): brute-force oracles, hand-worked
cases, the authors' packages (prdc, vendi-score) where installed, and `probescope score` on the demo world."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from probescope.core.errors import InputError
from probescope.core.scoring.density_coverage import density_coverage
from probescope.core.scoring.precision_recall import knn_radii
from probescope.core.scoring.vendi import cosine_spectrum, vendi_score, vendi_scores


def oracle_density_coverage(real: np.ndarray, fake: np.ndarray, k: int) -> tuple[float, float]:
    """Plain loops: r_i the k-th smallest distance from real i to the other reals; open balls."""
    n, m = len(real), len(fake)
    radii = []
    for i in range(n):
        others = sorted(math.dist(real[i], real[j]) for j in range(n) if j != i)
        radii.append(others[k - 1])
    inside, covered = 0, 0
    for i in range(n):
        hit = False
        for j in range(m):
            if math.dist(fake[j], real[i]) < radii[i]:
                inside += 1
                hit = True
        covered += hit
    return inside / (k * m), covered / n


def oracle_vendi(x: np.ndarray) -> float:
    """The n x n cosine kernel by loops, eigenvalues of K/n, exp of their entropy."""
    n = len(x)
    kernel = np.empty((n, n))
    for i in range(n):
        for j in range(n):
            kernel[i, j] = float(x[i] @ x[j]) / (np.linalg.norm(x[i]) * np.linalg.norm(x[j]))
    w = np.linalg.eigvalsh(kernel / n)
    w = w[w > 1e-15]
    return float(np.exp(-np.sum(w * np.log(w))))


@pytest.fixture(scope="module")
def sets():
    rng = np.random.default_rng(7)
    real = rng.normal(size=(30, 4))
    fake = rng.normal(loc=0.3, scale=1.2, size=(25, 4)).astype(np.float32)
    return real, fake


@pytest.mark.parametrize("k", [1, 3, 5])
def test_density_coverage_against_loops(sets, k):
    real, fake = sets
    got = density_coverage(fake, real, k)
    want = oracle_density_coverage(real, fake.astype(np.float64), k)
    assert (got.density, got.coverage) == pytest.approx(want, rel=1e-12)
    assert got.k == k
    # precision/recall's radii (a reference's cached ones) give the same numbers
    again = density_coverage(fake, real, k, real_radii=knn_radii(real, k))
    assert (again.density, again.coverage) == (got.density, got.coverage)


def test_density_coverage_hand_worked():
    real = np.array([[0.0], [1.0], [3.0], [7.0]])  # k = 1 radii: 1, 1, 2, 4
    # 0.5 is in the balls of 0 and 1; 3.5 in 3's and 7's; 6 in 7's; 20 in none: 5 hits / (k M = 4)
    dc = density_coverage(np.array([[0.5], [3.5], [6.0], [20.0]]), real, 1)
    assert dc.density == pytest.approx(5 / 4) and dc.coverage == 1.0
    assert density_coverage(np.array([[0.5], [20.0]]), real, 1).coverage == 0.5  # 3 and 7 left uncovered
    assert density_coverage(np.array([[-1.0]]), real, 1).density == 0.0  # |-1 - 0| = 1 = r_0: open balls
    # fakes sitting on the reals: every ball holds its own centre (and, open balls, not its k-th neighbour)
    rng = np.random.default_rng(1)
    x = rng.normal(size=(40, 3))
    on = density_coverage(x, x, 5)
    assert on.coverage == 1.0 and on.density == pytest.approx(1.0)
    far = density_coverage(x + 100.0, x, 5)
    assert far.density == 0.0 and far.coverage == 0.0
    with pytest.raises(InputError, match="dimensions"):
        density_coverage(x[:, :2], x, 5)


def test_density_coverage_memory_blocks(sets, monkeypatch):
    from probescope.core.scoring import precision_recall

    real, fake = sets
    whole = density_coverage(fake, real, 3)
    monkeypatch.setattr(precision_recall, "BLOCK_BYTES", 8 * 30 * 2)  # two rows of generated samples per block
    assert density_coverage(fake, real, 3) == whole


def test_vendi_against_loops_and_hand_worked():
    rng = np.random.default_rng(3)
    for n, d in ((25, 4), (3, 6)):  # the d x d route (d < n) and the n x n one
        x = rng.normal(size=(n, d))
        assert vendi_score(x) == pytest.approx(oracle_vendi(x), rel=1e-10)
    assert cosine_spectrum(rng.normal(size=(25, 4))).sum() == pytest.approx(1.0)
    assert vendi_score(np.tile([[1.0, 2.0, -3.0]], (20, 1))) == pytest.approx(1.0)  # n copies of one sample
    assert vendi_score(np.tile([[1.0, 2.0, -3.0]], (20, 1)) * rng.uniform(0.5, 2, (20, 1))) == pytest.approx(1.0)
    assert vendi_score(np.eye(6) * 3.0) == pytest.approx(6.0)  # n orthogonal vectors (n = d)
    assert vendi_score(np.repeat(np.eye(4), 5, axis=0)) == pytest.approx(4.0)  # 4 equally frequent distinct ones
    scores = vendi_scores(np.eye(3), np.eye(5))
    assert (scores.samples, scores.reference) == pytest.approx((3.0, 5.0))
    assert scores.to_dict()["vendi_kernel"] == "cosine"
    with pytest.raises(InputError, match="zero"):
        vendi_score(np.array([[1.0, 0.0], [0.0, 0.0]]))


def test_vendi_blocks_of_rows(monkeypatch):
    from probescope.core.scoring import vendi

    x = np.random.default_rng(4).normal(size=(50, 5))
    whole = vendi_score(x)
    monkeypatch.setattr(vendi, "BLOCK_ROWS", 7)
    assert vendi_score(x) == pytest.approx(whole, rel=1e-12)


def test_density_coverage_equals_prdc(sets, capsys):
    """prdc's radii are also the k-th nearest *other* real (its k+1 smallest include the 0 to itself) and its balls
    are open (<); its distances are sklearn's float64 Euclidean."""
    prdc = pytest.importorskip("prdc")
    real, fake = sets
    for k in (1, 3, 5):
        theirs = prdc.compute_prdc(real_features=real, fake_features=fake.astype(np.float64), nearest_k=k)
        ours = density_coverage(fake, real, k)
        assert ours.density == pytest.approx(theirs["density"], rel=1e-12)
        assert ours.coverage == pytest.approx(theirs["coverage"], rel=1e-12)
    capsys.readouterr()  # compute_prdc prints the set sizes


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # vendi_score 0.0.3 reads scipy.sparse.csr
def test_vendi_equals_vendi_score():
    vendi = pytest.importorskip("vendi_score.vendi")
    rng = np.random.default_rng(5)
    for n, d in ((25, 4), (200, 16), (5, 12)):
        x = rng.normal(size=(n, d)) + 0.5
        assert vendi_score(x) == pytest.approx(vendi.score_dual(x), rel=1e-9)
        assert vendi_score(x) == pytest.approx(vendi.score_X(x), rel=1e-9)


def _demo_model_available() -> bool:
    from probescope.core.demo import model as demo

    return demo.DEMO_WEIGHTS.is_file()


@pytest.mark.skipif(not _demo_model_available(), reason="the demo model's weights are not built")
def test_score_command_on_the_demo_world(capsys):
    from probescope.main import main

    argv = ["score", "--images", "demo", "--n", "200", "--fid", "demo", "--splits", "2", "--prc", "--density-coverage",
            "--vendi"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    with capsys.disabled():
        print("\n" + "\n".join(line for line in out.splitlines() if line.startswith(("density", "Vendi"))))
    assert "density " in out and "k=5 nearest real neighbours" in out and "Vendi score: " in out
    assert main([*argv, "--dc-k", "3", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert r["density_coverage_k"] == 3 and r["prc_k"] == 3 and r["vendi_kernel"] == "cosine"
    assert 0 < r["density"] and 0 < r["nn_coverage"] <= 1 and isinstance(r["coverage"], list)  # class coverage kept
    assert 1 <= r["vendi_score"] <= 200 and 1 <= r["vendi_score_reference"]
    assert "'fc'" in r["vendi_features"] and r["density_coverage_features"] == r["features"]
    # the Vendi score needs no reference; density/coverage does
    assert main(["score", "--images", "demo", "--n", "20", "--splits", "2", "--vendi", "--json"]) == 0
    alone = json.loads(capsys.readouterr().out)
    assert alone["vendi_score_reference"] is None and "'fc'" in alone["vendi_features"]
    assert main(["score", "--images", "demo", "--n", "20", "--density-coverage"]) == 2
    assert "compare with a reference set" in capsys.readouterr().err
