"""Each generated sample against the reference set: its realism score, its nearest real images, and whether it may
be a copy of one of them. Same features and same k as precision and recall (precision_recall.py).

- Realism (Kynkäänniemi et al. 2019, section 5): R(g) = max_j r_j / |g - r_j|, with r_j reference image j's k-NN
  radius, over the reference images whose radius is at most the median radius (the paper drops the half of the
  hyperspheres with the largest radii, so that a real outlier's wide ball does not vouch for whatever lies near it).
  R >= 1 when g lies inside a kept ball. The denominator is |g - r_j| + 1e-5, so an exact copy gives a large finite
  score. The authors' code (ManifoldEstimator with clamp_to_percentile=50) works on squared distances, so its scores
  are the squares of these (same order, same threshold 1).
- Nearest: the k reference images closest to g, nearest first (ties by reference index), with their distances.
- Possible copy: the calibrated copy test (copy_test.py), given its calibration on held-out real images: g's
  distance to its nearest reference image (among those the calibration searched) against the held-out images'.
  `copied` names that nearest image when g is flagged.

One pass over blocks of the sample-by-reference distances (float64, as precision and recall compute them).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from probescope.core.errors import InputError
from probescope.core.scoring.copy_test import Calibration, CopyTest
from probescope.core.scoring.frechet import as_features
from probescope.core.scoring.precision_recall import DEFAULT_K, distance_blocks, knn_radii
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report

REALISM_EPS = 1e-5
KEPT_PERCENTILE = 50.0  # reference balls with a radius above this percentile are dropped from the realism score


@dataclass(frozen=True)
class SampleNeighbours:
    """Per generated sample (rows in input order): realism, the k nearest reference images and the copy test
    (None without a calibration)."""

    realism: np.ndarray  # (N,) float64
    nearest: np.ndarray  # (N, k) int64 reference indices, nearest first
    distances: np.ndarray  # (N, k) float64
    k: int
    copy: CopyTest | None = None

    @property
    def possible_copy(self) -> np.ndarray:
        """(N,) bool: flagged by the copy test (all False without one)."""
        return self.copy.flagged if self.copy is not None else np.zeros(len(self.realism), bool)

    @property
    def copied(self) -> np.ndarray:
        """(N,) int64: the reference image a flagged sample is nearest to, -1 when not flagged."""
        if self.copy is None:
            return np.full(len(self.realism), -1, np.int64)
        return np.where(self.copy.flagged, self.copy.nearest, -1)

    @property
    def copies(self) -> int:
        return int(self.possible_copy.sum())

    def joined(self, more: SampleNeighbours) -> SampleNeighbours:
        """These samples followed by `more`'s (the same reference and calibration)."""
        copy = self.copy.joined(more.copy) if self.copy is not None and more.copy is not None else None
        return SampleNeighbours(np.concatenate([self.realism, more.realism]),
                                np.concatenate([self.nearest, more.nearest]),
                                np.concatenate([self.distances, more.distances]), self.k, copy)


def realism_radii(radii: np.ndarray) -> np.ndarray:
    """The k-NN radii the realism score uses: those above the median set to 0 (they then never win the maximum)."""
    radii = np.asarray(radii, dtype=np.float64)
    return np.where(radii <= np.percentile(radii, KEPT_PERCENTILE), radii, 0.0)


def sample_neighbours(generated: np.ndarray, real: np.ndarray, k: int = DEFAULT_K, *,
                      real_radii: np.ndarray | None = None, calibration: Calibration | None = None,
                      features: str = "", progress: ProgressCallback | None = None,
                      cancel: CancelCheck | None = None) -> SampleNeighbours:
    """Realism, nearest reference images and (with a `calibration`) the copy test of `generated` against `real`
    features. `real_radii` (the references' k-NN radii) may be passed when known (a ReferenceSet caches them:
    `reference.radii(k)`)."""
    generated, real = as_features(generated, "generated features"), as_features(real, "reference features")
    if generated.shape[1] != real.shape[1]:
        raise InputError(f"generated features have {generated.shape[1]} dimensions, the reference {real.shape[1]}")
    if not 1 <= k < len(real):
        raise InputError(f"k = {k} nearest reference images need 1 <= k < {len(real)} (the reference's size)")
    radii = realism_radii(knn_radii(real, k) if real_radii is None else real_radii)
    if radii.shape != (len(real),):
        raise InputError(f"reference radii must hold one value per reference image ({len(real)})")
    kept = np.flatnonzero(radii > 0)
    kept_radii = radii[kept]
    searched = None if calibration is None else calibration.searched
    n = len(generated)
    realism = np.zeros(n)
    nearest = np.empty((n, k), np.int64)
    distances = np.empty((n, k))
    copy_distance = np.empty(n)
    copy_nearest = np.empty(n, np.int64)
    for start, dist in distance_blocks(generated, real):
        check_cancel(cancel)
        rows = slice(start, start + len(dist))
        if len(kept):
            realism[rows] = (kept_radii / (dist[:, kept] + REALISM_EPS)).max(axis=1)
        nearest[rows] = _k_smallest(dist, k)
        distances[rows] = np.take_along_axis(dist, nearest[rows], axis=1)
        if searched is None:
            copy_nearest[rows], copy_distance[rows] = nearest[rows, 0], distances[rows, 0]
        else:
            among = dist[:, searched]
            closest = among.argmin(axis=1)
            copy_nearest[rows] = searched[closest]
            copy_distance[rows] = among[np.arange(len(dist)), closest]
        report(progress, (start + len(dist)) / n, f"nearest reference images: {start + len(dist)}/{n} samples")
    copy = None if calibration is None else calibration.test(copy_distance, copy_nearest, features)
    return SampleNeighbours(realism, nearest, distances, k, copy)


def _k_smallest(dist: np.ndarray, k: int) -> np.ndarray:
    """Per row, the indices of the k smallest values in order of (value, index): an argpartition, with rows where
    the k-th value has unchosen equals (duplicate reference images) redone by index order."""
    top = np.argpartition(dist, k - 1, axis=1)[:, :k]
    top_dist = np.take_along_axis(dist, top, axis=1)
    kth = top_dist.max(axis=1)
    tied = np.flatnonzero((dist == kth[:, None]).sum(axis=1) > (top_dist == kth[:, None]).sum(axis=1))
    for r in tied:
        below = np.flatnonzero(dist[r] < kth[r])
        top[r] = np.concatenate([below, np.flatnonzero(dist[r] == kth[r])[:k - len(below)]])
    top_dist = np.take_along_axis(dist, top, axis=1)
    return np.take_along_axis(top, np.lexsort((top, top_dist), axis=1), axis=1)
