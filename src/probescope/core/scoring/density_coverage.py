"""Density and coverage (Naeem et al., ICML 2020, "Reliable Fidelity and Diversity Metrics for Generative Models").

With N real features X_i, M generated features Y_j and r_i the distance of X_i to its k-th nearest other real
feature (itself excluded: precision/recall's radii, `knn_radii`):

    density  = 1/(kM) * sum_j sum_i 1[|Y_j - X_i| < r_i]        (expected 1 when Y and X come from one distribution)
    coverage = 1/N * sum_i 1[min_j |Y_j - X_i| < r_i]            (share of real samples with a generated one nearby)

The balls are open (strict <), as in the authors' code (prdc 0.2's compute_prdc), so a set of copies of the reals
scores density 1, not (k+1)/k; improved precision/recall (precision_recall.py) keeps torch-fidelity's closed balls.
Distances are precision/recall's (`distance_blocks`: Euclidean, float64, blocks of generated rows against all
reals, so memory stays bounded). The paper's k is 5 (`DEFAULT_K`), with k-NN balls of the reals only: unlike
precision/recall, no generated sample's ball enters, so outliers among the samples cannot inflate them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from probescope.core.errors import InputError
from probescope.core.scoring.frechet import as_features
from probescope.core.scoring.precision_recall import distance_blocks, knn_radii
from probescope.core.scoring.report import shown
from probescope.core.tasks import CancelCheck, check_cancel

DEFAULT_K = 5  # the paper's (and prdc's README) k


@dataclass(frozen=True)
class DensityCoverage:
    density: float
    coverage: float
    k: int
    features: str = ""

    def to_dict(self) -> dict[str, object]:
        # "coverage" is already the class-coverage table of the --fid report: this one is named after the paper
        return {"density": self.density, "nn_coverage": self.coverage, "density_coverage_k": self.k,
                "density_coverage_features": self.features}

    def summary(self) -> str:
        return (f"density {shown(self.density)}, coverage {shown(self.coverage)}   (Naeem et al. 2020, k={self.k} "
                "nearest real neighbours; density ~1 and coverage ~1 for samples like the reference: density > 1 "
                "crowds dense real regions, coverage < 1 leaves real regions empty)")


def density_coverage(generated: np.ndarray, real: np.ndarray, k: int = DEFAULT_K, *,
                     real_radii: np.ndarray | None = None, features: str = "",
                     cancel: CancelCheck | None = None) -> DensityCoverage:
    """Density and coverage of `generated` against `real` features (the reals' k-NN radii may be passed when already
    known, e.g. a reference's cached `radii(k)`)."""
    generated, real = as_features(generated, "generated features"), as_features(real, "reference features")
    if generated.shape[1] != real.shape[1]:
        raise InputError(f"generated features have {generated.shape[1]} dimensions, the reference {real.shape[1]}")
    radii = knn_radii(real, k) if real_radii is None else np.asarray(real_radii, dtype=np.float64)
    if radii.shape != (len(real),):
        raise InputError(f"{len(radii)} radii for {len(real)} reference features")
    inside = 0
    covered = np.zeros(len(real), dtype=bool)
    for _, dist in distance_blocks(generated, real):  # rows: generated samples, columns: reals
        check_cancel(cancel)
        within = dist < radii[None, :]
        inside += int(within.sum())
        covered |= within.any(axis=0)
    return DensityCoverage(inside / (k * len(generated)), float(covered.mean()), k, features)
