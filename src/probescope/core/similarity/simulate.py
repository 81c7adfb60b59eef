"""Simulated participants: rank trials answered by the Luce model over a known embedding.

Used by tests, the demo world's judgments and the benchmark.
"""

from __future__ import annotations

import numpy as np
import torch

from probescope.core.similarity.luce import OutcomeModel, log_similarity
from probescope.core.similarity.settings import BETA


def random_references(rng: np.random.Generator, query: np.ndarray, pool: np.ndarray, r: int) -> np.ndarray:
    """(m, r) distinct references per trial drawn uniformly from `pool`, never the trial's query."""
    m = len(query)
    keys = rng.random((m, len(pool)))
    keys[pool[None, :] == query[:, None]] = np.inf
    return pool[np.argsort(keys, axis=1)[:, :r]]


def sample_outcomes(
    z: np.ndarray, query: np.ndarray, references: np.ndarray, c: int, rng: np.random.Generator, beta: float = BETA
) -> np.ndarray:
    """(m, c) chosen positions drawn from the Luce ranked-choice model at the points `z` (n, d)."""
    r = references.shape[1]
    model = OutcomeModel(r, c)
    zt = torch.as_tensor(z, dtype=torch.float64)
    log_s = log_similarity(zt[torch.as_tensor(query)], zt[torch.as_tensor(references)], beta)
    probs = model.log_probs(log_s).exp().numpy()
    cum = np.cumsum(probs, axis=1)
    u = rng.random((len(query), 1)) * cum[:, -1:]
    outcome = np.minimum((cum < u).sum(axis=1), cum.shape[1] - 1)
    return model.table.numpy()[outcome]
