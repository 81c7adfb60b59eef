"""Triplet accuracy of model features against the human choices: the model table's rows in the Similarity
workspace and `probescope similarity`'s report, from the same engine calls (`probescope.core.similarity`).

Ties count as wrong; accuracy is over the trials quality control keeps, weighted by session grade; the psychological
embedding's row ranks references by its expected similarity; Spearman correlations leave mirrored catch images out.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probescope.core.cache import cache_dir
from probescope.core.data.preprocess import Preprocess
from probescope.core.errors import InputError
from probescope.core.models.layout import Layout
from probescope.core.similarity.agreement import (
    DISTANCES,
    Agreement,
    agreement_from_distances,
    pair_distances,
    reference_distances,
    triplet_agreement,
)
from probescope.core.similarity.correlation import (
    MODEL_SIMILARITIES,
    Correlation,
    embedding_correlation,
    expected_similarity,
)
from probescope.core.similarity.ensemble import Ensemble
from probescope.core.similarity.quality import FilterReport
from probescope.core.similarity.readers import Judgments
from probescope.core.similarity.settings import DEFAULT_SEED, AgreementSettings
from probescope.core.similarity.sources import load_features, loaded_model_features, model_features
from probescope.core.similarity.trials import Trials
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel
from probescope.core.trust import NO_TRUST, Trust
from probescope.jobs.similarity.trials import TrialSet

EMBEDDING_ROW = "psychological embedding"


@dataclass(frozen=True)
class Scores:
    """One row of the model table: triplet agreement per distance on every trial of the file (for the list and the
    grid) and accuracy on the trials quality control keeps (for the table); Spearman with the embedding.

    For the psychological embedding the distance is minus its expected similarity, the same under every column.
    """

    name: str
    kind: str  # 'model' or 'embedding'
    distances: dict[str, np.ndarray]  # metric -> (m, R) query-to-reference distances, presentation order
    agreement: dict[str, Agreement]  # metric -> per-trial agreement over all trials
    accuracy: dict[str, float]  # metric -> triplet accuracy over the kept trials
    spearman: dict[str, float]  # 'dot', 'cosine' -> Spearman with the embedding (models only, when one is fitted)
    n_triplets: int = 0
    pairs: int = 0


def _score(name: str, kind: str, distances: dict[str, np.ndarray], trialset: TrialSet,
           spearman: dict[str, float], pairs: int = 0) -> Scores:
    agreement = {m: agreement_from_distances(trialset.trials, d) for m, d in distances.items()}
    kept = {m: agreement_from_distances(trialset.filtered, d[trialset.kept]) for m, d in distances.items()}
    n = next(iter(kept.values())).n_triplets if kept else 0
    return Scores(name, kind, distances, agreement, {m: a.accuracy for m, a in kept.items()}, spearman, n, pairs)


def non_mirror_stimuli(judgments: Judgments) -> np.ndarray | None:
    """Stimuli that are not mirrored catch images (they would pair trivially with their originals)."""
    if judgments.catalog is None:
        return None
    return np.nonzero(judgments.catalog.mirror_of < 0)[0]


def score_features(name: str, features: np.ndarray, trialset: TrialSet, judgments: Judgments,
                   ensemble: Ensemble | None, cancel: CancelCheck | None = None) -> Scores:
    """Triplet agreement of a feature matrix under L1, L2 and cosine, and its Spearman correlation with the embedding
    (dot and cosine similarity, mirrored catch images left out)."""
    distances = {}
    for metric in DISTANCES:
        check_cancel(cancel)
        distances[metric] = reference_distances(trialset.trials, lambda i, j, m=metric: pair_distances(features, i,
                                                                                                      j, m))
    spearman: dict[str, float] = {}
    pairs = 0
    if ensemble is not None and ensemble.n_stimuli == len(features):
        stimuli = non_mirror_stimuli(judgments)
        for kind in MODEL_SIMILARITIES:
            corr: Correlation = embedding_correlation(ensemble, features, kind, stimuli=stimuli)
            spearman[kind], pairs = corr.value, corr.n_pairs
    return _score(name, "model", distances, trialset, spearman, pairs)


def embedding_distances(ensemble: Ensemble, trials: Trials, seed: int = DEFAULT_SEED) -> np.ndarray:
    """(m, R) minus the embedding's expected similarity of each trial's query to its references: the distance
    the embedding's own triplet accuracy ranks references by."""
    return reference_distances(trials, lambda i, j: -expected_similarity(ensemble, i, j, seed=seed).mean(0))


def score_embedding(ensemble: Ensemble, trialset: TrialSet, seed: int = DEFAULT_SEED) -> Scores:
    """The embedding's own triplet accuracy: references ranked by expected similarity (the reference row)."""
    d = embedding_distances(ensemble, trialset.trials, seed)
    return _score(EMBEDDING_ROW, "embedding", dict.fromkeys(DISTANCES, d), trialset, {})


def layer_features(model, layer: str, judgments: Judgments, *, pool: str = "avg",
                   progress: ProgressCallback | None = None, cancel: CancelCheck | None = None) -> np.ndarray:
    """(n, F) features of `layer` for every catalog image (`pool`: 'avg' the mean over its positions, 'cls' a token
    layer's class token), through the activation cache (as `probescope similarity --model --layer --pool`
    computes them, but with the model already loaded)."""
    if judgments.catalog is None:
        raise InputError("model features need the stimulus images: open the judgments with their catalog",
                         judgments.source)
    return loaded_model_features(model, judgments.catalog, layer, pool=pool, cache_dir=cache_dir(),
                                 progress=progress, cancel=cancel)


# ------------------------------------------------------------------------------------------ probescope similarity
def distances_of(text: str) -> list[str]:
    """The distances a comma list names (lower case, in its order); InputError for an unknown or empty list."""
    distances = [d.strip().lower() for d in text.split(",") if d.strip()]
    unknown = sorted(set(distances) - set(DISTANCES))
    if unknown or not distances:
        raise InputError(f"--distance: unknown {', '.join(unknown) or 'empty list'} (choose from cosine, l1, l2)")
    return distances


def similarity_report(judgments: Judgments, trials: Trials, report: FilterReport, features: np.ndarray,
                      feature_name: str, settings: AgreementSettings, ensemble: Ensemble | None = None,
                      embedding_path: Path | None = None) -> dict:
    """`probescope similarity`'s result: triplet accuracy and per-trial agreement of `features` on the kept
    `trials` under each of the settings' distances, and with an embedding its own accuracy (the reference row) and
    the Spearman correlation of the model's similarity with its expected similarity."""
    distances = distances_of(settings.distance)
    results = {d: triplet_agreement(trials, features, d) for d in distances}
    first = results[distances[0]]
    out: dict = {
        "judgments": str(judgments.source), "format": judgments.format, "simulated": judgments.simulated,
        "notes": list(judgments.notes), "features": feature_name, "trials": len(trials),
        "trials_read": len(judgments.trials), "triplets": first.n_triplets,
        "accuracy": {d: r.accuracy for d, r in results.items()},
        "dropped": report.dropped, "sessions": report.sessions,
        "per_trial_agreement": {
            d: {"mean": float(r.per_trial_correct.mean()),
                "histogram": np.bincount(r.per_trial_correct, minlength=int(r.per_trial_total.max()) + 1).tolist()}
            for d, r in results.items()},
    }
    if ensemble is not None:
        if ensemble.n_stimuli != judgments.n_stimuli:
            raise InputError(f"the embedding has {ensemble.n_stimuli} stimuli, the judgments {judgments.n_stimuli}",
                             embedding_path)
        psych = agreement_from_distances(trials, embedding_distances(ensemble, trials, settings.seed))
        corr = {k: embedding_correlation(ensemble, features, k, stimuli=non_mirror_stimuli(judgments),
                                         max_pairs=settings.max_pairs, seed=settings.seed)
                for k in MODEL_SIMILARITIES}
        out["embedding"] = {
            "path": str(embedding_path), "accuracy": psych.accuracy,
            "correlation": {k: {"spearman": c.value, "pairs": c.n_pairs, "sampled": c.sampled}
                            for k, c in corr.items()},
        }
    return out


def stimulus_features(judgments: Judgments, *, features: Path | None = None, model: str | None = None,
                      layer: str | None = None, pool: str = "avg", device: str = "cpu", trust: Trust = NO_TRUST,
                      preprocess: Preprocess | None = None, input_size: int | tuple[int, int] | None = None,
                      layout: Layout | None = None,
                      progress: ProgressCallback | None = None) -> tuple[np.ndarray, str]:
    """(features, what they are) of every stimulus: a saved (n, F) matrix, or a model spec's layer over the
    catalog's images (through the activation cache)."""
    if features is not None:
        return load_features(features, judgments), str(features)
    if judgments.catalog is None:
        raise InputError("--model needs a catalog of stimulus images (--catalog)", judgments.source)

    matrix = model_features(judgments.catalog, model, layer, pool=pool, device=device, cache_dir=cache_dir(),
                            progress=progress, trust=trust, preprocess=preprocess, input_size=input_size,
                            layout=layout)
    return matrix, f"{model} {layer} ({pool})"
