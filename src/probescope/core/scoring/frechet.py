"""Fréchet Inception Distance: Gaussian fits of two feature sets, running statistics, and the pytorch-fid files.

FID = |mu1 - mu2|^2 + tr S1 + tr S2 - 2 tr (S1^1/2 S2 S1^1/2)^1/2 with mu the mean and S the covariance (ddof 1)
of the features, torch-fidelity 0.4's formulation. torch-fidelity takes the trace term as the sum of the real parts
of the complex square roots of eig(S1 S2), a non-symmetric eigenvalue problem (30 s at d = 2048 on 2 cores). Here
the reference covariance is factored once, S_ref = P L L^T P^T (pivoted Cholesky, which also finds its rank r), and
the eigenvalues of S_ref S are those of the symmetric r x r matrix L^T P^T S P L: real, >= 0 up to rounding and
clipped at 0 (where torch-fidelity's real part of the square root of a tiny negative eigenvalue is 0 as well).
That matrix is the covariance of the whitened features z = L^T P^T x, so a running fit of z gives FID after every
batch for one symmetric eigenvalue problem.

Covariances are float64 Gram matrices of the rows minus the first row (against cancellation), as NumPy's np.cov
computes them (a symmetric rank-k product): float32 products would be 2.5x faster but put ~1e-7 of noise into
eigenvalues that are exactly 0 when N <= d, and the square roots turn that into 1e-4 of FID.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probescope.core.atomic import atomic_open
from probescope.core.errors import InputError
from probescope.core.files import NUMPY_FILE_ERRORS, readable_file, zip_problem

CHUNK_ROWS = 4096  # rows per Gram product in gaussian_stats: bounds the float64 working copy (64 MB at d = 2048)


def read_npz(path: Path, names: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """The arrays of a .npz file (only `names` when given, if present), or InputError naming the file."""
    readable_file(path)
    problem = zip_problem(path)
    if problem:
        raise InputError(f"cannot read as a NumPy .npz file ({problem})", path)
    try:
        loaded = np.load(path, allow_pickle=False)
        if not isinstance(loaded, np.lib.npyio.NpzFile):
            raise InputError("expected a .npz archive of named arrays, found a single .npy array", path)
        with loaded:
            return {name: loaded[name] for name in loaded.files if names is None or name in names}
    except NUMPY_FILE_ERRORS as exc:
        raise InputError(f"cannot read as a NumPy .npz file ({exc})", path) from None


def as_features(features: np.ndarray, what: str = "features", source: str | Path | None = None) -> np.ndarray:
    """A finite, non-empty 2-d numeric array (N samples, d features), or InputError."""
    array = np.asarray(features)
    if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] == 0:
        raise InputError(f"{what} must be a non-empty (N samples, d features) array, got shape {array.shape}", source)
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise InputError(f"{what} must be numeric, got dtype {array.dtype}", source)
    if not np.isfinite(array).all():
        row = int(np.flatnonzero(~np.isfinite(array).all(axis=1))[0])
        raise InputError(f"{what} row {row} contains NaN or inf", source)
    return array


def feature_sets(**sets: np.ndarray) -> list[np.ndarray]:
    """Each named set checked by `as_features` (named '<name> features'), all with the same dimensions."""
    arrays = [as_features(x, f"{name.replace('_', '-')} features") for name, x in sets.items()]
    if len({a.shape[1] for a in arrays}) > 1:
        def listed(items: list[str]) -> str:
            return ", ".join(items[:-1]) + " and " + items[-1]

        names = listed([name.replace("_", "-") for name in sets])
        raise InputError(f"{names} features have {listed([str(a.shape[1]) for a in arrays])} dimensions")
    return arrays


@dataclass(frozen=True)
class GaussianStats:
    """Mean (d,) and covariance (d, d, ddof 1) of a feature set; n is None when read from a mu/sigma file."""

    mu: np.ndarray
    sigma: np.ndarray
    n: int | None = None

    @property
    def dim(self) -> int:
        return int(self.mu.shape[0])

    def save(self, path: str | Path) -> None:
        """The .npz that pytorch-fid and others exchange: arrays 'mu' and 'sigma' (written atomically)."""
        with atomic_open(path, "wb") as fh:
            np.savez_compressed(fh, mu=self.mu, sigma=self.sigma)

    @classmethod
    def load(cls, path: str | Path) -> GaussianStats:
        """Read a pytorch-fid statistics file (arrays 'mu' (d,) and 'sigma' (d, d)), validated."""
        path = Path(path)
        arrays = read_npz(path)
        if not {"mu", "sigma"} <= set(arrays):
            raise InputError("not a FID statistics file: expected .npz arrays 'mu' and 'sigma'", path)
        return cls.checked(arrays["mu"], arrays["sigma"], source=path)

    @classmethod
    def checked(cls, mu: np.ndarray, sigma: np.ndarray, n: int | None = None,
                source: str | Path | None = None) -> GaussianStats:
        mu = np.asarray(mu)
        sigma = np.asarray(sigma)
        if mu.ndim != 1 or sigma.shape != (mu.shape[0], mu.shape[0]) or mu.shape[0] == 0:
            raise InputError(f"statistics: expected mu (d,) and sigma (d, d), got {mu.shape} and {sigma.shape}", source)
        numeric = all(np.issubdtype(a.dtype, np.number) and not np.iscomplexobj(a) for a in (mu, sigma))
        if not numeric or not (np.isfinite(mu).all() and np.isfinite(sigma).all()):
            raise InputError("statistics: mu and sigma must be finite real numbers", source)
        mu, sigma = mu.astype(np.float64), sigma.astype(np.float64)
        scale = max(float(np.abs(sigma).max()), np.finfo(float).tiny)
        if np.abs(sigma - sigma.T).max() > 1e-6 * scale:
            raise InputError("statistics: sigma is not symmetric, so not a covariance matrix", source)
        if (np.diag(sigma) < -1e-9 * scale).any():
            raise InputError("statistics: sigma has negative variances, so not a covariance matrix", source)
        return cls(mu, sigma, n)


class RunningGaussian:
    """Running mean and covariance of rows added in batches: O(batch x d^2) per batch, O(d^2) memory, and the same
    numbers as np.mean / np.cov of all rows so far (to float64 rounding).

    `add` only keeps a batch (and the `transform` to apply to it); batches are folded into the sums, in the order
    added, when a statistic is read (or when more than `MAX_PENDING_ROWS` wait). The window adds a streamed batch in
    its GUI thread and reads the scores from snapshots in workers, so the d^2 work runs there (two rank-64 updates
    of 2048 x 2048 took 90 ms of the GUI thread per batch); `adopt` then takes back what a snapshot folded. Arrays
    are replaced, never written, and kept batches must not change: `copy.copy` of this is a frozen snapshot.
    """

    MAX_PENDING_ROWS = 4096

    def __init__(self) -> None:
        self._n = 0  # rows added, folded or not
        self._dim: int | None = None
        self._shift: np.ndarray | None = None  # the first row: rows are summed as (x - shift) against cancellation
        self._sum: np.ndarray | None = None
        self._gram: np.ndarray | None = None  # sum of (x - shift)(x - shift)^T over the folded rows
        self._pending: tuple = ()  # (rows, transform or None) not folded yet, oldest first
        self._pending_rows = 0
        self._folded_from: tuple | None = None  # (the Gram before, the batches) of the last fold, for `adopt`

    @property
    def n(self) -> int:
        return self._n

    @property
    def dim(self) -> int | None:
        return self._dim

    def add(self, features: np.ndarray, transform: Callable[[np.ndarray], np.ndarray] | None = None) -> None:
        """Add a batch of rows (m, d), as `transform(rows)` when given; an invalid batch leaves the statistics as
        they were."""
        x = as_features(features)
        if self._dim is None:
            self._dim = int(x.shape[1])
        elif x.shape[1] != self._dim:
            raise InputError(f"batch has {x.shape[1]} features per row, the running statistics {self.dim}")
        self._pending += ((x, transform),)
        self._pending_rows += len(x)
        self._n += len(x)
        if self._pending_rows > self.MAX_PENDING_ROWS:
            self._fold()

    def _fold(self) -> None:
        if not self._pending:
            return
        self._folded_from = (self._gram, self._pending)
        for x, transform in self._pending:
            if transform is not None:
                x = transform(x)
            if self._shift is None:
                d = x.shape[1]
                self._shift = x[0].astype(np.float64)
                self._sum, self._gram = np.zeros(d), np.zeros((d, d))
            centred = x.astype(np.float64) - self._shift
            self._sum = self._sum + centred.sum(axis=0)
            self._gram = self._gram + centred.T @ centred  # NumPy sees the transpose of one buffer: a rank-k update
        self._pending, self._pending_rows = (), 0

    def adopt(self, snapshot: RunningGaussian) -> None:
        """Take the sums `snapshot` (a copy of this one) folded, when this one has not folded since it was taken."""
        folded = snapshot._folded_from
        if folded is None or folded[0] is not self._gram:
            return
        batches = folded[1]
        if len(batches) > len(self._pending) or any(a is not b for a, b in zip(batches, self._pending)):
            return
        self._shift, self._sum, self._gram = snapshot._shift, snapshot._sum, snapshot._gram
        self._pending = self._pending[len(batches):]
        self._pending_rows = sum(len(x) for x, _ in self._pending)

    @property
    def mean(self) -> np.ndarray:
        if self._n == 0:
            raise InputError("no samples yet")
        self._fold()
        return self._shift + self._sum / self._n

    @property
    def cov(self) -> np.ndarray:
        """The covariance with ddof 1 (np.cov's), (d, d) float64."""
        if self._n < 2:
            raise InputError(f"a covariance needs at least 2 samples, got {self._n}")
        self._fold()
        centre = self._sum / self._n
        return (self._gram - self._n * np.outer(centre, centre)) / (self._n - 1)

    @property
    def trace(self) -> float:
        """tr(cov) in O(d): the sum of the variances."""
        if self._n < 2:
            raise InputError(f"a covariance needs at least 2 samples, got {self._n}")
        self._fold()
        centre = self._sum / self._n
        return float((np.diag(self._gram) - self._n * centre**2).sum() / (self._n - 1))

    def stats(self) -> GaussianStats:
        return GaussianStats(self.mean, self.cov, self._n)


def gaussian_stats(features: np.ndarray) -> GaussianStats:
    """Mean and covariance (ddof 1) of a feature set, in chunks of rows (float64 working copy of one chunk)."""
    features = as_features(features)
    running = RunningGaussian()
    for start in range(0, len(features), CHUNK_ROWS):
        running.add(features[start : start + CHUNK_ROWS])
    return running.stats()


class FrechetReference:
    """A reference fit prepared for many distances: its covariance factored once (pivoted Cholesky).

    `whiten(x)` maps features to z = L^T P^T x, whose covariance has the eigenvalues of S_ref S. `source` (the
    statistics file or the reference images) is named when features do not fit it.
    """

    def __init__(self, stats: GaussianStats, source: str | Path | None = None):
        from scipy.linalg import lapack  # (scipy: the window and --help import this module)

        self.stats = stats
        self.source = source
        self.trace = float(np.trace(stats.sigma))
        factor, piv, rank, info = lapack.dpstrf(stats.sigma, lower=1)
        if info < 0:
            raise InputError("reference covariance cannot be factored (not a covariance matrix)", source)
        self.rank = int(rank)
        self._perm = piv - 1
        self._square = np.asfortranarray(np.tril(factor))  # P^T S_ref P = L L^T; columns >= rank set to 0 below
        self._square[:, self.rank :] = 0.0
        self._lower = self._square[:, : self.rank]  # L (d, r)

    @property
    def dim(self) -> int:
        return self.stats.dim

    def whiten(self, features: np.ndarray) -> np.ndarray:
        """(m, d) features -> (m, r) float64 z = L^T P^T x."""
        return np.asarray(features, dtype=np.float64)[:, self._perm] @ self._lower

    def whitened_cov(self, sigma: np.ndarray) -> np.ndarray:
        """L^T P^T sigma P L, (r, r)."""
        from scipy.linalg.blas import dtrmm  # (scipy: the window and --help import this module)

        permuted = np.asfortranarray(sigma[np.ix_(self._perm, self._perm)])
        right = dtrmm(1.0, self._square, permuted, side=1, lower=1, overwrite_b=1)  # sigma_p L (triangular product)
        both = dtrmm(1.0, self._square, right, side=0, lower=1, trans_a=1, overwrite_b=1)  # L^T sigma_p L
        return both[: self.rank, : self.rank]

    def distance_from(self, mu: np.ndarray, trace: float, whitened_cov: np.ndarray) -> float:
        """FID from a set's mean, covariance trace and whitened covariance (what running fits keep)."""
        from scipy.linalg import eigh  # (scipy: the window and --help import this module)

        diff = mu - self.stats.mu
        eigenvalues = eigh(whitened_cov, eigvals_only=True, check_finite=False)
        covmean_trace = float(np.sqrt(np.clip(eigenvalues, 0.0, None)).sum())
        return float(diff @ diff + trace + self.trace - 2.0 * covmean_trace)

    def distance(self, stats: GaussianStats) -> float:
        """FID between `stats` and the reference."""
        self.check_dim(stats.dim)
        return self.distance_from(stats.mu, float(np.trace(stats.sigma)), self.whitened_cov(stats.sigma))

    def check_dim(self, dim: int) -> None:
        if dim != self.dim:
            raise InputError(f"features have {dim} dimensions, these reference statistics {self.dim}: "
                             "were they made with another classifier?", self.source)


def frechet_distance(a: GaussianStats, b: GaussianStats) -> float:
    """FID between two Gaussian fits (torch-fidelity's fid_statistics_to_metric, same number)."""
    return FrechetReference(b).distance(a)
