"""KID and precision/recall against torch-fidelity 0.4 on equal features and against brute-force loops; the
running KID against the batch estimate after every update."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
import torch

from probescope.core.errors import InputError
from probescope.core.scoring.growing import GrowingRows
from probescope.core.scoring.kid import (
    PolynomialKernel,
    RunningKernelDistance,
    kernel_inception_distance,
    mmd2_unbiased,
)
from probescope.core.scoring.precision_recall import knn_radii, precision_recall

TF_KID = dict(kid_kernel="poly", kid_kernel_poly_degree=3, kid_kernel_poly_gamma=None, kid_kernel_poly_coef0=1,
              rng_seed=2020, verbose=False)


def torch_fidelity_kid(a: np.ndarray, b: np.ndarray, subsets: int, size: int) -> tuple[float, float]:
    import tqdm
    from torch_fidelity.metric_kid import kid_features_to_metric

    tqdm.tqdm.monitor_interval = 0  # its progress bar (disabled) would otherwise start a monitor thread

    out = kid_features_to_metric(torch.from_numpy(a), torch.from_numpy(b), kid_subsets=subsets,
                                 kid_subset_size=size, **TF_KID)
    return out["kernel_inception_distance_mean"], out["kernel_inception_distance_std"]


def torch_fidelity_prc(a: np.ndarray, b: np.ndarray, k: int, save_cpu_ram: bool) -> tuple[float, float]:
    from torch_fidelity.metric_prc import prc_features_to_metric

    out = prc_features_to_metric(torch.from_numpy(a), torch.from_numpy(b), prc_neighborhood=k, prc_batch_size=97,
                                 save_cpu_ram=save_cpu_ram, verbose=False)
    return out["precision"], out["recall"]


def brute_mmd2(x: np.ndarray, y: np.ndarray) -> float:
    """The unbiased MMD^2 by its definition, pair by pair."""
    def k(a, b):
        return (a @ b / len(a) + 1.0) ** 3

    xx = [k(x[i], x[j]) for i, j in itertools.permutations(range(len(x)), 2)]
    yy = [k(y[i], y[j]) for i, j in itertools.permutations(range(len(y)), 2)]
    xy = [k(a, b) for a in x for b in y]
    return float(np.mean(xx) + np.mean(yy) - 2 * np.mean(xy))


def brute_precision_recall(gen: np.ndarray, real: np.ndarray, k: int) -> tuple[float, float]:
    """Kynkäänniemi et al. by the definition: each sample's ball reaches its k-th nearest other sample."""
    def radius(points, i):
        others = sorted(np.linalg.norm(points[i] - points[j]) for j in range(len(points)) if j != i)
        return others[k - 1]

    real_r = [radius(real, j) for j in range(len(real))]
    gen_r = [radius(gen, i) for i in range(len(gen))]
    precision = np.mean([any(np.linalg.norm(g - r) <= real_r[j] for j, r in enumerate(real)) for g in gen])
    recall = np.mean([any(np.linalg.norm(r - g) <= gen_r[i] for i, g in enumerate(gen)) for r in real])
    return float(precision), float(recall)


def features(seed: int, n: int, d: int, shift: float = 0.0, scale: float = 1.0) -> np.ndarray:
    return np.abs(np.random.default_rng(seed).normal(size=(n, d)) * scale + shift)


def test_mmd_against_the_definition():
    x, y = features(0, 9, 5), features(1, 7, 5, shift=0.3)
    assert mmd2_unbiased(x, y) == pytest.approx(brute_mmd2(x, y), rel=1e-12)
    assert mmd2_unbiased(x, x) == pytest.approx(2 * (brute_mmd2(x, x) / 2), rel=1e-12)


@pytest.mark.parametrize("subsets,size", [(20, 300), (7, 50)])
def test_kid_equals_torch_fidelity_on_random_features(subsets, size):
    a, b = features(2, 400, 48), features(3, 350, 48, shift=0.1, scale=1.1)
    ours = kernel_inception_distance(a, b, subsets, size)
    mean, std = torch_fidelity_kid(a, b, subsets, size)
    assert ours.mean == pytest.approx(mean, rel=1e-9) and ours.std == pytest.approx(std, rel=1e-9)
    assert len(ours.values) == subsets


def test_kid_draws_generated_first_then_real():
    a, b = features(4, 120, 8), features(5, 150, 8, shift=0.2)
    rng = np.random.RandomState(2020)
    x = a[rng.choice(120, 100, replace=False)]
    y = b[rng.choice(150, 100, replace=False)]
    assert kernel_inception_distance(a, b, 1, 100).values[0] == pytest.approx(mmd2_unbiased(x, y), rel=1e-12)


def test_kid_on_demo_world_features(demo_world_features):
    """float32 features as extractors give them: torch-fidelity then computes in float32 (~1e-5 off); given the
    same features as float64 it agrees with ours to rounding."""
    gen, real = demo_world_features["generated"], demo_world_features["real"]
    ours = kernel_inception_distance(gen, real, 30, 200)
    mean64, std64 = torch_fidelity_kid(gen.astype(np.float64), real.astype(np.float64), 30, 200)
    assert ours.mean == pytest.approx(mean64, rel=1e-9) and ours.std == pytest.approx(std64, rel=1e-9)
    mean32, _ = torch_fidelity_kid(gen, real, 30, 200)
    assert ours.mean == pytest.approx(mean32, rel=1e-4)
    assert ours.mean > 0


def test_kid_protocol_errors():
    a = features(6, 30, 4)
    with pytest.raises(InputError, match="KID subsets of 50 need at least 50 samples in each set"):
        kernel_inception_distance(a, a, 10, 50)
    with pytest.raises(InputError, match="at least 1 subset"):
        kernel_inception_distance(a, a, 0, 10)
    with pytest.raises(InputError, match="4 dimensions, the reference 3"):
        kernel_inception_distance(a, a[:, :3], 1, 10)


def test_running_kid_equals_batch_after_every_update():
    gen, real = features(7, 200, 16, shift=0.1), features(8, 90, 16)
    running, rows, seen = RunningKernelDistance(real), GrowingRows(), 0
    for size in [1, 1, 3, 40, 55, 100]:
        running.add(gen[seen : seen + size], rows.values)
        rows.append(gen[seen : seen + size])
        seen += size
        assert running.n == seen
        if seen >= 2:
            assert running.value == pytest.approx(mmd2_unbiased(gen[:seen], real), rel=1e-10, abs=1e-12)
    with pytest.raises(ValueError, match="earlier rows"):
        running.add(gen[:2], gen[:5])


def test_polynomial_kernel_parameters():
    x, y = features(9, 3, 4), features(10, 2, 4)
    np.testing.assert_allclose(PolynomialKernel(2, 0.5, 2.0)(x, y), (0.5 * x @ y.T + 2.0) ** 2)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_precision_recall_against_the_definition(k):
    gen, real = features(11, 40, 3, shift=0.2), features(12, 35, 3)
    ours = precision_recall(gen, real, k)
    assert (ours.precision, ours.recall) == pytest.approx(brute_precision_recall(gen, real, k), abs=1e-15)


@pytest.mark.parametrize("save_cpu_ram", [False, True])
def test_precision_recall_equal_torch_fidelity(save_cpu_ram):
    gen, real = features(13, 300, 32, shift=0.15), features(14, 260, 32)
    ours = precision_recall(gen, real)
    precision, recall = torch_fidelity_prc(gen, real, 3, save_cpu_ram)
    assert ours.precision == pytest.approx(precision, rel=1e-6) and ours.recall == pytest.approx(recall, rel=1e-6)
    assert ours.f_score == pytest.approx(2 * precision * recall / (precision + recall), rel=1e-6)


def test_precision_recall_on_demo_world_features(demo_world_features):
    gen, real = demo_world_features["generated"], demo_world_features["real"]
    ours = precision_recall(gen, real)
    precision, recall = torch_fidelity_prc(gen.astype(np.float64), real.astype(np.float64), 3, False)
    assert ours.precision == pytest.approx(precision, rel=1e-6) and ours.recall == pytest.approx(recall, rel=1e-6)
    np.testing.assert_allclose(precision_recall(gen, real, real_radii=knn_radii(real)).precision, ours.precision)


def test_precision_recall_errors():
    with pytest.raises(InputError, match="need at least 4 samples per set, got 3"):
        knn_radii(features(15, 3, 2), 3)
    with pytest.raises(InputError, match="at least 1"):
        knn_radii(features(15, 3, 2), 0)
