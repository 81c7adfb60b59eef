"""The Vendi score (Friedman & Dieng 2023, "The Vendi Score: A Diversity Evaluation Metric for Machine Learning").

VS = exp(-sum_i l_i log l_i), l the eigenvalues of K/n for the cosine-similarity kernel K_ij = x_i.x_j / (|x_i||x_j|)
(K_ii = 1, so the l sum to 1): the exponential of the Shannon entropy of K/n's spectrum, the "effective number of
distinct samples": 1 for n copies of one sample, n for n mutually orthogonal ones. The nonzero eigenvalues of
K/n = X X^T/n (rows of X normalised) are those of X^T X/n, d x d: that Gram matrix is summed over blocks of rows, so
50,000 x 2048 features never need an n x n matrix (the n x n one is used when n < d, the smaller of the two).
The same computation as vendi_score 0.0.3's `score_dual(X)` (its `normalize=True`: cosine similarity).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from probescope.core.errors import InputError
from probescope.core.scoring.frechet import as_features
from probescope.core.scoring.report import shown
from probescope.core.tasks import CancelCheck, check_cancel

KERNEL = "cosine"
BLOCK_ROWS = 8192


@dataclass(frozen=True)
class VendiScores:
    """The Vendi score of the samples and, for comparison, of the reference (None without one)."""

    samples: float
    reference: float | None = None
    features: str = ""
    kernel: str = KERNEL

    def to_dict(self) -> dict[str, object]:
        return {"vendi_score": self.samples, "vendi_score_reference": self.reference, "vendi_kernel": self.kernel,
                "vendi_features": self.features}

    def summary(self) -> str:
        ref = f" (reference {shown(self.reference, 2)})" if self.reference is not None else ""
        return (f"Vendi score: {shown(self.samples, 2)}{ref}   (Friedman & Dieng 2023, {self.kernel} kernel on the "
                "features: effective number of distinct samples; 1 = all alike)")


def cosine_spectrum(features: np.ndarray, *, cancel: CancelCheck | None = None) -> np.ndarray:
    """The eigenvalues of K/n for the cosine kernel of `features` (n, d), the min(n, d) largest, float64, >= 0."""
    x = as_features(features)
    n, d = x.shape
    norms = np.sqrt(np.einsum("ij,ij->i", x, x, dtype=np.float64))
    if not np.all(norms > 0):
        raise InputError(f"{int(np.sum(norms == 0))} of {n} feature vectors are zero: the cosine kernel needs "
                         "nonzero features")
    if n <= d:
        unit = np.asarray(x, dtype=np.float64) / norms[:, None]
        gram = unit @ unit.T
    else:
        gram = np.zeros((d, d))
        for start in range(0, n, BLOCK_ROWS):
            check_cancel(cancel)
            block = np.asarray(x[start : start + BLOCK_ROWS], dtype=np.float64) / norms[start : start + BLOCK_ROWS,
                                                                                        None]
            gram += block.T @ block
    return np.clip(np.linalg.eigvalsh(gram / n), 0.0, None)


def vendi_score(features: np.ndarray, *, cancel: CancelCheck | None = None) -> float:
    """exp of the Shannon entropy (nats) of the cosine kernel's normalised spectrum: between 1 and min(n, d)."""
    spectrum = cosine_spectrum(features, cancel=cancel)
    p = spectrum[spectrum > 0]
    return float(np.exp(-np.sum(p * np.log(p))))


def vendi_scores(samples: np.ndarray, reference: np.ndarray | None = None, *, features: str = "",
                 cancel: CancelCheck | None = None) -> VendiScores:
    """The samples' Vendi score and the reference's (when given)."""
    ref = None if reference is None else vendi_score(reference, cancel=cancel)
    return VendiScores(vendi_score(samples, cancel=cancel), ref, features)
