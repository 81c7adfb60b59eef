"""Simulated judgments for tests and benchmarks: trials answered by the Luce model over planted points."""

from __future__ import annotations

import numpy as np

from probescope.core.similarity.settings import BETA
from probescope.core.similarity.simulate import random_references, sample_outcomes
from probescope.core.similarity.trials import Trials


def simulate_trials(
    z: np.ndarray, n_trials: int, rng: np.random.Generator, r: int = 8, c: int = 2, beta: float = BETA
) -> Trials:
    """Random queries and references over all stimuli of `z`, answered by the Luce model."""
    n = len(z)
    query = rng.integers(0, n, n_trials)
    refs = random_references(rng, query, np.arange(n), r)
    return Trials.make(query, refs, sample_outcomes(z, query, refs, c, rng, beta))


def clustered_points(n: int, dims: int, n_clusters: int, rng: np.random.Generator, spread: float = 0.6,
                     noise: float = 0.12) -> np.ndarray:
    """Planted structure: n points around n_clusters centres (distances on the scale beta = 10 resolves)."""
    centres = rng.normal(0, spread, (n_clusters, dims))
    return centres[rng.integers(0, n_clusters, n)] + rng.normal(0, noise, (n, dims))
