"""CMMD (Jayasumana et al., CVPR 2024, "Rethinking FID: Towards a Better Evaluation Metric for Image Generation").

With m generated embeddings x_i and n reference embeddings y_j, each scaled to unit length (CLIP image embeddings
in the paper: ViT-L/14 at 336 px), and the Gaussian RBF kernel k(a, b) = exp(-|a - b|^2 / (2 sigma^2)), sigma = 10:

    MMD^2_u = 1/(m(m-1)) sum_{i!=j} k(x_i, x_j) + 1/(n(n-1)) sum_{i!=j} k(y_i, y_j) - 2/(mn) sum_{i,j} k(x_i, y_j)
    CMMD    = 1000 * MMD^2_u

the paper's unbiased estimator: its expectation is 0 when both sets come from one distribution, so a value can be a
little negative. google-research/cmmd's distance.py instead averages the full kernel matrices, diagonal (k = 1)
included: "the minimum-variance/biased version" (a V-statistic), in JAX's float32. Exactly,

    biased = unbiased + 1000 * ((1 - mean_{i!=j} k(x_i, x_j)) / m + (1 - mean_{i!=j} k(y_i, y_j)) / n)

never smaller, by O(1/m + 1/n): at most 1000 (1 - exp(-4/200)) (1/m + 1/n) ~ 19.8 (1/m + 1/n) on unit vectors.
`estimator="biased"` computes that V-statistic (in float64) to compare with numbers from that code.

Rows are normalised here (an all-zero row has no direction and is refused), so embeddings may come in at any scale.
Everything is float64, summed over blocks of rows so that no m x n matrix is ever held whole (memory stays at
`BLOCK_BYTES` per block). With unit rows the kernel lies in [exp(-4/200), 1]: the sums are kept as sums of k - 1
(np.expm1), which cancel the three terms' 1s exactly and leave the small MMD^2 without their rounding.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from probescope.core.errors import InputError
from probescope.core.scoring.frechet import as_features
from probescope.core.scoring.report import shown
from probescope.core.tasks import CancelCheck, check_cancel

SIGMA = 10.0  # the paper's (and distance.py's) RBF bandwidth
SCALE = 1000.0  # the paper's scale factor, "for readability"
ESTIMATORS = ("unbiased", "biased")
BLOCK_BYTES = 64 * 2**20  # float64 squared distances per block of rows


@dataclass(frozen=True)
class Cmmd:
    """CMMD (x1000 MMD^2) of m generated against n reference embeddings, by `estimator` ("unbiased" or "biased")."""

    value: float
    m: int
    n: int
    estimator: str
    features: str = ""

    def to_dict(self) -> dict[str, object]:
        return {"cmmd": self.value, "cmmd_estimator": self.estimator, "cmmd_features": self.features}

    def summary(self) -> str:
        embeddings = f"{self.features} embeddings" if self.features else "CLIP embeddings"
        return (f"CMMD: {shown(self.value)}   (Jayasumana et al. 2024, x{SCALE:g} {self.estimator} MMD^2, Gaussian "
                f"RBF sigma {SIGMA:g} on unit-norm {embeddings} of {self.m} samples vs {self.n} reference images; "
                "0 = same distribution)")


def unit_rows(features: np.ndarray, what: str) -> np.ndarray:
    """`features` as float64 rows of length 1; an all-zero row is an InputError naming `what` and the row."""
    x = np.array(as_features(features, what), dtype=np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", x, x))
    zero = np.flatnonzero(norms == 0)
    if len(zero):
        raise InputError(f"{what} row {int(zero[0])} is all zero: CMMD normalises embeddings to unit length and a "
                         "zero vector has no direction")
    x /= norms[:, None]
    return x


def block_rows(columns: int) -> int:
    """Rows per block so that a block's float64 squared distances to `columns` columns fit `BLOCK_BYTES`."""
    return max(1, BLOCK_BYTES // (8 * max(1, columns)))


def kernel_minus_one(a: np.ndarray, a_sq: np.ndarray, b: np.ndarray, b_sq: np.ndarray) -> np.ndarray:
    """k(a_i, b_j) - 1 for all i, j (squared distances |a|^2 + |b|^2 - 2 a.b, clipped at 0)."""
    sq = a_sq[:, None] + b_sq[None, :] - 2.0 * (a @ b.T)
    np.maximum(sq, 0.0, out=sq)
    return np.expm1(sq * (-1.0 / (2.0 * SIGMA**2)), out=sq)


def cross_sum(a: np.ndarray, b: np.ndarray, cancel: CancelCheck | None) -> float:
    """sum_{i,j} (k(a_i, b_j) - 1), over blocks of rows of `a`."""
    a_sq, b_sq = np.einsum("ij,ij->i", a, a), np.einsum("ij,ij->i", b, b)
    total = 0.0
    for start, stop in spans(len(a), block_rows(len(b))):
        check_cancel(cancel)
        total += float(kernel_minus_one(a[start:stop], a_sq[start:stop], b, b_sq).sum())
    return total


def within_sum(a: np.ndarray, cancel: CancelCheck | None) -> float:
    """sum_{i!=j} (k(a_i, a_j) - 1): each block of rows against itself and the rows after it (the kernel is
    symmetric, so the part right of the diagonal block counts twice); the diagonal, k = 1, adds nothing."""
    a_sq = np.einsum("ij,ij->i", a, a)
    total = 0.0
    for start, stop in spans(len(a), block_rows(len(a))):
        check_cancel(cancel)
        block = kernel_minus_one(a[start:stop], a_sq[start:stop], a[start:], a_sq[start:])
        size = stop - start
        np.fill_diagonal(block[:, :size], 0.0)  # |a_i - a_i|^2 is 0, whatever rounding says
        total += float(block[:, :size].sum()) + 2.0 * float(block[:, size:].sum())
    return total


def spans(total: int, rows: int) -> Iterator[tuple[int, int]]:
    """(start, stop) of consecutive blocks of `rows` rows covering range(total)."""
    for start in range(0, total, rows):
        yield start, min(start + rows, total)


def cmmd(generated: np.ndarray, reference: np.ndarray, *, estimator: str = "unbiased", features: str = "",
         cancel: CancelCheck | None = None) -> Cmmd:
    """CMMD of `generated` (m, d) against `reference` (n, d) embeddings: 1000 x MMD^2 under the sigma-10 RBF kernel
    on the unit-normalised rows; "unbiased" (the paper's) needs m, n >= 2, "biased" is distance.py's V-statistic."""
    if estimator not in ESTIMATORS:
        raise InputError(f"unknown CMMD estimator {estimator!r}: expected one of {', '.join(ESTIMATORS)}")
    x = unit_rows(generated, "generated embeddings")
    y = unit_rows(reference, "reference embeddings")
    if x.shape[1] != y.shape[1]:
        raise InputError(f"generated embeddings have {x.shape[1]} dimensions, the reference {y.shape[1]}")
    m, n = len(x), len(y)
    if estimator == "unbiased" and min(m, n) < 2:
        raise InputError(f"the unbiased CMMD needs at least 2 generated and 2 reference embeddings, got {m} and {n}")
    s_xx, s_yy, s_xy = within_sum(x, cancel), within_sum(y, cancel), cross_sum(x, y, cancel)
    # With k - 1 in the sums the three terms' constants (1 + 1 - 2) cancel exactly; the biased V-statistic's
    # diagonal k = 1 terms then contribute nothing either, leaving only its denominators m^2 and n^2.
    if estimator == "unbiased":
        mmd2 = s_xx / (m * (m - 1)) + s_yy / (n * (n - 1)) - 2.0 * s_xy / (m * n)
    else:
        mmd2 = s_xx / m**2 + s_yy / n**2 - 2.0 * s_xy / (m * n)
    return Cmmd(SCALE * mmd2, m, n, estimator, features)
