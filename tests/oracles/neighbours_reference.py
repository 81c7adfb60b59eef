"""Brute force for the per-sample scores: realism, nearest reference images, copy flags and the data-copying test,
one pair of points at a time with np.linalg.norm, straight from the papers' definitions (no blocks, no GEMM).
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
    """Realism (radii above the median dropped, +1e-5 in the denominator), the k nearest (by distance, then
    index), the copy flag and the deepest ball, for every generated sample."""
    d = pair_distances(generated, real)
    radii = knn_radius(real, k)
    median = float(np.percentile(radii, 50))
    nn1 = knn_radius(real, 1)
    out: dict[str, list] = {"realism": [], "nearest": [], "distances": [], "copy": [], "copied": []}
    for i in range(len(generated)):
        out["realism"].append(max([radii[j] / (d[i, j] + 1e-5) for j in range(len(real)) if radii[j] <= median]))
        ranked = sorted(range(len(real)), key=lambda j: (d[i, j], j))[:k]
        out["nearest"].append(ranked)
        out["distances"].append([d[i, j] for j in ranked])
        inside = [(d[i, j] / nn1[j], j) for j in range(len(real)) if nn1[j] > 0 and d[i, j] < nn1[j]]
        out["copy"].append(bool(inside))
        out["copied"].append(min(inside)[1] if inside else -1)
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
