"""The Similarity workspace's long computations as worker tasks (generators of Progress that return their result):
a layer's features, the model table's scores, the quick embedding, a refit and a proposal. No Qt here."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from probescope.app.similarity import analysis as data
from probescope.jobs.protocol import Progress, TaskContext


def features_task(model, layer: str, name: str, judgments, ctx: TaskContext) -> Iterator[Progress]:
    """(stimuli, F) features of the loaded model's `layer` for every stimulus."""
    yield Progress(0.0, f"features of {name}")
    return data.layer_features(model, layer, judgments, progress=ctx.progress, cancel=ctx.cancelled)


def scores_task(features: dict[str, np.ndarray], ensemble, trialset: data.TrialSet, judgments,
                ctx: TaskContext) -> Iterator[Progress]:
    """The model table's rows: the embedding's first (when fitted), then every model row's features."""
    rows = []
    steps = len(features) + (ensemble is not None)
    if ensemble is not None:
        yield Progress(0.0, "triplet accuracy of the embedding")
        rows.append(data.score_embedding(ensemble, trialset))
    for k, (name, f) in enumerate(features.items()):
        yield Progress((k + (ensemble is not None)) / steps, f"triplet accuracy of {name}")
        rows.append(data.score_features(name, f, trialset, judgments, ensemble, cancel=ctx.cancelled))
    return rows


def quick_embedding_task(trialset: data.TrialSet, judgments, spec: str, cache: Path,
                         ctx: TaskContext) -> Iterator[Progress]:
    """(ensemble, read from the cache?, coarse trials, their name, convergence measures) of the first quick fit."""
    yield Progress(None, "quick embedding (cached after the first launch)")
    ensemble, cached = data.quick_embedding(trialset, judgments, cache, progress=ctx.progress, cancel=ctx.cancelled)
    coarse, coarse_name = data.coarse_trials(spec, judgments)
    yield Progress(0.95, "convergence measures")
    measures = data.convergence(ensemble, data.dims_loss_of(ensemble), judgments, coarse, None,
                                len(trialset.filtered))
    return ensemble, cached, coarse, coarse_name, measures


def refit_task(trialset: data.TrialSet, judgments, dims: list[int], n_members: int, previous, warm: bool, coarse,
               ctx: TaskContext) -> Iterator[Progress]:
    """(FitResult, convergence measures against `previous`) of a full fit over `dims`."""
    yield Progress(0.0, "fitting the embedding")
    result = data.refit(trialset, judgments, dims, n_members, previous if warm else None, progress=ctx.progress,
                        cancel=ctx.cancelled)
    yield Progress(1.0, "convergence measures")
    measures = data.convergence(result.ensemble, result.dims_loss, judgments, coarse, previous,
                                len(trialset.filtered))
    return result, measures


def propose_task(ensemble, judgments, n_queries: int, n_candidates: int, ctx: TaskContext) -> Iterator[Progress]:
    """The next trials by expected information gain."""
    yield Progress(0.0, "proposing trials")
    return data.propose(ensemble, judgments, n_queries, n_candidates, progress=ctx.progress, cancel=ctx.cancelled)
