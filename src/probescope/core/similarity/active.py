"""Active learning: propose the next trials by expected information gain, as in ImageNet-HSJ.

Expected information gain of a trial = H(mean_s p_s(y)) - mean_s H(p_s(y)) over posterior samples s pooled over the
ensemble's members and the trial's r!/(r-c)! outcomes y (one log-sum-exp pass per chunk of trials, `OutcomeModel`).

Search heuristics: queries are drawn without replacement with probability proportional to exp(H~_q) / (1 + c_q),
where H~_q is the ensemble-average differential entropy of stimulus q's posterior (exp makes it positive and
proportional to the posterior volume) and c_q the number of times q has already served as a query (the frequency
adjustment against perseverating on stimuli whose uncertainty is aleatoric). For each query, candidate reference
sets are drawn without replacement, in proportion to ensemble-average expected similarity, among its nearest
neighbours (by the same similarity); the top trials per query by information gain are kept. Confirmation trials
(query drawn in proportion to exp(H~_q); 2 references from the neighbours, the rest from outside) are mixed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import torch

from probescope.core.errors import InputError
from probescope.core.similarity.correlation import expected_similarity
from probescope.core.similarity.embedding import torch_threads
from probescope.core.similarity.ensemble import Ensemble
from probescope.core.similarity.luce import OutcomeModel, log_similarity
from probescope.core.similarity.settings import DEFAULT_SEED
from probescope.core.similarity.trials import Trials
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel


def information_gain(
    ensemble: Ensemble, query: np.ndarray, references: np.ndarray, n_select: int = 2, *, n_samples: int = 32,
    seed: int = DEFAULT_SEED, chunk: int = 512, device: str = "cpu", cancel: CancelCheck | None = None,
) -> np.ndarray:
    """(m,) expected information gain (nats) of each candidate trial (query (m,), references (m, r))."""
    gen = torch.Generator().manual_seed(seed)
    z = ensemble.sample(n_samples, gen, device)  # (S, n, d), pooled over members
    model = OutcomeModel(references.shape[1], n_select, device)
    q_all = torch.as_tensor(query, device=device)
    r_all = torch.as_tensor(references, device=device)
    out = np.empty(len(query), dtype=np.float64)
    with torch.no_grad():
        for start in range(0, len(query), chunk):
            check_cancel(cancel)
            q, r = q_all[start : start + chunk], r_all[start : start + chunk]
            log_p = model.log_probs_padded(log_similarity(z[:, q], z[:, r], ensemble.beta))  # (S, m, K')
            p = log_p.exp()
            mean_p = p.mean(0)
            h_mean = -torch.special.xlogy(mean_p, mean_p).sum(-1)
            mean_h = -(p * log_p).sum(-1).mean(0)
            out[start : start + chunk] = (h_mean - mean_h).clamp_min(0).double().cpu().numpy()
    return out


def stimulus_entropy(ensemble: Ensemble) -> np.ndarray:
    """(n,) ensemble-average differential entropy of each stimulus' diagonal Gaussian posterior."""
    scale = np.asarray(ensemble.scale, dtype=np.float64)
    return (0.5 * np.log(2 * math.pi * math.e * scale**2)).sum(-1).mean(0)


def query_probability(entropy: np.ndarray, query_counts: np.ndarray | None, eligible: np.ndarray) -> np.ndarray:
    """Sampling probability of each stimulus as a query: exp(H~_q) / (1 + c_q) over the eligible ones."""
    w = np.exp(entropy - entropy[eligible].max())
    if query_counts is not None:
        w = w / (1.0 + query_counts)
    w = np.where(eligible, np.maximum(w, 1e-12), 0.0)  # never exactly 0: sampling without replacement needs them
    return w / w.sum()


@dataclass(frozen=True)
class Proposal:
    """Unanswered trials to run next, with each one's kind ('active' or 'confirmation') and information gain."""

    trials: Trials
    kind: np.ndarray
    info_gain: np.ndarray


def nearest_neighbours(
    ensemble: Ensemble, queries: np.ndarray, pool: np.ndarray, k: int, *, seed: int = DEFAULT_SEED, n_samples: int = 8,
) -> tuple[np.ndarray, np.ndarray]:
    """The k stimuli of `pool` most similar to each query by ensemble-average expected similarity, the query
    itself excluded: (indices into pool (q, k), their similarities), a block of queries at a time."""
    index = np.empty((len(queries), k), dtype=np.int64)
    value = np.empty((len(queries), k))
    per_chunk = max(1, 2_000_000 // len(pool))
    for start in range(0, len(queries), per_chunk):
        q = queries[start : start + per_chunk]
        sim = expected_similarity(ensemble, np.repeat(q, len(pool)), np.tile(pool, len(q)), n_samples=n_samples,
                                  seed=seed).mean(0).reshape(len(q), len(pool))
        sim[pool[None, :] == q[:, None]] = -np.inf
        top = np.argpartition(-sim, k - 1, axis=1)[:, :k]
        top = np.take_along_axis(top, np.argsort(-np.take_along_axis(sim, top, 1), axis=1), 1)
        index[start : start + len(q)] = top
        value[start : start + len(q)] = np.take_along_axis(sim, top, 1)
    return index, value


def _gumbel_top(rng: np.random.Generator, log_w: np.ndarray, k: int) -> np.ndarray:
    """Indices of k items drawn without replacement with probability proportional to exp(log_w) (per row)."""
    keys = log_w + rng.gumbel(size=log_w.shape)
    return np.argpartition(-keys, k - 1, axis=-1)[..., :k]


def propose_trials(
    ensemble: Ensemble,
    *,
    n_queries: int,
    n_candidates: int = 1000,
    keep_per_query: int = 3,
    n_confirmation: int | None = None,
    n_references: int = 8,
    n_select: int = 2,
    n_neighbors: int | None = None,
    query_counts: np.ndarray | None = None,
    eligible: np.ndarray | None = None,
    n_samples: int = 32,
    seed: int = DEFAULT_SEED,
    progress: ProgressCallback | None = None,
    cancel: CancelCheck | None = None,
    device: str = "cpu",
    threads: int = 1,
) -> Proposal:
    """The next batch: top `keep_per_query` of `n_candidates` candidates for each of `n_queries` queries, plus
    `n_confirmation` (default n_queries) confirmation trials. `eligible` (n,) bool limits the stimuli used
    (e.g. no mirrored catch images); `n_neighbors` defaults to max(1% of the stimuli, 3 x references);
    `threads`: torch CPU threads while scoring (0: unchanged)."""
    with torch_threads(threads if device == "cpu" else 0):
        return _propose(ensemble, n_queries, n_candidates, keep_per_query, n_confirmation, n_references, n_select,
                        n_neighbors, query_counts, eligible, n_samples, seed, progress, cancel, device)


def _propose(
    ensemble: Ensemble, n_queries: int, n_candidates: int, keep_per_query: int, n_confirmation: int | None,
    n_references: int, n_select: int, n_neighbors: int | None, query_counts: np.ndarray | None,
    eligible: np.ndarray | None, n_samples: int, seed: int, progress: ProgressCallback | None,
    cancel: CancelCheck | None,
    device: str,
) -> Proposal:
    n = ensemble.n_stimuli
    eligible = np.ones(n, dtype=bool) if eligible is None else np.asarray(eligible, dtype=bool)
    pool = np.nonzero(eligible)[0]
    r = n_references
    n_neighbors = n_neighbors or max(math.ceil(0.01 * len(pool)), 3 * r)
    n_neighbors = min(n_neighbors, len(pool) - 1)
    n_confirmation = n_queries if n_confirmation is None else n_confirmation
    if n_neighbors < r or (n_confirmation and len(pool) - 1 - n_neighbors < r - n_select):
        raise InputError(f"{len(pool)} usable stimuli are too few for {r}-reference trials with {n_neighbors} "
                         "neighbours")
    n_queries = min(n_queries, len(pool))
    rng = np.random.default_rng(seed)
    entropy = stimulus_entropy(ensemble)

    def report(fraction: float, message: str) -> None:
        if progress is not None:
            progress(fraction, message)

    report(0.0, "choosing queries")
    p_query = query_probability(entropy, query_counts, eligible)
    queries = rng.choice(n, size=n_queries, replace=False, p=p_query)
    p_confirm = query_probability(entropy, None, eligible)
    confirm_queries = rng.choice(n, size=n_confirmation, replace=True, p=p_confirm)
    all_queries = np.concatenate([queries, confirm_queries])

    neighbours, near_sim = nearest_neighbours(ensemble, all_queries, pool, n_neighbors, seed=seed)
    report(0.2, "assembling candidates")

    # candidates: references drawn among the neighbours in proportion to expected similarity, a few queries at a
    # time so that memory stays bounded (queries x candidates x neighbours Gumbel keys per chunk)
    nq = len(queries)
    keep = min(keep_per_query, n_candidates)
    per_chunk = max(1, 4_000_000 // (n_candidates * n_neighbors))
    active_refs = np.empty((nq, keep, r), dtype=np.int64)
    active_gain = np.empty((nq, keep))
    for start in range(0, nq, per_chunk):
        rows = np.arange(start, min(start + per_chunk, nq))
        log_w = np.log(np.maximum(near_sim[rows], 1e-300))
        picks = _gumbel_top(rng, np.broadcast_to(log_w[:, None, :], (len(rows), n_candidates, n_neighbors)), r)
        refs = pool[neighbours[rows][np.arange(len(rows))[:, None, None], picks]]  # (k, C, r)
        gains = information_gain(ensemble, np.repeat(queries[rows], n_candidates), refs.reshape(-1, r), n_select,
                                 n_samples=n_samples, seed=seed, device=device, cancel=cancel)
        gains = gains.reshape(len(rows), n_candidates)
        best = np.argsort(-gains, axis=1)[:, :keep]
        active_refs[rows] = np.take_along_axis(refs, best[:, :, None], 1)
        active_gain[rows] = np.take_along_axis(gains, best, 1)
        report(0.2 + 0.7 * (rows[-1] + 1) / nq, "scoring candidates")
    active_q = np.repeat(queries, keep)
    active_refs = active_refs.reshape(-1, r)
    active_gain = active_gain.reshape(-1)

    # confirmation trials: n_select references drawn uniformly from the neighbours, the rest from outside them
    inside = np.take_along_axis(neighbours[nq:], _gumbel_top(rng, np.zeros((n_confirmation, n_neighbors)),
                                                              n_select), 1)
    outside = np.empty((n_confirmation, r - n_select), dtype=np.int64)
    per_chunk = max(1, 4_000_000 // len(pool))
    for start in range(0, n_confirmation, per_chunk):
        rows = np.arange(start, min(start + per_chunk, n_confirmation))
        keys = rng.random((len(rows), len(pool)))
        np.put_along_axis(keys, neighbours[nq + rows], np.inf, 1)
        keys[pool[None, :] == confirm_queries[rows, None]] = np.inf
        outside[rows] = np.argpartition(keys, r - n_select - 1, axis=1)[:, : r - n_select]
    conf_refs = pool[np.concatenate([inside, outside], 1)]
    conf_gain = information_gain(ensemble, confirm_queries, conf_refs, n_select, n_samples=n_samples, seed=seed,
                                 device=device) if n_confirmation else np.empty(0)
    report(1.0, "done")

    query = np.concatenate([active_q, confirm_queries])
    references = np.concatenate([active_refs, conf_refs])
    references = np.take_along_axis(references, rng.permuted(np.tile(np.arange(r), (len(query), 1)), axis=1), 1)
    trials = Trials.make(query, references, np.full((len(query), n_select), -1))
    kind = np.array(["active"] * len(active_q) + ["confirmation"] * n_confirmation)
    return Proposal(trials, kind, np.concatenate([active_gain, conf_gain]))
