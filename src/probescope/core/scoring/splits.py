"""The published Inception Score protocol, exactly as torch-fidelity computes it.

Shuffle the N images with `np.random.RandomState(seed).permutation(N)` (seed 2020), cut the shuffled order into
S splits `[k*N//S, (k+1)*N//S)`, estimate the marginal p(y) separately in each split, score each split as
exp(mean_i KL(p_i || q_split)), and report the mean and the population std (ddof=0) over splits.

Each split's mean KL is computed as H(q_split) - mean_i H(p_i) (the two are equal exactly, see the seed note), so a
single pass over the rows accumulates per-split sums of p and of sum_y p log p, never holding p for all images.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from probescope.core.errors import InputError
from probescope.core.scoring.distributions import ClassScores, Rows, entropy

DEFAULT_SPLITS = 10
DEFAULT_SEED = 2020


@dataclass(frozen=True)
class SplitScore:
    """The split protocol's result. `scores` holds each split's IS in split order."""

    mean: float
    std: float
    scores: tuple[float, ...]
    n: int
    splits: int
    shuffle: bool
    seed: int | None

    @property
    def protocol(self) -> str:
        order = f"shuffled with RandomState({self.seed}).permutation" if self.shuffle else "in input order"
        return f"{self.splits} splits of N={self.n} {order}, marginal per split, mean and population std (ddof=0)"


def split_order(n: int, shuffle: bool = True, seed: int = DEFAULT_SEED) -> np.ndarray:
    """The order in which images are cut into splits (torch-fidelity's permutation, or the identity)."""
    return np.random.RandomState(seed).permutation(n) if shuffle else np.arange(n)


def split_bounds(n: int, splits: int) -> np.ndarray:
    """Split k covers positions [bounds[k], bounds[k+1]) of the (shuffled) order: bounds[k] = k*n//splits."""
    return np.array([k * n // splits for k in range(splits + 1)], dtype=np.int64)


def split_of_rows(n: int, splits: int, shuffle: bool = True, seed: int = DEFAULT_SEED) -> np.ndarray:
    """For each input row, the split it falls in."""
    check_splits(n, splits)
    position = np.empty(n, dtype=np.int64)
    position[split_order(n, shuffle, seed)] = np.arange(n)
    return np.searchsorted(split_bounds(n, splits)[1:], position, side="right")


def splittable(n: int, splits: int) -> bool:
    """N images can be cut into `splits` splits (each split needs at least one image)."""
    return 1 <= splits <= n


def check_splits(n: int, splits: int) -> None:
    """InputError saying why N images cannot be cut into `splits` splits."""
    if splittable(n, splits):
        return
    if splits < 1:
        raise InputError(f"the number of splits must be at least 1, got {splits}")
    raise InputError(
        f"cannot cut N={n} images into {splits} splits (each split needs at least one image); "
        f"use --splits {n} or fewer, or score more images"
    )


class SplitAccumulator:
    """Per-split sums of p and of sum_y p log p, filled block by block in any order of blocks."""

    def __init__(
        self, n: int, n_classes: int, splits: int = DEFAULT_SPLITS, shuffle: bool = True, seed: int = DEFAULT_SEED
    ):
        self.n, self.splits, self.shuffle, self.seed = n, splits, shuffle, seed
        self._split_id = split_of_rows(n, splits, shuffle, seed)
        self._sum_p = np.zeros((splits, n_classes))
        self._sum_neg_entropy = np.zeros(splits)

    def add(self, start: int, rows: Rows) -> None:
        """Add the rows that are input rows start, start+1, ... (input order, before any shuffle)."""
        ids = self._split_id[start : start + len(rows.neg_entropy)]
        for k in np.unique(ids):  # boolean-mask sums: no BLAS call, whose threads stall on a busy machine
            self._sum_p[k] += rows.p[ids == k].sum(axis=0)
        self._sum_neg_entropy += np.bincount(ids, weights=rows.neg_entropy, minlength=self.splits)

    def result(self) -> SplitScore:
        counts = np.diff(split_bounds(self.n, self.splits)).astype(np.float64)
        per_split = [
            float(np.exp(entropy(self._sum_p[k] / counts[k]) + self._sum_neg_entropy[k] / counts[k]))
            for k in range(self.splits)
        ]
        return SplitScore(
            mean=float(np.mean(per_split)),
            std=float(np.std(per_split)),
            scores=tuple(per_split),
            n=self.n,
            splits=self.splits,
            shuffle=self.shuffle,
            seed=self.seed if self.shuffle else None,
        )


def split_inception_score(
    scores: ClassScores, splits: int = DEFAULT_SPLITS, shuffle: bool = True, seed: int = DEFAULT_SEED
) -> SplitScore:
    """Mean and std of the per-split Inception Scores, matching torch-fidelity's isc_features_to_metric."""
    acc = SplitAccumulator(scores.n_images, scores.n_classes, splits, shuffle, seed)
    for start, rows in scores.blocks():
        acc.add(start, rows)
    return acc.result()
