"""Infinite-N limits of FID and IS (Chong & Forsyth, CVPR 2020, "Effectively unbiased FID and Inception Score").

Both scores computed on N samples are biased, with a leading term linear in 1/N. Their protocol: evaluate the
score on random subsets of several sizes (15 sizes spread evenly from 5,000 to the N available; a fresh random
subset for each size), fit a line value = intercept + slope / N by least squares, and report the intercept as the
N -> infinity value (FID_inf, IS_inf). IS here is one score over the whole subset (no splits), as in their code;
FID is each subset's fit against the full reference statistics. The subsets come from np.random.RandomState(seed)
(their code shuffles with NumPy's global generator), so a run can be repeated.

For fewer samples than their range assumes, the smallest subset is min(smallest, N // 2): a wide enough range of
1/N for the fit, stated in the result. The fit (the points and the line) is returned so front ends can draw it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from probescope.core.errors import InputError
from probescope.core.scoring.distributions import ClassScores, entropy
from probescope.core.scoring.frechet import FrechetReference, RunningGaussian, as_features
from probescope.core.scoring.splits import DEFAULT_SEED

DEFAULT_POINTS = 15
DEFAULT_SMALLEST = 5000


@dataclass(frozen=True)
class InfiniteNFit:
    """Score values at subset sizes N and the least-squares line value = intercept + slope / N."""

    metric: str  # 'FID' or 'IS'
    sizes: np.ndarray  # (k,) int subset sizes
    values: np.ndarray  # (k,) the score on a random subset of each size
    intercept: float  # the extrapolated value at N = infinity
    slope: float

    def predict(self, n: float | np.ndarray) -> float | np.ndarray:
        """The fitted line at sample size n (np.inf gives the intercept)."""
        return self.intercept + self.slope / np.asarray(n, dtype=np.float64)

    @property
    def protocol(self) -> str:
        return (f"{self.metric} on random subsets of {len(self.sizes)} sizes from {self.sizes[0]} to {self.sizes[-1]},"
                " least-squares line against 1/N, intercept at 1/N = 0 (Chong & Forsyth 2020)")

    def to_dict(self) -> dict:
        return {"sizes": [int(n) for n in self.sizes], "values": [float(v) for v in self.values],
                "intercept": self.intercept, "slope": self.slope, "protocol": self.protocol}


def fit_inverse_n(metric: str, sizes: np.ndarray, values: np.ndarray) -> InfiniteNFit:
    """Least-squares fit of values against 1/sizes (at least two distinct sizes)."""
    sizes = np.asarray(sizes, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    if len(np.unique(sizes)) < 2 or len(sizes) != len(values):
        raise InputError(f"an infinite-N fit needs values at two or more sample sizes, got sizes {sizes.tolist()}")
    slope, intercept = np.polyfit(1.0 / sizes, values, 1)
    return InfiniteNFit(metric, sizes, values, float(intercept), float(slope))


def subset_sizes(n: int, points: int = DEFAULT_POINTS, smallest: int = DEFAULT_SMALLEST,
                 minimum: int = 2) -> np.ndarray:
    """Their sizes np.linspace(smallest, n, points) as int32, with smallest lowered to n // 2 for small n."""
    lowest = max(min(smallest, n // 2), minimum)
    if points < 2 or n < max(lowest + 1, minimum):
        raise InputError(f"an infinite-N fit needs at least 2 subset sizes and more than {lowest} samples, "
                         f"got {points} sizes and N={n}")
    return np.unique(np.linspace(lowest, n, points).astype(np.int32)).astype(np.int64)


def extrapolate(metric: str, score: Callable[[np.ndarray], float], n: int, points: int = DEFAULT_POINTS,
                smallest: int = DEFAULT_SMALLEST, seed: int = DEFAULT_SEED, minimum: int = 2) -> InfiniteNFit:
    """score(indices of a random subset) at each subset size, then the 1/N fit."""
    sizes = subset_sizes(n, points, smallest, minimum)
    rng = np.random.RandomState(seed)
    values = [score(np.sort(rng.permutation(n)[:size])) for size in sizes]
    return fit_inverse_n(metric, sizes, np.array(values))


def fid_infinity(features: np.ndarray, reference: FrechetReference, points: int = DEFAULT_POINTS,
                 smallest: int = DEFAULT_SMALLEST, seed: int = DEFAULT_SEED) -> InfiniteNFit:
    """FID_inf of generated `features` against the reference fit.

    The features are whitened once (z = L^T P^T x), so each subset costs the Gram matrices of its rows and one
    symmetric eigenvalue problem, never a covariance product with the reference.
    """
    features = as_features(features)
    reference.check_dim(features.shape[1])
    whitened = reference.whiten(features)

    def score(rows: np.ndarray) -> float:
        subset = np.asarray(features[rows], dtype=np.float64)
        white = RunningGaussian()
        white.add(whitened[rows])
        return reference.distance_from(subset.mean(axis=0), float(subset.var(axis=0, ddof=1).sum()), white.cov)

    return extrapolate("FID", score, len(features), points, smallest, seed)


def is_infinity(scores: ClassScores, points: int = DEFAULT_POINTS, smallest: int = DEFAULT_SMALLEST,
                seed: int = DEFAULT_SEED) -> InfiniteNFit:
    """IS_inf of a set of logits or probabilities: IS of each random subset with one marginal (no splits)."""
    n = scores.n_images
    sizes = subset_sizes(n, points, smallest, minimum=1)
    rng = np.random.RandomState(seed)
    member = np.zeros((len(sizes), n))
    for k, size in enumerate(sizes):
        member[k, rng.permutation(n)[:size]] = 1.0
    sum_p = np.zeros((len(sizes), scores.n_classes))
    sum_neg_entropy = np.zeros(len(sizes))
    for start, rows in scores.blocks():  # one pass over the rows for all subsets
        block = member[:, start : start + len(rows.neg_entropy)]
        sum_p += block @ rows.p
        sum_neg_entropy += block @ rows.neg_entropy
    values = [np.exp(max(entropy(sum_p[k] / size) + sum_neg_entropy[k] / size, 0.0)) for k, size in enumerate(sizes)]
    return fit_inverse_n("IS", sizes, np.array(values))
