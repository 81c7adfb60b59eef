"""CMMD (Jayasumana et al. 2024): loop and cdist oracles, a hand-worked case, the estimators' behaviour on equal and
shifted distributions, scale invariance, bad inputs and the blockwise sums."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.spatial.distance import cdist

from probescope.core.errors import InputError
from probescope.core.scoring import cmmd as cmmd_module
from probescope.core.scoring.cmmd import SCALE, SIGMA, Cmmd, cmmd
from probescope.core.tasks import Cancelled


def oracle_loops(x: np.ndarray, y: np.ndarray, estimator: str) -> float:
    """Plain loops over unit-normalised rows, exact sums (math.fsum) of exp(-|a-b|^2 / 200)."""
    def unit(rows):
        return [[v / math.sqrt(math.fsum(w * w for w in row)) for v in row] for row in np.asarray(rows).tolist()]

    xs, ys = unit(x), unit(y)

    def k(a, b):
        return math.exp(-math.fsum((p - q) ** 2 for p, q in zip(a, b)) / (2 * SIGMA**2))

    m, n = len(xs), len(ys)
    skip_diagonal = estimator == "unbiased"
    kxx = math.fsum(k(xs[i], xs[j]) for i in range(m) for j in range(m) if not (skip_diagonal and i == j))
    kyy = math.fsum(k(ys[i], ys[j]) for i in range(n) for j in range(n) if not (skip_diagonal and i == j))
    kxy = math.fsum(k(xs[i], ys[j]) for i in range(m) for j in range(n))
    if skip_diagonal:
        mmd2 = kxx / (m * (m - 1)) + kyy / (n * (n - 1)) - 2 * kxy / (m * n)
    else:
        mmd2 = kxx / m**2 + kyy / n**2 - 2 * kxy / (m * n)
    return 1000.0 * mmd2


def oracle_cdist(x: np.ndarray, y: np.ndarray, estimator: str) -> float:
    """google-research/cmmd's formula (means of whole kernel matrices) or its off-diagonal version, via cdist."""
    x = x / np.linalg.norm(x, axis=1, keepdims=True)
    y = y / np.linalg.norm(y, axis=1, keepdims=True)
    kxx, kyy, kxy = (np.exp(-cdist(a, b, "sqeuclidean") / (2 * SIGMA**2)) for a, b in ((x, x), (y, y), (x, y)))
    if estimator == "unbiased":
        m, n = len(x), len(y)
        return 1000.0 * ((kxx.sum() - m) / (m * (m - 1)) + (kyy.sum() - n) / (n * (n - 1)) - 2 * kxy.mean())
    return 1000.0 * (kxx.mean() + kyy.mean() - 2 * kxy.mean())


@pytest.fixture(scope="module")
def sets():
    rng = np.random.default_rng(11)
    x = rng.normal(loc=0.4, size=(30, 8))
    y = rng.normal(size=(40, 8))
    return x, y


@pytest.mark.parametrize("estimator", ["unbiased", "biased"])
def test_against_oracles(sets, estimator):
    x, y = sets
    got = cmmd(x, y, estimator=estimator)
    assert got.estimator == estimator and (got.m, got.n) == (30, 40)
    assert got.value == pytest.approx(oracle_loops(x, y, estimator), rel=1e-12, abs=0)
    assert got.value == pytest.approx(oracle_cdist(x, y, estimator), rel=1e-10, abs=0)


def test_estimators_differ_by_the_diagonal(sets):
    """biased - unbiased = 1000 ((1 - mean_{i!=j} k_xx) / m + (1 - mean_{i!=j} k_yy) / n), as the docstring says."""
    x, y = sets
    xu, yu = (a / np.linalg.norm(a, axis=1, keepdims=True) for a in (x, y))

    def off_mean(a):
        k = np.exp(-cdist(a, a, "sqeuclidean") / (2 * SIGMA**2))
        return (k.sum() - len(a)) / (len(a) * (len(a) - 1))

    gap = cmmd(x, y, estimator="biased").value - cmmd(x, y).value
    assert gap == pytest.approx(1000 * ((1 - off_mean(xu)) / 30 + (1 - off_mean(yu)) / 40), rel=1e-9)
    assert 0 < gap < 1000 * (1 - math.exp(-4 / 200)) * (1 / 30 + 1 / 40)


def test_hand_worked_one_dimensional_case():
    # In 1-d every nonzero point normalises to +1 or -1, and k(1, -1) = exp(-|1 - (-1)|^2 / (2 * 10^2)) = exp(-0.02)
    # =: e, k(1, 1) = 1.
    # x = {3, 0.5} -> {1, 1}; y = {-2, -7} -> {-1, -1}: k_xx = k_yy = 1 everywhere, k_xy = e everywhere, so
    #   unbiased = biased = 1000 (1 + 1 - 2e) = 2000 (1 - e) = 39.60265338649...
    e = math.exp(-0.02)
    x, y = np.array([[3.0], [0.5]]), np.array([[-2.0], [-7.0]])
    assert cmmd(x, y).value == pytest.approx(39.6026533864895, rel=1e-12)
    assert cmmd(x, y).value == pytest.approx(2000 * (1 - e), rel=1e-12)
    assert cmmd(x, y, estimator="biased").value == pytest.approx(2000 * (1 - e), rel=1e-12)
    # x = {1, 1}; y = {2, -7} -> {1, -1}:
    #   unbiased: off-diagonal k_xx = 1, off-diagonal k_yy = k(1, -1) = e, k_xy = {1, e, 1, e} with mean (1 + e) / 2,
    #     1 + e - 2 (1 + e) / 2 = 0 exactly;
    #   biased: mean k_xx = 1, mean k_yy = (1 + e + e + 1) / 4 = (1 + e) / 2, mean k_xy = (1 + e) / 2,
    #     1000 (1 + (1 + e) / 2 - (1 + e)) = 500 (1 - e) = 9.90066334662...
    y = np.array([[2.0], [-7.0]])
    assert cmmd(x, y).value == pytest.approx(0.0, abs=1e-13)
    assert cmmd(x, y, estimator="biased").value == pytest.approx(9.90066334662237, rel=1e-12)
    assert cmmd(x, y, estimator="biased").value == pytest.approx(500 * (1 - e), rel=1e-12)


def test_same_distribution():
    # pairs of independent samples of one distribution (400 unit vectors in 16-d each): the unbiased estimate
    # scatters around 0 (std ~0.02 here), the biased one sits ~20/n above it, 1 - k ~ |a - b|^2 / 200 ~ 2 / 200
    # between such vectors: 1000 * 0.01 * (1/400 + 1/400) ~ 0.05
    rng = np.random.default_rng(3)
    pairs = [(rng.normal(size=(400, 16)), rng.normal(size=(400, 16))) for _ in range(20)]
    unbiased = np.array([cmmd(x, y).value for x, y in pairs])
    biased = np.array([cmmd(x, y, estimator="biased").value for x, y in pairs])
    assert abs(unbiased.mean()) < 0.01 and unbiased.min() < 0 < unbiased.max()
    assert biased.min() > 0 and 0.04 < biased.mean() < 0.06
    assert np.all(biased > unbiased)
    # one set against itself: the V-statistic is exactly 0, the unbiased estimate -2000 (1 - mean k) / m below it
    x = pairs[0][0]
    assert cmmd(x, x, estimator="biased").value == pytest.approx(0.0, abs=1e-12)
    xu = x / np.linalg.norm(x, axis=1, keepdims=True)
    mean_k = (np.exp(-cdist(xu, xu, "sqeuclidean") / (2 * SIGMA**2)).sum() - 400) / (400 * 399)
    assert cmmd(x, x).value == pytest.approx(-2000 * (1 - mean_k) / 400, rel=1e-9)


def test_shift_raises_the_value():
    rng = np.random.default_rng(5)
    y = rng.normal(size=(300, 8))
    noise = rng.normal(size=(300, 8))
    values = [cmmd(noise + shift, y).value for shift in (0.0, 0.25, 0.5, 1.0, 2.0)]
    assert abs(values[0]) < 0.05  # the same distribution: ~0 (scatter ~0.03 at n = 300)
    assert values[1] > 0.1 and values[-1] > 5.0
    assert all(a < b for a, b in zip(values, values[1:]))


def test_scale_invariance(sets):
    x, y = sets
    rng = np.random.default_rng(1)
    scaled_x = x * rng.uniform(0.01, 100.0, size=(len(x), 1))
    scaled_y = y * 1e6
    for estimator in ("unbiased", "biased"):
        assert cmmd(scaled_x, scaled_y, estimator=estimator).value == pytest.approx(
            cmmd(x, y, estimator=estimator).value, rel=1e-10)


def test_float32_inputs_are_computed_in_float64(sets):
    x, y = sets
    x32, y32 = x.astype(np.float32), y.astype(np.float32)
    assert cmmd(x32, y32).value == pytest.approx(oracle_cdist(x32.astype(np.float64), y32.astype(np.float64),
                                                              "unbiased"), rel=1e-10)


def test_bad_inputs(sets):
    x, y = sets
    with pytest.raises(InputError, match="8 dimensions, the reference 5"):
        cmmd(x, y[:, :5])
    with pytest.raises(InputError, match="at least 2"):
        cmmd(x[:1], y)
    with pytest.raises(InputError, match="at least 2"):
        cmmd(x, y[:1])
    assert cmmd(x[:1], y[:1], estimator="biased").value >= 0  # the V-statistic is defined for single samples
    zero = x.copy()
    zero[4] = 0.0
    with pytest.raises(InputError, match="generated embeddings row 4 is all zero"):
        cmmd(zero, y)
    with pytest.raises(InputError, match="reference embeddings row 4 is all zero"):
        cmmd(x, zero)
    nan = y.copy()
    nan[7, 2] = np.nan
    with pytest.raises(InputError, match="reference embeddings row 7 contains NaN"):
        cmmd(x, nan)
    with pytest.raises(InputError, match="estimator"):
        cmmd(x, y, estimator="median")
    with pytest.raises(InputError):
        cmmd(x[0], y)


@pytest.mark.parametrize("estimator", ["unbiased", "biased"])
def test_blocks_equal_one_shot(monkeypatch, estimator):
    rng = np.random.default_rng(9)
    x, y = rng.normal(loc=0.2, size=(53, 6)), rng.normal(size=(47, 6))
    one_shot = cmmd(x, y, estimator=estimator).value
    monkeypatch.setattr(cmmd_module, "BLOCK_BYTES", 8 * 53 * 5)  # 5 rows per block against 53 columns, ~5 on 47
    calls = []
    blocked = cmmd(x, y, estimator=estimator, cancel=lambda: calls.append(1) and False).value
    assert len(calls) >= 25  # several blocks per sum, each one checked for cancellation
    assert blocked == pytest.approx(one_shot, rel=1e-12)
    assert blocked == pytest.approx(oracle_cdist(x, y, estimator), rel=1e-10)


def test_cancel():
    rng = np.random.default_rng(2)
    with pytest.raises(Cancelled):
        cmmd(rng.normal(size=(10, 3)), rng.normal(size=(10, 3)), cancel=lambda: True)


def test_result_dict_and_summary():
    result = Cmmd(0.12344, 400, 400, "unbiased", "clip-vit-l14-336")
    assert result.to_dict() == {"cmmd": 0.12344, "cmmd_estimator": "unbiased", "cmmd_features": "clip-vit-l14-336"}
    line = result.summary()
    assert line.startswith("CMMD: 0.1234   (")
    assert "x1000 unbiased MMD^2" in line and "sigma 10 " in line and "400 samples vs 400 reference images" in line
    assert "clip-vit-l14-336 embeddings" in line
    assert "unit-norm CLIP embeddings" in Cmmd(-1e-9, 2, 3, "biased").summary()
    assert "CMMD: 0.0000" in Cmmd(-1e-9, 2, 3, "biased").summary()
    assert SCALE == 1000.0 and SIGMA == 10.0
