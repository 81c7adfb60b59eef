"""Per-image class distributions p(y|x) in float64, from logits or from probabilities.

Everything the Inception Score needs from an image is its row p_i and its negative entropy sum_y p_iy log p_iy.
Logits go through a float64 softmax whose log is taken from the shifted logits, never from p (as torch-fidelity
does with log_softmax), so an exact 0 in p never produces NaN; probabilities are validated and `0 log 0 = 0` holds
exactly (`xlogx`, scipy's xlogy(q, q) in NumPy).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from probescope.core.errors import InputError

# Rows of a probability matrix must sum to 1 within this (float32 softmax outputs are off by ~1e-6).
DEFAULT_SUM_TOLERANCE = 1e-3
# Rows processed at once: bounds the float64 working memory (4096 x 1008 x 8 B = 33 MB per array).
CHUNK_ROWS = 4096

UNITS = {"nats": 1.0, "bits": 1.0 / math.log(2.0)}


@dataclass(frozen=True)
class Rows:
    """A block of images: p (m, n) float64 rows that sum to 1, and neg_entropy (m,) = sum_y p log p (<= 0)."""

    p: np.ndarray
    neg_entropy: np.ndarray


def _as_matrix(array: np.ndarray, what: str, source: str | None) -> np.ndarray:
    array = np.asarray(array)
    if array.ndim != 2 or array.shape[0] == 0 or array.shape[1] < 2:
        shape = array.shape
        raise InputError(f"{what} must be a non-empty (N images, n classes >= 2) array, got shape {shape}", source)
    if not np.issubdtype(array.dtype, np.floating) and not np.issubdtype(array.dtype, np.integer):
        raise InputError(f"{what} must be numeric, got dtype {array.dtype}", source)
    return array


def _first_bad_row(mask_rows: np.ndarray) -> int:
    return int(np.flatnonzero(mask_rows)[0])


def rows_from_logits(logits: np.ndarray, source: str | None = None, offset: int = 0) -> Rows:
    """Float64 softmax of a block of logits. NaN or +inf logits are rejected (they have no distribution);
    -inf is a valid logit for a class with probability exactly 0.

    One exp per entry: with s = z - max z, e = exp(s) and S = sum e, p = e / S and
    sum_y p log p = (e . s) / S - log S.
    """
    z = np.array(logits, dtype=np.float64)  # a private copy, modified in place below
    zmax = z.max(axis=1, keepdims=True)  # NaN propagates into the row maximum
    if not np.isfinite(zmax).all():
        row = _first_bad_row(~np.isfinite(zmax[:, 0]))
        problem = "is -inf for every class" if np.isneginf(zmax[row, 0]) else "contains NaN or +inf"
        raise InputError(f"logits row {offset + row} {problem}", source)
    z -= zmax
    e = np.exp(z)
    total = e.sum(axis=1)
    if np.isneginf(z.min(axis=1)).any():
        z[np.isneginf(z)] = 0.0  # e == 0 there: 0 * log 0 counts as 0
    neg_entropy = np.einsum("ij,ij->i", e, z) / total - np.log(total)
    e /= total[:, None]
    return Rows(e, neg_entropy)


def rows_from_probabilities(
    probs: np.ndarray, source: str | None = None, offset: int = 0, tolerance: float = DEFAULT_SUM_TOLERANCE
) -> Rows:
    """Validate a block of probability rows (no NaN, no negatives, sums within `tolerance` of 1), then
    renormalise them in float64 so that the probability and logit paths compute the same quantities."""
    p = np.asarray(probs, dtype=np.float64)
    finite = np.isfinite(p)
    if not finite.all():
        row = _first_bad_row(~finite.all(axis=1))
        raise InputError(f"probability row {offset + row} contains NaN or inf", source)
    if (p < 0).any():
        row = _first_bad_row((p < 0).any(axis=1))
        raise InputError(f"probability row {offset + row} has a negative entry", source)
    sums = p.sum(axis=1)
    off = np.abs(sums - 1.0) > tolerance
    if off.any():
        row = _first_bad_row(off)
        raise InputError(
            f"probability row {offset + row} sums to {sums[row]:.6g}, not 1 (tolerance {tolerance:g}); "
            "pass logits instead if these are unnormalised scores",
            source,
        )
    p = p / sums[:, None]
    return Rows(p, xlogx(p).sum(axis=1))


class ClassScores:
    """An (N, n) matrix of logits or probabilities, read in float64 blocks of rows.

    Holding the caller's array (float32 logits stay float32) and converting block by block keeps 50,000 x 1008
    inputs in a few tens of MB of working memory.
    """

    def __init__(
        self,
        array: np.ndarray,
        kind: str,
        source: str | None = None,
        tolerance: float = DEFAULT_SUM_TOLERANCE,
    ):
        if kind not in ("logits", "probs"):
            raise ValueError(f"kind must be 'logits' or 'probs', not {kind!r}")
        self.array = _as_matrix(array, "logits" if kind == "logits" else "probabilities", source)
        self.kind = kind
        self.source = source
        self.tolerance = tolerance

    @property
    def n_images(self) -> int:
        return int(self.array.shape[0])

    @property
    def n_classes(self) -> int:
        return int(self.array.shape[1])

    def rows(self, start: int, stop: int) -> Rows:
        block = self.array[start:stop]
        if self.kind == "logits":
            return rows_from_logits(block, self.source, start)
        return rows_from_probabilities(block, self.source, start, self.tolerance)

    def blocks(self, chunk: int = CHUNK_ROWS) -> Iterator[tuple[int, Rows]]:
        """(start row, Rows) for consecutive blocks covering all images."""
        for start in range(0, self.n_images, chunk):
            yield start, self.rows(start, min(start + chunk, self.n_images))


def xlogx(q: np.ndarray) -> np.ndarray:
    """q log q elementwise in float64, with 0 log 0 = 0 and NaN where q < 0 or NaN (scipy.special.xlogy(q, q), in
    NumPy: the window scores batches in its GUI thread, where importing scipy.special stalled it 240 ms)."""
    q = np.asarray(q, dtype=np.float64)
    out = np.zeros_like(q)
    positive = q > 0
    np.log(q, out=out, where=positive)
    out *= q
    out[~(positive | (q == 0))] = np.nan
    return out


def entropy(q: np.ndarray) -> float:
    """H(q) in nats with 0 log 0 = 0."""
    return float(-xlogx(q).sum())


def safe_log(q: np.ndarray) -> np.ndarray:
    """log q with log 0 replaced by 0: a class with marginal 0 has p_iy = 0 for every image, so the term
    p_iy log q_y must vanish rather than become 0 * -inf = NaN."""
    out = np.zeros_like(q, dtype=np.float64)
    np.log(q, out=out, where=q > 0)
    return out
