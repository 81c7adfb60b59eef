"""Active learning: the next trials by expected information gain, as `probescope propose` and the Similarity
workspace's Active learning panel make them (`propose`), saved in the plain trials CSV layout, and the command
line's report against the same number of randomly assembled trials.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from probescope.core import bounds
from probescope.core.errors import InputError
from probescope.core.similarity.ensemble import Ensemble
from probescope.core.similarity.readers import Judgments
from probescope.core.similarity.settings import ProposeSettings
from probescope.core.similarity.writers import write_trials_csv
from probescope.core.tasks import CancelCheck, ProgressCallback

if TYPE_CHECKING:  # the engine (active.py) needs torch: imported where proposals are made
    from probescope.core.similarity.active import Proposal


def check_proposal(ensemble: Ensemble, judgments: Judgments, settings: ProposeSettings,
                   path: Path | None = None) -> None:
    """InputError before any work when the settings ask what this embedding cannot give (more neighbours than
    stimuli, more memory than there is) or the embedding is of other judgments."""
    if ensemble.n_stimuli != judgments.n_stimuli:
        raise InputError(f"the embedding has {ensemble.n_stimuli} stimuli, the judgments {judgments.n_stimuli}", path)
    n = ensemble.n_stimuli
    if settings.neighbors is not None:
        bounds.NEIGHBOURS.check(settings.neighbors, "--neighbors", high=n - 1,
                                because=f"the embedding has {n} stimuli")
    neighbours = settings.neighbors or max(n // 100 + 1, 24)
    # posterior samples of every stimulus, and per chunk of queries the Gumbel keys of candidates x neighbours
    bounds.check_fits(4.0 * settings.samples * ensemble.n_members * n * ensemble.dims
                      + 16.0 * settings.candidates * neighbours + 4.0 * 512 * settings.samples * 64 * 3,
                      f"proposing with --samples {settings.samples} and --candidates {settings.candidates}")


def eligible_queries(judgments: Judgments) -> np.ndarray | None:
    """(n,) the stimuli a proposal may use: mirrored catch images never (None: every stimulus)."""
    return judgments.catalog.mirror_of < 0 if judgments.catalog is not None else None


def propose(ensemble: Ensemble, judgments: Judgments, settings: ProposeSettings, *,
            progress: ProgressCallback | None = None, cancel: CancelCheck | None = None,
            device: str = "cpu") -> Proposal:
    """The next batch by expected information gain (the engine's `propose_trials`), queries weighted by how often
    each stimulus already served as a query, mirrored catch images never used."""
    # (torch: the window's process imports this module for its Jobs, never torch)
    from probescope.core.similarity.active import propose_trials

    counts = np.bincount(judgments.trials.query, minlength=ensemble.n_stimuli).astype(np.float64)
    return propose_trials(ensemble, n_queries=settings.queries, n_candidates=settings.candidates,
                          keep_per_query=settings.keep, n_confirmation=settings.confirmation,
                          n_neighbors=settings.neighbors, query_counts=counts, eligible=eligible_queries(judgments),
                          n_samples=settings.samples, seed=settings.seed, progress=progress, cancel=cancel,
                          device=device)


def save_proposal(path: str | Path, proposal: Proposal) -> None:
    """The plain trials CSV layout with `kind` and `info_gain` columns (choices blank)."""
    write_trials_csv(path, proposal.trials, {"kind": proposal.kind, "info_gain": proposal.info_gain})


def random_baseline(ensemble: Ensemble, judgments: Judgments, proposal: Proposal, settings: ProposeSettings,
                    device: str = "cpu") -> np.ndarray:
    """Expected information gain of as many randomly assembled trials as `proposal` has (same queries' pool)."""
    # (torch: the window's process imports this module for its Jobs, never torch)
    from probescope.core.similarity.active import information_gain
    from probescope.core.similarity.simulate import random_references

    rng = np.random.default_rng(settings.seed)
    eligible = eligible_queries(judgments)
    pool = np.nonzero(eligible)[0] if eligible is not None else np.arange(ensemble.n_stimuli)
    rq = rng.choice(pool, len(proposal.trials))
    return information_gain(ensemble, rq, random_references(rng, rq, pool, proposal.trials.references.shape[1]),
                            n_samples=settings.samples, seed=settings.seed, device=device)
