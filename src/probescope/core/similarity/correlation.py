"""Similarity-structure correlations: a model's similarity matrix against a psychological embedding's, and
the convergence measures of an ensemble (within-ensemble and consecutive-fit correlation).

Matrices are never materialised: correlations run over the upper-triangle pairs, all of them up to `max_pairs`
and otherwise a seeded uniform sample of that many pairs (the result says how many and whether sampled), so 50,000
stimuli (1.25e9 pairs) cost what `max_pairs` pairs cost.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from probescope.core.similarity.agreement import pairwise_rows, row_cosine
from probescope.core.similarity.ensemble import Ensemble
from probescope.core.similarity.settings import DEFAULT_MAX_PAIRS, DEFAULT_SEED

MODEL_SIMILARITIES = ("cosine", "dot")


@dataclass(frozen=True)
class Correlation:
    value: float
    n_pairs: int
    sampled: bool
    method: str  # 'spearman' or 'pearson'


def upper_pairs(n: int, max_pairs: int = DEFAULT_MAX_PAIRS,
                seed: int = DEFAULT_SEED) -> tuple[np.ndarray, np.ndarray, bool]:
    """All pairs i < j when there are at most `max_pairs`, else `max_pairs` pairs drawn uniformly (seeded)."""
    total = n * (n - 1) // 2
    if total <= max_pairs:
        i, j = np.triu_indices(n, 1)
        return i.astype(np.int64), j.astype(np.int64), False
    rng = np.random.default_rng(seed)
    i = rng.integers(0, n, max_pairs)
    j = (i + rng.integers(1, n, max_pairs)) % n  # uniform over j != i
    return np.minimum(i, j), np.maximum(i, j), True


def expected_similarity(
    ensemble: Ensemble, i: np.ndarray, j: np.ndarray, *, members: list[int] | None = None, n_samples: int = 32,
    seed: int = DEFAULT_SEED, chunk: int = 65536,
) -> np.ndarray:
    """E_q[exp(-beta ||z_i - z_j||)] for each pair, averaged over `members` (default all): (P,) or per member.

    Monte-Carlo over independent posterior draws per pair (seeded); returns (len(members), P).
    """
    import torch  # (torch: the window's process imports this module's NumPy parts, never torch)

    members = list(range(ensemble.n_members)) if members is None else members
    gen = torch.Generator().manual_seed(seed)
    out = np.empty((len(members), len(i)), dtype=np.float64)
    for row, k in enumerate(members):
        loc = torch.as_tensor(ensemble.loc[k], dtype=torch.float32)
        scale = torch.as_tensor(ensemble.scale[k], dtype=torch.float32)
        for start in range(0, len(i), chunk):
            a = torch.as_tensor(i[start : start + chunk])
            b = torch.as_tensor(j[start : start + chunk])
            shape = (n_samples, len(a), loc.shape[1])
            za = loc[a] + scale[a] * torch.randn(shape, generator=gen)
            zb = loc[b] + scale[b] * torch.randn(shape, generator=gen)
            dist = torch.linalg.vector_norm(za - zb, dim=-1)
            out[row, start : start + chunk] = torch.exp(-ensemble.beta * dist).mean(0).double().numpy()
    return out


def model_similarity(features: np.ndarray, i: np.ndarray, j: np.ndarray, kind: str, chunk: int = 4096) -> np.ndarray:
    """Dot-product or cosine similarity of feature rows for each pair."""
    if kind not in MODEL_SIMILARITIES:
        raise ValueError(f"unknown similarity '{kind}' (choose from {', '.join(MODEL_SIMILARITIES)})")
    return pairwise_rows(features, i, j, row_cosine if kind == "cosine" else (lambda a, b: (a * b).sum(1)), chunk)


def pearson(a: np.ndarray, b: np.ndarray) -> float:
    a = a - a.mean()
    b = b - b.mean()
    denom = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / denom) if denom > 0 else float("nan")


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rho: Pearson correlation of the ranks (ties get their average rank)."""
    from scipy.stats import rankdata  # (scipy.stats: 0.65 s to import; the window's process imports this module)

    return pearson(rankdata(a), rankdata(b))


def embedding_correlation(
    ensemble: Ensemble, features: np.ndarray, kind: str = "cosine", *, stimuli: np.ndarray | None = None,
    max_pairs: int = DEFAULT_MAX_PAIRS, seed: int = DEFAULT_SEED, n_samples: int = 32,
) -> Correlation:
    """Spearman between the ensemble's expected similarity and the model's (dot or cosine) over upper-triangle pairs.

    `stimuli` restricts the comparison to a subset (e.g. leaving out mirrored catch images).
    """
    if len(features) < ensemble.n_stimuli:
        raise ValueError(f"features have {len(features)} rows but the embedding {ensemble.n_stimuli} stimuli")
    i, j, sampled = _stimulus_pairs(ensemble.n_stimuli, stimuli, max_pairs, seed)
    psych = expected_similarity(ensemble, i, j, n_samples=n_samples, seed=seed).mean(0)
    return Correlation(spearman(psych, model_similarity(features, i, j, kind)), len(i), sampled, "spearman")


def _stimulus_pairs(n: int, stimuli: np.ndarray | None, max_pairs: int, seed: int
                    ) -> tuple[np.ndarray, np.ndarray, bool]:
    ids = np.arange(n) if stimuli is None else np.asarray(stimuli)
    a, b, sampled = upper_pairs(len(ids), max_pairs, seed)
    return ids[a], ids[b], sampled


def within_ensemble_correlation(
    ensemble: Ensemble, *, stimuli: np.ndarray | None = None, max_pairs: int = DEFAULT_MAX_PAIRS,
    seed: int = DEFAULT_SEED, n_samples: int = 32,
) -> Correlation:
    """Mean pairwise Pearson correlation of the members' expected similarity matrices (upper triangles), over
    `stimuli` (default all)."""
    i, j, sampled = _stimulus_pairs(ensemble.n_stimuli, stimuli, max_pairs, seed)
    sims = expected_similarity(ensemble, i, j, n_samples=n_samples, seed=seed)
    values = [pearson(sims[a], sims[b]) for a in range(len(sims)) for b in range(a + 1, len(sims))]
    return Correlation(float(np.mean(values)) if values else float("nan"), len(i), sampled, "pearson")


def consecutive_correlation(
    previous: Ensemble, current: Ensemble, *, stimuli: np.ndarray | None = None,
    max_pairs: int = DEFAULT_MAX_PAIRS, seed: int = DEFAULT_SEED, n_samples: int = 32,
) -> Correlation:
    """Pearson correlation of two fits' ensemble-average expected similarity over `stimuli` (default: all that
    both hold)."""
    n = min(previous.n_stimuli, current.n_stimuli)
    i, j, sampled = _stimulus_pairs(n, None if stimuli is None else np.asarray(stimuli)[np.asarray(stimuli) < n],
                                    max_pairs, seed)
    a = expected_similarity(previous, i, j, n_samples=n_samples, seed=seed).mean(0)
    b = expected_similarity(current, i, j, n_samples=n_samples, seed=seed).mean(0)
    return Correlation(pearson(a, b), len(i), sampled, "pearson")
