"""FID against torch-fidelity 0.4 on equal features, hand-worked Gaussians, the running statistics against np.cov
after every update, and the pytorch-fid mu/sigma files."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from probescope.core.errors import InputError
from probescope.core.scoring.frechet import (
    FrechetReference,
    GaussianStats,
    RunningGaussian,
    frechet_distance,
    gaussian_stats,
)


def torch_fidelity_fid(a: np.ndarray, b: np.ndarray) -> float:
    from torch_fidelity.metric_fid import fid_features_to_statistics, fid_statistics_to_metric

    stats = [fid_features_to_statistics(torch.from_numpy(x)) for x in (a, b)]
    return fid_statistics_to_metric(*stats, verbose=False)["frechet_inception_distance"]


def inception_like(rng: np.random.Generator, n: int, d: int, scale: float, shift: float) -> np.ndarray:
    """Non-negative, correlated features (a ReLU of a low-rank map plus a little noise), like pooled activations."""
    low = rng.normal(size=(n, 24)) @ np.random.default_rng(99).normal(size=(24, d)) * scale + shift
    return (np.maximum(low, 0.0) + 0.05 * rng.random((n, d))).astype(np.float32)


@pytest.mark.parametrize("n1,n2,d", [(600, 500, 64), (400, 700, 96), (90, 120, 96)])  # the last: rank-deficient
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_fid_equals_torch_fidelity_on_random_features(n1, n2, d, dtype):
    rng = np.random.default_rng(n1 + d)
    a = inception_like(rng, n1, d, 0.10, 0.10).astype(dtype)
    b = inception_like(rng, n2, d, 0.12, 0.12).astype(dtype)
    ours = frechet_distance(gaussian_stats(a), gaussian_stats(b))
    # torch-fidelity computes the mean in the features' dtype (float32: ~1e-7); rank-deficient covariances put
    # rounding noise into its complex square roots of the zero eigenvalues (~1e-7 as well)
    assert ours == pytest.approx(torch_fidelity_fid(a, b), rel=1e-6)


def test_fid_equals_torch_fidelity_on_demo_world_features(demo_world_features):
    real, gen = demo_world_features["real"], demo_world_features["generated"]
    ours = frechet_distance(gaussian_stats(gen), gaussian_stats(real))
    assert ours == pytest.approx(torch_fidelity_fid(gen, real), rel=1e-6)
    assert ours == pytest.approx(torch_fidelity_fid(gen.astype(np.float64), real.astype(np.float64)), rel=1e-9)
    assert frechet_distance(gaussian_stats(real), gaussian_stats(real)) == pytest.approx(0.0, abs=1e-9)


def test_hand_worked_gaussians():
    """Diagonal covariances: FID = |mu1 - mu2|^2 + sum (s1 - s2)^2 over the standard deviations."""
    a = GaussianStats(np.array([0.0, 1.0, 2.0]), np.diag([1.0, 4.0, 9.0]))
    b = GaussianStats(np.array([1.0, 1.0, 0.0]), np.diag([4.0, 4.0, 1.0]))
    assert frechet_distance(a, b) == pytest.approx(1 + 4 + (1 - 2) ** 2 + 0 + (3 - 1) ** 2, rel=1e-12)
    assert frechet_distance(b, a) == pytest.approx(frechet_distance(a, b), rel=1e-12)
    rotation = np.linalg.qr(np.random.default_rng(0).normal(size=(3, 3)))[0]  # invariant under a common rotation
    turned = [GaussianStats(rotation @ s.mu, rotation @ s.sigma @ rotation.T) for s in (a, b)]
    assert frechet_distance(*turned) == pytest.approx(frechet_distance(a, b), rel=1e-10)


def test_singular_reference():
    """A reference concentrated on a line: FID = |dmu|^2 + tr S1 + tr S2 - 2 sqrt(u^T S1 u * s2) for S2 = s2 u u^T."""
    u = np.array([0.6, 0.8])
    s1 = np.array([[2.0, 0.3], [0.3, 1.0]])
    ref = GaussianStats(np.zeros(2), 5.0 * np.outer(u, u))
    assert FrechetReference(ref).rank == 1
    expected = 1.0 + np.trace(s1) + 5.0 - 2.0 * np.sqrt(u @ s1 @ u * 5.0)
    assert frechet_distance(GaussianStats(np.array([1.0, 0.0]), s1), ref) == pytest.approx(expected, rel=1e-12)


def test_running_statistics_equal_np_cov_after_every_update():
    rng = np.random.default_rng(3)
    x = (rng.normal(size=(300, 20)) * 5.0 + 100.0).astype(np.float32)  # a large mean: cancellation is the risk
    running, seen = RunningGaussian(), 0
    for size in [1, 1, 5, 64, 3, 130, 96]:
        running.add(x[seen : seen + size])
        seen += size
        assert running.n == seen
        np.testing.assert_allclose(running.mean, x[:seen].astype(np.float64).mean(axis=0), rtol=1e-13)
        if seen >= 2:
            reference = np.cov(x[:seen].astype(np.float64), rowvar=False)
            np.testing.assert_allclose(running.cov, reference, rtol=1e-10, atol=1e-12 * np.abs(reference).max())
            assert running.trace == pytest.approx(np.trace(reference), rel=1e-12)
    batch = gaussian_stats(x)
    np.testing.assert_allclose(running.cov, batch.sigma, rtol=1e-12, atol=1e-12)
    assert batch.n == 300


def test_running_statistics_reject_bad_batches():
    running = RunningGaussian()
    with pytest.raises(InputError, match="at least 2 samples"):
        _ = running.cov
    running.add(np.ones((1, 3)))
    with pytest.raises(InputError, match="4 features per row"):
        running.add(np.ones((2, 4)))
    with pytest.raises(InputError, match="row 1 contains NaN"):
        running.add(np.array([[1.0, 2, 3], [np.nan, 0, 0]]))
    assert running.n == 1  # rejected batches leave the statistics as they were


def test_pytorch_fid_statistics_files(tmp_path):
    stats = gaussian_stats(np.random.default_rng(0).normal(size=(50, 6)))
    path = tmp_path / "stats.npz"
    stats.save(path)
    with np.load(path) as archive:  # the layout pytorch-fid reads: f['mu'], f['sigma']
        np.testing.assert_array_equal(archive["mu"], stats.mu)
        np.testing.assert_array_equal(archive["sigma"], stats.sigma)
    again = GaussianStats.load(path)
    assert frechet_distance(again, stats) == pytest.approx(0.0, abs=1e-10) and again.n is None


@pytest.mark.parametrize("arrays,message", [
    ({"mu": np.zeros(3)}, "expected .npz arrays 'mu' and 'sigma'"),
    ({"mu": np.zeros(3), "sigma": np.eye(4)}, r"expected mu \(d,\) and sigma \(d, d\)"),
    ({"mu": np.zeros(2), "sigma": np.array([[1.0, 0.5], [0.0, 1.0]])}, "not symmetric"),
    ({"mu": np.zeros(2), "sigma": np.diag([1.0, -1.0])}, "negative variances"),
    ({"mu": np.array([0.0, np.nan]), "sigma": np.eye(2)}, "finite"),
])
def test_malformed_statistics_files(tmp_path, arrays, message):
    path = tmp_path / "bad.npz"
    np.savez(path, **arrays)
    with pytest.raises(InputError, match=message) as err:
        GaussianStats.load(path)
    assert err.value.path == path


def test_statistics_file_that_is_not_an_archive(tmp_path):
    path = tmp_path / "junk.npz"
    path.write_bytes(b"not a zip")
    with pytest.raises(InputError, match="junk.npz: cannot read"):
        GaussianStats.load(path)


def test_dimension_mismatch_is_named():
    with pytest.raises(InputError, match="3 dimensions, these reference statistics 2"):
        frechet_distance(gaussian_stats(np.random.default_rng(0).normal(size=(5, 3))),
                         gaussian_stats(np.random.default_rng(1).normal(size=(5, 2))))
