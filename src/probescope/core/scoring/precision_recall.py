"""Improved precision and recall (Kynkäänniemi et al. 2019), as torch-fidelity 0.4 computes them.

Each sample's radius is the distance to its k-th nearest neighbour within its own set, itself excluded (the
(k+1)-th smallest distance with itself at 0; k = 3). Precision is the share of generated samples inside some real
sample's ball (fidelity), recall the share of real samples inside some generated sample's ball (coverage).

Distances are Euclidean in float64, |x|^2 + |y|^2 - 2 x.y clipped at 0, in blocks of rows so memory stays bounded;
torch-fidelity uses torch.cdist in the features' dtype (float32 from its extractor), where a ball boundary within
float32 rounding of a sample can flip it. torch-fidelity's default features for PRC are VGG16's; these functions
take whatever features they are given, and outputs say which.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from probescope.core.errors import InputError
from probescope.core.scoring.frechet import as_features
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report

DEFAULT_K = 3
BLOCK_BYTES = 64 * 2**20  # float64 distances per block of rows


@dataclass(frozen=True)
class PrecisionRecall:
    precision: float
    recall: float
    k: int

    @property
    def f_score(self) -> float:
        """2PR / (P + R), with torch-fidelity's floor of 1e-5 on the denominator."""
        return 2.0 * self.precision * self.recall / max(1e-5, self.precision + self.recall)


def distance_blocks(a: np.ndarray, b: np.ndarray) -> Iterator[tuple[int, np.ndarray]]:
    """(first row, Euclidean distances of a block of rows of `a` to all of `b`), float64."""
    b64 = np.asarray(b, dtype=np.float64)
    b_sq = np.einsum("ij,ij->i", b64, b64)
    rows = max(1, BLOCK_BYTES // (8 * max(1, len(b))))
    for start in range(0, len(a), rows):
        block = np.asarray(a[start : start + rows], dtype=np.float64)
        sq = np.einsum("ij,ij->i", block, block)[:, None] + b_sq[None, :] - 2.0 * (block @ b64.T)
        yield start, np.sqrt(np.maximum(sq, 0.0, out=sq), out=sq)


def knn_radii(features: np.ndarray, k: int = DEFAULT_K) -> np.ndarray:
    """Each sample's distance to its k-th nearest other sample of the same set, (N,) float64."""
    return knn_radii_of(features, (k,))[k]


def knn_radii_of(features: np.ndarray, ks: tuple[int, ...], *, progress: ProgressCallback | None = None,
                 cancel: CancelCheck | None = None) -> dict[int, np.ndarray]:
    """`knn_radii` for several k from one pass over the distances (the pass is the cost: O(N^2 d), 4.5 CPU minutes
    at 50,000 x 2048-d)."""
    features = as_features(features)
    if min(ks) < 1:
        raise InputError(f"the neighbourhood size k must be at least 1, got {min(ks)}")
    if len(features) <= max(ks):
        raise InputError(f"k = {max(ks)} nearest neighbours need at least {max(ks) + 1} samples per set, got "
                         f"{len(features)}")
    ks = tuple(sorted(set(ks)))
    radii = np.empty((len(ks), len(features)))
    for start, dist in distance_blocks(features, features):
        check_cancel(cancel)
        radii[:, start : start + len(dist)] = np.partition(dist, ks, axis=1)[:, list(ks)].T
        report(progress, (start + len(dist)) / len(features), f"neighbourhoods: {start + len(dist)}/{len(features)}")
    return dict(zip(ks, radii))


def share_inside(samples: np.ndarray, centres: np.ndarray, radii: np.ndarray) -> float:
    """The share of `samples` within distance radii[j] of some centre j (boundary included)."""
    inside = 0
    for _, dist in distance_blocks(samples, centres):
        inside += int((dist <= radii[None, :]).any(axis=1).sum())
    return inside / len(samples)


def precision_recall(
    generated: np.ndarray,
    real: np.ndarray,
    k: int = DEFAULT_K,
    *,
    real_radii: np.ndarray | None = None,
    generated_radii: np.ndarray | None = None,
) -> PrecisionRecall:
    """Precision and recall of `generated` against `real` features (radii may be passed when already known)."""
    generated, real = as_features(generated, "generated features"), as_features(real, "reference features")
    if generated.shape[1] != real.shape[1]:
        raise InputError(f"generated features have {generated.shape[1]} dimensions, the reference {real.shape[1]}")
    real_radii = knn_radii(real, k) if real_radii is None else real_radii
    generated_radii = knn_radii(generated, k) if generated_radii is None else generated_radii
    return PrecisionRecall(share_inside(generated, real, real_radii), share_inside(real, generated, generated_radii), k)
