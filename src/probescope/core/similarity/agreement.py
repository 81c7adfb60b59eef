"""How well a model's features agree with people: triplet accuracy and per-trial agreement.

Every rank trial implies triplets "the query is closer to a than to b" (13 per 8-rank-2 trial, see
`trials.triplets`). A model gets a triplet right when d(q, a) < d(q, b) strictly: ties count as wrong, so constant
features score 0, not chance. Distances: L1, L2 and cosine (1 - cosine similarity).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from probescope.core.similarity.trials import PAD, Trials

DISTANCES = ("cosine", "l1", "l2")


def pairwise_rows(features: np.ndarray, i: np.ndarray, j: np.ndarray, fn, chunk: int = 4096) -> np.ndarray:
    """fn(a, b) of rows i[k] and j[k] of `features` (n, D), computed in float64 chunks (no n x n matrix)."""
    out = np.empty(len(i), dtype=np.float64)
    for start in range(0, len(i), chunk):
        a = np.asarray(features[i[start : start + chunk]], dtype=np.float64)
        b = np.asarray(features[j[start : start + chunk]], dtype=np.float64)
        out[start : start + chunk] = fn(a, b)
    return out


def row_cosine(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Cosine similarity of each row pair (0 where a row is all zeros)."""
    norm = np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1)
    return np.divide((a * b).sum(1), norm, out=np.zeros(len(a)), where=norm > 0)


_DISTANCE_FNS = {
    "cosine": lambda a, b: 1.0 - row_cosine(a, b),
    "l1": lambda a, b: np.abs(a - b).sum(1),
    "l2": lambda a, b: np.sqrt(((a - b) ** 2).sum(1)),
}


def pair_distances(features: np.ndarray, i: np.ndarray, j: np.ndarray, metric: str, chunk: int = 4096) -> np.ndarray:
    """Distance between rows i[k] and j[k] of `features` (n, D), computed in float64 chunks (no n x n matrix)."""
    if metric not in DISTANCES:
        raise ValueError(f"unknown distance '{metric}' (choose from {', '.join(DISTANCES)})")
    return pairwise_rows(features, i, j, _DISTANCE_FNS[metric], chunk)


@dataclass(frozen=True)
class Agreement:
    """Triplet accuracy over all trials, and how many of each trial's triplets were right (of how many)."""

    accuracy: float
    n_triplets: int
    per_trial_correct: np.ndarray  # (m,) triplets right per trial
    per_trial_total: np.ndarray  # (m,) triplets per trial (13 for 8-rank-2)


def agreement_from_distances(trials: Trials, distance: np.ndarray) -> Agreement:
    """Triplet accuracy from (m, R) query-to-reference distances given in the trials' presentation order."""
    order = trials.chosen_first_order()
    m, r = order.shape
    d = np.take_along_axis(distance, order, axis=1)
    padded = np.take_along_axis(trials.references, order, axis=1) == PAD
    k, j = np.triu_indices(r, 1)
    valid = (k[None, :] < trials.n_select[:, None]) & ~padded[:, j]
    right = (d[:, k] < d[:, j]) & valid
    correct = right.sum(1)
    total = valid.sum(1)
    n = int(total.sum())
    return Agreement(float(correct.sum() / n) if n else float("nan"), n, correct, total)


def reference_distances(trials: Trials, pair_distance: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> np.ndarray:
    """(m, R) distances from each query to its references (inf for padding), by a pairwise distance function."""
    refs = trials.references
    valid = refs != PAD
    q = np.broadcast_to(trials.query[:, None], refs.shape)[valid]
    out = np.full(refs.shape, np.inf)
    out[valid] = pair_distance(q, refs[valid])
    return out


def triplet_agreement(trials: Trials, features: np.ndarray, metric: str) -> Agreement:
    """Triplet accuracy of a feature matrix (row i = stimulus i) under one distance."""
    n = len(features)
    top = max(int(trials.query.max(initial=-1)), int(trials.references.max(initial=-1)))
    if top >= n:
        raise ValueError(f"the trials use stimulus {top} but the features have {n} rows")
    return agreement_from_distances(trials, reference_distances(trials, lambda i, j: pair_distances(features, i, j,
                                                                                                   metric)))
