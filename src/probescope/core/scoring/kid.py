"""Kernel Inception Distance: the unbiased MMD^2 with a polynomial kernel, by torch-fidelity 0.4's subset protocol
and as a running estimate over all samples seen so far.

k(x, y) = (gamma x.y + coef0)^degree with degree 3, gamma = 1/d, coef0 = 1. With the within-set sums taken off the
diagonal, MMD^2_u = sum_{i!=j} k(x_i, x_j) / (n(n-1)) + sum_{i!=j} k(y_i, y_j) / (m(m-1)) - 2 sum_ij k(x_i, y_j) / (nm)
(torch-fidelity's mmd2 'unbiased' when n = m). The protocol: 100 subsets of 1,000 samples drawn without
replacement, each draw first from the generated set then from the real one with one np.random.RandomState(2020);
the mean and the population std over subsets.

Everything is float64: torch-fidelity computes in the dtype of the features it gets, float32 from its extractor,
which moves its KID by ~1e-5 relative (a difference of large sums); given float64 features it gives our numbers.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from probescope.core.errors import InputError
from probescope.core.scoring.frechet import as_features
from probescope.core.scoring.splits import DEFAULT_SEED

DEFAULT_SUBSETS = 100
DEFAULT_SUBSET_SIZE = 1000
DEGREE = 3
COEF0 = 1.0


@dataclass(frozen=True)
class PolynomialKernel:
    """(gamma x.y + coef0)^degree; gamma None means 1/d."""

    degree: int = DEGREE
    gamma: float | None = None
    coef0: float = COEF0

    def __call__(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        gamma = 1.0 / x.shape[1] if self.gamma is None else self.gamma
        return (x @ y.T * gamma + self.coef0) ** self.degree


@dataclass(frozen=True)
class KernelDistance:
    """KID by the subset protocol: mean and population std of the subsets' MMD^2 (each value kept)."""

    mean: float
    std: float
    values: tuple[float, ...]
    subsets: int
    subset_size: int
    seed: int

    @property
    def protocol(self) -> str:
        return (f"{self.subsets} subsets of {self.subset_size} per set (RandomState({self.seed}), generated first), "
                "unbiased MMD^2, polynomial kernel (x.y/d + 1)^3, mean and population std")


def mmd2_unbiased(x: np.ndarray, y: np.ndarray, kernel: PolynomialKernel = PolynomialKernel()) -> float:
    """Unbiased MMD^2 between two sets (n, m >= 2), float64."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    n, m = len(x), len(y)
    if n < 2 or m < 2:
        raise InputError(f"the unbiased MMD needs at least 2 samples per set, got {n} and {m}")
    k_xx, k_yy = kernel(x, x), kernel(y, y)
    within_x = (k_xx.sum() - np.trace(k_xx)) / (n * (n - 1))
    within_y = (k_yy.sum() - np.trace(k_yy)) / (m * (m - 1))
    return float(within_x + within_y - 2.0 * kernel(x, y).sum() / (n * m))


def check_kid_protocol(n_generated: int | None, n_real: int | None, subsets: int, subset_size: int) -> None:
    """InputError unless each set has `subset_size` samples (None: not known yet) and the protocol is valid."""
    if subsets < 1 or subset_size < 2:
        raise InputError(f"KID needs at least 1 subset of at least 2 samples, got {subsets} of {subset_size}")
    known = {what: n for what, n in (("generated", n_generated), ("reference", n_real)) if n is not None}
    if known and min(known.values()) < subset_size:
        counts = " and ".join(f"{n} {what}" for what, n in known.items())
        raise InputError(f"KID subsets of {subset_size} need at least {subset_size} samples in each set, got "
                         f"{counts}: use a subset size of {min(known.values())} or fewer, or more samples")


def kernel_inception_distance(
    generated: np.ndarray,
    real: np.ndarray,
    subsets: int = DEFAULT_SUBSETS,
    subset_size: int = DEFAULT_SUBSET_SIZE,
    seed: int = DEFAULT_SEED,
    kernel: PolynomialKernel = PolynomialKernel(),
) -> KernelDistance:
    """KID of `generated` against `real` features, matching torch-fidelity's kid_features_to_metric."""
    generated, real = as_features(generated, "generated features"), as_features(real, "reference features")
    if generated.shape[1] != real.shape[1]:
        raise InputError(f"generated features have {generated.shape[1]} dimensions, the reference {real.shape[1]}")
    check_kid_protocol(len(generated), len(real), subsets, subset_size)
    rng = np.random.RandomState(seed)
    values = []
    for _ in range(subsets):
        x = generated[rng.choice(len(generated), subset_size, replace=False)]
        y = real[rng.choice(len(real), subset_size, replace=False)]
        values.append(mmd2_unbiased(x, y, kernel))
    return KernelDistance(float(np.mean(values)), float(np.std(values)), tuple(values), subsets, subset_size, seed)


class RunningKernelDistance:
    """Unbiased MMD^2 between all generated samples so far and a fixed reference set, updated per batch.

    The caller keeps the generated rows (`GrowingRows`) and passes those seen before each batch; an update of m
    samples costs O(m (N + M) d) for N samples so far and M reference samples (the kernel rows of the new samples
    against both), reading the value O(1). It uses every pair, so it has a lower variance than the subset
    protocol's and is a different number from its mean: front ends label them apart.
    """

    def __init__(self, reference: np.ndarray, kernel: PolynomialKernel = PolynomialKernel()):
        self.reference = np.asarray(as_features(reference, "reference features"), dtype=np.float64)
        if len(self.reference) < 2:
            raise InputError("the running KID needs at least 2 reference samples")
        self.kernel = kernel
        k = kernel(self.reference, self.reference)
        m = len(self.reference)
        self._within_reference = (k.sum() - np.trace(k)) / (m * (m - 1))
        self._n = 0
        self._within = 0.0  # sum over generated pairs i != j
        self._cross = 0.0  # sum over generated x reference pairs

    @property
    def n(self) -> int:
        return self._n

    def add(self, batch: np.ndarray, before: np.ndarray) -> None:
        """Add a batch of generated features; `before` holds the generated rows added until now, in order."""
        x = np.asarray(as_features(batch), dtype=np.float64)
        if x.shape[1] != self.reference.shape[1]:
            raise InputError(f"batch has {x.shape[1]} features per row, the reference {self.reference.shape[1]}")
        if len(before) != self._n:
            raise ValueError(f"{len(before)} earlier rows passed, {self._n} were added")
        k_new = self.kernel(x, x)
        earlier = 2.0 * self.kernel(x, np.asarray(before, dtype=np.float64)).sum() if self._n else 0.0
        self._within += earlier + k_new.sum() - np.trace(k_new)
        self._cross += self.kernel(x, self.reference).sum()
        self._n += len(x)

    @property
    def value(self) -> float:
        """MMD^2_u of the samples so far against the reference (needs at least 2 samples)."""
        n, m = self._n, len(self.reference)
        if n < 2:
            raise InputError(f"the running KID needs at least 2 generated samples, got {n}")
        return float(self._within / (n * (n - 1)) + self._within_reference - 2.0 * self._cross / (n * m))
