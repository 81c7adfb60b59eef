"""The Similarity workspace's computations as Jobs (`jobs.protocol.Job`): module-level functions of a task context
and picklable keyword arguments, so that they can run in another process. Each yields Progress and returns its
result; the model is named by its `ModelInfo` and found in the process's session (`model_of`), and a layer's
features are kept there too (`features_of`), so the window holds only their names, never the arrays.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

from probescope.core.similarity.ensemble import Ensemble
from probescope.core.similarity.readers import Judgments
from probescope.core.similarity.settings import Filters, ProposeSettings
from probescope.core.similarity.trials import Trials
from probescope.jobs.inputs import ModelInfo, held_judgments, model_of
from probescope.jobs.kernel.pickling import cross_by_name
from probescope.jobs.protocol import Progress, TaskContext
from probescope.jobs.session import Session
from probescope.jobs.similarity import embedding, propose, scores, trials
from probescope.jobs.similarity.trials import TrialSet

FeatureRow = tuple[ModelInfo, str, str]  # a model table row's features: the model, its layer and the pooling


def analyse_job(ctx: TaskContext, *, judgments: Judgments, filters: Filters) -> tuple[TrialSet, tuple]:
    """(the trials under quality control, (each trial's query caption, its sort key)) for the trial list. Judgments
    the session holds get their trial set held there too: the jobs that take it then send its name to the compute
    kernel (at 312,500 trials its pickle took 62 ms of the GUI thread at each submit, the judgments' 29 ms)."""
    name = ctx.session.name_of(judgments)
    trialset = held_trialset(ctx.session, (name[1], filters)) if name is not None and name[0] == "judgments" \
        else trials.analyse(judgments, filters)
    return trialset, trials.query_captions(judgments, trialset.trials.query)


def held_trialset(session: Session, key: tuple) -> TrialSet:
    """The trial set held in `session` under `key` (a `judgments_key` and the Filters), analysed when none is."""
    judgments_key, filters = key
    return session.get("trialset", key, lambda: trials.analyse(held_judgments(session, judgments_key), filters))


cross_by_name("probescope.jobs.similarity.trials.TrialSet", held_trialset)  # (by the session's name)


def features_of(ctx: TaskContext, row: FeatureRow, judgments: Judgments) -> np.ndarray:
    """(stimuli, F) features of a model's layer for every stimulus, computed once per process (the session keeps
    them; a process that lost them reads them back from the activation cache)."""
    info, layer, pool = row
    key = (info.request, info.device, layer, pool, str(judgments.source), judgments.n_stimuli)
    return ctx.session.get("similarity features", key, lambda: scores.layer_features(
        model_of(ctx, info), layer, judgments, pool=pool, progress=ctx.progress, cancel=ctx.cancelled))


def features_job(ctx: TaskContext, *, row: FeatureRow, name: str, judgments: Judgments) -> Iterator[Progress]:
    """A model row's features, made and kept in the session (the window learns only that they are there)."""
    yield Progress(0.0, f"features of {name}")
    features_of(ctx, row, judgments)
    return name


def scores_job(ctx: TaskContext, *, rows: dict[str, FeatureRow], ensemble: Ensemble | None, trialset: TrialSet,
               judgments: Judgments) -> Iterator[Progress]:
    """The model table's rows: the embedding's first (when fitted), then every model row's."""
    out = []
    steps = len(rows) + (ensemble is not None)
    if ensemble is not None:
        yield Progress(0.0, "triplet accuracy of the embedding")
        out.append(scores.score_embedding(ensemble, trialset))
    for k, (name, row) in enumerate(rows.items()):
        yield Progress((k + (ensemble is not None)) / steps, f"triplet accuracy of {name}")
        features = features_of(ctx, row, judgments)
        out.append(scores.score_features(name, features, trialset, judgments, ensemble, cancel=ctx.cancelled))
    return out


def quick_embedding_job(ctx: TaskContext, *, trialset: TrialSet, judgments: Judgments, spec: str,
                        cache: Path) -> Iterator[Progress]:
    """(ensemble, read from the cache?, coarse trials, their name, convergence measures) of the first quick fit."""
    yield Progress(None, "quick embedding (cached after the first launch)")
    ensemble, cached = embedding.quick_embedding(trialset, judgments, cache, progress=ctx.progress,
                                                 cancel=ctx.cancelled)
    coarse, coarse_name = embedding.coarse_trials(spec, judgments)
    yield Progress(0.95, "convergence measures")
    measures = embedding.convergence(ensemble, embedding.dims_loss_of(ensemble), judgments, coarse, None,
                                     len(trialset.filtered))
    return ensemble, cached, coarse, coarse_name, measures


def refit_job(ctx: TaskContext, *, trialset: TrialSet, judgments: Judgments, dims: list[int], n_members: int,
              previous: Ensemble | None, warm: bool, coarse: Trials | None) -> Iterator[Progress]:
    """(FitResult, convergence measures against `previous`) of a full fit over `dims`."""
    yield Progress(0.0, "fitting the embedding")
    result = embedding.refit(trialset, judgments, dims, n_members, previous if warm else None,
                             progress=ctx.progress, cancel=ctx.cancelled)
    yield Progress(1.0, "convergence measures")
    measures = embedding.convergence(result.ensemble, result.dims_loss, judgments, coarse, previous,
                                     len(trialset.filtered))
    return result, measures


def propose_job(ctx: TaskContext, *, ensemble: Ensemble, judgments: Judgments,
                settings: ProposeSettings) -> Iterator[Progress]:
    """The next trials by expected information gain."""
    yield Progress(0.0, "proposing trials")
    return propose.propose(ensemble, judgments, settings, progress=ctx.progress, cancel=ctx.cancelled)
