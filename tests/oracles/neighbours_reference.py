"""Brute force for the per-sample scores: realism, nearest reference images, the calibrated copy test and the
data-copying test, one pair of points at a time with np.linalg.norm, straight from the definitions (no blocks, no
GEMM, no sorting or searchsorted for the p-values).
"""

from __future__ import annotations

import math

import numpy as np


def pair_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.array([[float(np.linalg.norm(x - y)) for y in b] for x in np.asarray(a, np.float64)])


def knn_radius(points: np.ndarray, k: int) -> np.ndarray:
    d = pair_distances(points, points)
    return np.array([sorted(d[i, j] for j in range(len(points)) if j != i)[k - 1] for i in range(len(points))])


def per_sample(generated: np.ndarray, real: np.ndarray, k: int) -> dict[str, list]:
    """Realism (radii above the median dropped, +1e-5 in the denominator) and the k nearest (by distance, then
    index), with their distances, for every generated sample."""
    d = pair_distances(generated, real)
    radii = knn_radius(real, k)
    median = float(np.percentile(radii, 50))
    out: dict[str, list] = {"realism": [], "nearest": [], "distances": []}
    for i in range(len(generated)):
        out["realism"].append(max([radii[j] / (d[i, j] + 1e-5) for j in range(len(real)) if radii[j] <= median]))
        ranked = sorted(range(len(real)), key=lambda j: (d[i, j], j))[:k]
        out["nearest"].append(ranked)
        out["distances"].append([d[i, j] for j in ranked])
    return out


def copy_test(generated: np.ndarray, real: np.ndarray, held_out: np.ndarray, alpha: float,
              searched: list[int] | None = None) -> dict[str, list]:
    """The conformal copy test: each sample's nearest reference image among `searched` (all by default; the first
    on ties) and its distance d, p = (1 + #{held-out images with nearest distance <= d}) / (n + 1), flagged iff
    p <= alpha; `copied` is the nearest image of a flagged sample, else -1."""
    rows = list(range(len(real))) if searched is None else [int(j) for j in searched]
    d = pair_distances(generated, real)
    h = pair_distances(held_out, real)
    held = [min(h[i, j] for j in rows) for i in range(len(held_out))]
    out: dict[str, list] = {"nearest": [], "distance": [], "p_value": [], "flagged": [], "copied": []}
    for i in range(len(generated)):
        j = min(rows, key=lambda j: (d[i, j], j))
        p = (1 + sum(1 for x in held if x <= d[i, j])) / (len(held) + 1)
        out["nearest"].append(j)
        out["distance"].append(d[i, j])
        out["p_value"].append(p)
        out["flagged"].append(p <= alpha)
        out["copied"].append(j if p <= alpha else -1)
    return out


def mann_whitney_z(generated: list[float], held_out: list[float]) -> float:
    """Z_U with U = #pairs (q, p) with L(q) > L(p), ties 1/2, as Meehan et al. define it."""
    u = sum(1.0 if q > p else 0.5 if q == p else 0.0 for q in generated for p in held_out)
    m, n = len(generated), len(held_out)
    return (u - m * n / 2) / math.sqrt(m * n * (m + n + 1) / 12)


def c_t(train: np.ndarray, held_out: np.ndarray, generated: np.ndarray, centres: np.ndarray, tau: float) -> float:
    """C_T over the cells of the nearest of `centres` (held-out weights, cells with Q_m(pi) >= tau)."""
    cells = [[int(np.argmin([np.linalg.norm(x - c) for c in centres])) for x in s]
             for s in (train, held_out, generated)]
    num = den = 0.0
    for c in range(len(centres)):
        t = [x for x, k in zip(train, cells[0]) if k == c]
        p = [x for x, k in zip(held_out, cells[1]) if k == c]
        q = [x for x, k in zip(generated, cells[2]) if k == c]
        if not p or not q or len(q) / len(generated) < tau:
            continue
        share = len(p) / len(held_out)
        num += share * mann_whitney_z([_to_nearest(x, t) for x in q], [_to_nearest(x, t) for x in p])
        den += share
    return num / den if den else math.nan


def _to_nearest(x: np.ndarray, points: list[np.ndarray]) -> float:
    return min(float(np.linalg.norm(x - y)) for y in points)
