"""What the Similarity workspace computes, as plain functions over the similarity engine, run in the worker pool.

Nothing here touches a widget: each function takes judgments, features or an embedding and returns a small frozen
result (arrays, dicts) that the workspace hands to its views. Quality control, triplet agreement, embedding fits,
correlations and proposals are the engine's (`probescope.core.similarity`); this module only decides which trials
and which features they run on, and caches the first quick embedding on disk so a second launch shows it at once.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import weakref
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probescope.core.similarity.agreement import (
    DISTANCES,
    Agreement,
    agreement_from_distances,
    pair_distances,
    reference_distances,
)
from probescope.core.similarity.correlation import (
    MODEL_SIMILARITIES,
    Correlation,
    consecutive_correlation,
    embedding_correlation,
    expected_similarity,
    within_ensemble_correlation,
)
from probescope.core.similarity.embedding import Ensemble, FitOptions, FitResult, ensemble_cross_entropy, fit_ensemble
from probescope.core.similarity.quality import (
    FilterReport,
    apply_quality_control,
    catch_grades,
    catch_position,
    grade_class,
)
from probescope.core.similarity.readers import Judgments
from probescope.core.similarity.trials import PAD, Trials, triplets
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel

# the first view's embedding: one small dimensionality, few epochs, an ensemble of 3 (a few seconds for the demo);
# the refit controls run the full dimensionality search with the engine's default options
QUICK_DIMS = 4
QUICK_MEMBERS = 3
QUICK_OPTIONS = FitOptions(max_epochs=60, patience=20)
EMBEDDING_ROW = "psychological embedding"
CACHE_SUBDIR = "similarity_embeddings"
CACHE_VERSION = 1


@dataclass(frozen=True)
class Filters:
    """The quality-control switches (ImageNet-HSJ's: drop catch trials, unsatisfactory sessions, trials under 1 s)."""

    catch: bool = True
    grade: bool = True
    rt: bool = True


@dataclass(frozen=True)
class TrialSet:
    """All trials of a file with what the lists and filters need per trial, and the trials quality control keeps.

    `kept` indexes `trials` (the file's rows); `filtered` holds those rows with their session-grade weights.
    """

    trials: Trials
    filters: Filters
    kept: np.ndarray  # (k,) row indices of the trials quality control keeps
    filtered: Trials
    report: FilterReport
    catch_position: np.ndarray  # (m,) position of the catch reference, -1 for ordinary trials
    catch_grade: np.ndarray  # (m,) 1, .5, 0 for catch trials, nan otherwise
    session_grade: np.ndarray  # (m,) the trial's session grade, nan when unknown
    query_class: tuple[str, ...]  # (m,) the query's class ('' when the catalog has none)
    grade_class: np.ndarray  # (m,) 'premium', 'satisfactory', 'unsatisfactory' or 'ungraded', by session

    @property
    def kept_mask(self) -> np.ndarray:
        mask = np.zeros(len(self.trials), dtype=bool)
        mask[self.kept] = True
        return mask


def analyse(judgments: Judgments, filters: Filters) -> TrialSet:
    """Quality control of all the file's trials under `filters`, with per-trial grades and classes for the list."""
    trials = judgments.trials
    mirror = judgments.catalog.mirror_of if judgments.catalog is not None else None
    filtered, report = apply_quality_control(trials, mirror, judgments.session_grade, catch=filters.catch,
                                             grade=filters.grade, rt=filters.rt)
    kept = report.kept_rows
    position = catch_position(trials, mirror)
    grades = report.grades
    session_grade = np.array([grades.get(int(s), np.nan) for s in trials.session]) if len(trials) else np.empty(0)
    classes = stimulus_classes(judgments)
    query_class = tuple(classes[q] for q in trials.query) if classes else ("",) * len(trials)
    names = {s: grade_class(g) for s, g in grades.items()}
    classes_of = np.array([names.get(int(s), "ungraded") for s in trials.session], dtype=object)
    stimulus_names(judgments)  # the list's captions, made here in the worker
    return TrialSet(trials, filters, kept, filtered, report, position, catch_grades(trials, position), session_grade,
                    query_class, classes_of)


GRADE_CLASSES = ("premium", "satisfactory", "unsatisfactory", "ungraded")
CATCH_CLASSES = ("catch trials", "ordinary trials")


@dataclass(frozen=True)
class ListFilter:
    """What the trial list shows: a session grade class, catch or ordinary trials, a query class, a range of
    triplets the selected model gets right, only trials kept by quality control, one query stimulus ('' / None /
    -1: no restriction)."""

    grade: str = ""
    catch: str = ""
    query_class: str = ""
    agreement: tuple[int, int] | None = None
    kept_only: bool = False
    query: int = -1


def list_mask(trialset: TrialSet, rule: ListFilter, correct: np.ndarray | None) -> np.ndarray:
    """(m,) the trials that pass `rule`; `correct` is the selected model's per-trial agreement (None: no model)."""
    ts = trialset
    mask = np.ones(len(ts.trials), dtype=bool)
    if rule.grade in GRADE_CLASSES:
        mask &= ts.grade_class == rule.grade
    if rule.catch == CATCH_CLASSES[0]:
        mask &= ts.catch_position >= 0
    elif rule.catch == CATCH_CLASSES[1]:
        mask &= ts.catch_position < 0
    if rule.query_class:
        mask &= np.asarray(ts.query_class, dtype=object) == rule.query_class
    if rule.agreement is not None and correct is not None:
        mask &= (correct >= rule.agreement[0]) & (correct <= rule.agreement[1])
    if rule.kept_only:
        mask &= ts.kept_mask
    if rule.query >= 0:
        mask &= ts.trials.query == rule.query
    return mask


def stimulus_classes(judgments: Judgments) -> tuple[str, ...]:
    catalog = judgments.catalog
    return catalog.classes if catalog is not None and len(catalog.classes) == len(catalog) else ()


def stimulus_name(judgments: Judgments, stimulus: int) -> str:
    """How a stimulus is captioned: its class and id, and what it mirrors."""
    names = stimulus_names(judgments)
    return names[stimulus] if 0 <= stimulus < len(names) else _caption(judgments, stimulus)


def query_captions(judgments: Judgments, query: np.ndarray) -> tuple[list[str], np.ndarray]:
    """Each trial's query caption and the trial list's sort key for it, made in the worker: at 312,500 trials the
    GUI thread spent 290 ms on the captions and 200 ms on the ranks."""
    return caption_ranks(query, lambda stimulus: stimulus_name(judgments, stimulus))


def caption_ranks(query: np.ndarray, name_of: Callable[[int], str]) -> tuple[list[str], np.ndarray]:
    """(name_of(q) per trial, its rank among all names: equal names, equal ranks), looking each stimulus up once."""
    ids, inverse = np.unique(query, return_inverse=True)
    inverse = inverse.reshape(-1)
    unique_names = [name_of(int(i)) for i in ids]
    rank = np.empty(len(ids), dtype=np.float64)
    previous, r = None, -1
    for k in sorted(range(len(ids)), key=unique_names.__getitem__):
        if unique_names[k] != previous:
            previous, r = unique_names[k], r + 1
        rank[k] = r
    return [unique_names[k] for k in inverse.tolist()], rank[inverse]


_NAMES: dict[int, list[str]] = {}  # id(judgments) -> every stimulus's caption, dropped with the judgments


def stimulus_names(judgments: Judgments) -> list[str]:
    """Every stimulus's caption, made once per judgments (the trial list captions each of 312,500 trials' query;
    `analyse` makes them in the worker)."""
    key = id(judgments)
    names = _NAMES.get(key)
    if names is None:
        names = _NAMES[key] = [_caption(judgments, s) for s in range(judgments.n_stimuli)]
        weakref.finalize(judgments, _NAMES.pop, key, None)
    return names


def _caption(judgments: Judgments, stimulus: int) -> str:
    classes = stimulus_classes(judgments)
    name = f"{classes[stimulus]} #{stimulus}" if classes and stimulus < len(classes) and classes[stimulus] else (
        f"#{stimulus}")
    catalog = judgments.catalog
    if catalog is not None and stimulus < len(catalog.mirror_of) and catalog.mirror_of[stimulus] >= 0:
        name += f" (mirror of #{catalog.mirror_of[stimulus]})"
    return name


# ------------------------------------------------------------------------------------------------ model scores
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


def score_embedding(ensemble: Ensemble, trialset: TrialSet, seed: int = 0) -> Scores:
    """The embedding's own triplet accuracy: references ranked by expected similarity (the reference row)."""
    d = reference_distances(trialset.trials, lambda i, j: -expected_similarity(ensemble, i, j, seed=seed).mean(0))
    return _score(EMBEDDING_ROW, "embedding", dict.fromkeys(DISTANCES, d), trialset, {})


def layer_features(model, layer: str, judgments: Judgments, *, progress: ProgressCallback | None = None,
                   cancel: CancelCheck | None = None) -> np.ndarray:
    """(n, F) globally average-pooled activations of `layer` for every catalog image, through the activation cache
    (as `probescope similarity --model --layer` computes them, but with the model already loaded)."""
    from probescope.core.cache import cache_dir
    from probescope.core.errors import InputError
    from probescope.core.similarity.sources import loaded_model_features

    if judgments.catalog is None:
        raise InputError("model features need the stimulus images: open the judgments with their catalog",
                         judgments.source)
    return loaded_model_features(model, judgments.catalog, layer, cache_dir=cache_dir(), progress=progress,
                                 cancel=cancel)


# ----------------------------------------------------------------------------------------------- one trial's view
def wrong_triplets(trials: Trials, row: int, distance: np.ndarray) -> list[tuple[int, int]]:
    """The triplets of trial `row` a model gets wrong, as (closer, farther) reference positions by the participant's
    choices: the model's distance to the closer one is not strictly smaller (ties are wrong, as in the engine)."""
    trial = trials.subset(np.array([row]))
    _, closer, farther, _ = triplets(trial)
    refs = list(trial.references[0])
    out = []
    for a, b in zip(closer.tolist(), farther.tolist()):
        pa, pb = refs.index(a), refs.index(b)
        if not distance[pa] < distance[pb]:
            out.append((pa, pb))
    return out


def model_ranks(distance: np.ndarray, n_references: int) -> list[int]:
    """1-based rank of each reference by distance (closest first; ties keep presentation order)."""
    order = np.argsort(distance[:n_references], kind="stable")
    ranks = np.empty(n_references, dtype=np.int64)
    ranks[order] = np.arange(1, n_references + 1)
    return ranks.tolist()


# ------------------------------------------------------------------------------------------------------ embedding
@dataclass(frozen=True)
class Convergence:
    """The fit's convergence measures (ImageNet-HSJ section 5)."""

    dims_loss: dict[int, float]  # mean held-out cross-entropy per dimensionality tried
    within: float  # within-ensemble correlation (Pearson of expected similarity)
    coarse_loss: float | None  # cross-entropy on the coarse-grained (randomly assembled) trials
    consecutive: float | None  # correlation with the previous fit
    n_trials: int
    dims: int


def embedding_cache_path(judgments: Judgments, filters: Filters, folder: Path) -> Path:
    """Where the quick first embedding of these judgments is kept: keyed by the file, its size and time, the
    filters and the quick fit's settings, so a changed file or setting never reuses a stale fit."""
    source = Path(judgments.source)
    try:
        stat = source.stat()
        identity = [str(source.resolve()), stat.st_size, stat.st_mtime_ns]
    except OSError:
        identity = [str(source)]
    key = json.dumps([CACHE_VERSION, identity, len(judgments.trials), judgments.n_stimuli,
                      dataclasses.asdict(filters), QUICK_DIMS, QUICK_MEMBERS, dataclasses.asdict(QUICK_OPTIONS)])
    return folder / CACHE_SUBDIR / f"{hashlib.sha1(key.encode()).hexdigest()[:20]}.npz"


def quick_embedding(trialset: TrialSet, judgments: Judgments, cache: Path | None, *,
                    progress: ProgressCallback | None = None,
                    cancel: CancelCheck | None = None) -> tuple[Ensemble, bool]:
    """The first view's embedding: read from the cache, else a quick fit (saved there). Returns (ensemble, cached)."""
    path = embedding_cache_path(judgments, trialset.filters, cache) if cache is not None else None
    if path is not None and path.is_file():
        from probescope.core.errors import InputError

        try:
            ensemble = Ensemble.load(path)
            if ensemble.n_stimuli == judgments.n_stimuli:
                return ensemble, True
        except InputError:
            pass  # a damaged cache entry is refitted and replaced
    with grad_enabled():
        result = fit_ensemble(trialset.filtered, judgments.n_stimuli, [QUICK_DIMS], n_members=QUICK_MEMBERS,
                              options=QUICK_OPTIONS, progress=progress, cancel=cancel)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        result.ensemble.save(path)
    return result.ensemble, False


def refit(trialset: TrialSet, judgments: Judgments, dims: list[int], n_members: int,
          previous: Ensemble | None = None, *, progress: ProgressCallback | None = None,
          cancel: CancelCheck | None = None) -> FitResult:
    """The full fit the refit controls ask for (with `previous`, its members warm-start at its dimensionality)."""
    with grad_enabled():
        return fit_ensemble(trialset.filtered, judgments.n_stimuli, dims, n_members=n_members, previous=previous,
                            options=FitOptions(), progress=progress, cancel=cancel)


@contextlib.contextmanager
def grad_enabled() -> Iterator[None]:
    """Fitting needs autograd, which the compute thread switches off (it runs tasks under inference mode)."""
    import torch

    with torch.inference_mode(False), torch.enable_grad():
        yield


def coarse_trials(spec: str, judgments: Judgments) -> tuple[Trials | None, str]:
    """The coarse-grained trial set that comes with the judgments: the demo's randomly assembled trials, or a zip
    release's test_seqs trials; (None, '') when there is none."""
    if spec == "demo":
        from probescope.core.demo.judgments import ensure_demo_judgments
        from probescope.core.similarity.readers import read_psiz_hdf5

        paths = ensure_demo_judgments()
        return read_psiz_hdf5(paths.coarse, judgments.catalog).trials, "randomly assembled trials"
    if judgments.test is not None and len(judgments.test):
        return judgments.test, "the release's test_seqs trials"
    return None, ""


def convergence(ensemble: Ensemble, dims_loss: dict[int, float], judgments: Judgments, coarse: Trials | None,
                previous: Ensemble | None, n_trials: int) -> Convergence:
    stimuli = non_mirror_stimuli(judgments)
    within = within_ensemble_correlation(ensemble, stimuli=stimuli).value if ensemble.n_members > 1 else float("nan")
    coarse_loss = ensemble_cross_entropy(ensemble, coarse) if coarse is not None else None
    consecutive = None
    if previous is not None:
        consecutive = consecutive_correlation(previous, ensemble, stimuli=stimuli).value
    return Convergence(dict(dims_loss), within, coarse_loss, consecutive, n_trials, ensemble.dims)


def dims_loss_of(ensemble: Ensemble) -> dict[int, float]:
    """The held-out loss per dimensionality that a fit records in its metadata (a cached fit has it too)."""
    return {int(k): float(v) for k, v in ensemble.meta.get("dims_loss", {}).items()}


def projection_2d(ensemble: Ensemble) -> tuple[np.ndarray, str]:
    """(n, 2) positions to plot and how they were made: the member with the lowest held-out loss (members are not
    aligned with each other, so they are never averaged), its two dimensions or its first two principal axes."""
    losses = np.nan_to_num(np.asarray(ensemble.val_loss, dtype=np.float64), nan=np.inf)
    k = int(np.argmin(losses)) if np.isfinite(losses).any() else 0
    z = np.asarray(ensemble.loc[k], dtype=np.float64)
    if z.shape[1] <= 2:
        out = np.zeros((len(z), 2))
        out[:, : z.shape[1]] = z
        return out, f"member {k + 1}, its {z.shape[1]} dimension(s)"
    centred = z - z.mean(0)
    _, s, vt = np.linalg.svd(centred, full_matrices=False)
    share = float((s[:2] ** 2).sum() / max((s**2).sum(), 1e-12))
    return centred @ vt[:2].T, f"member {k + 1}, first two principal axes of {z.shape[1]}-D ({share:.0%} of variance)"


# ------------------------------------------------------------------------------------------------ active learning
def propose(ensemble: Ensemble, judgments: Judgments, n_queries: int, n_candidates: int, *, seed: int = 0,
            progress: ProgressCallback | None = None, cancel: CancelCheck | None = None):
    """The next batch by expected information gain (the engine's `propose_trials`), queries weighted by how often
    each stimulus already served as a query, mirrored catch images never used."""
    from probescope.core.similarity.active import propose_trials

    counts = np.bincount(judgments.trials.query, minlength=ensemble.n_stimuli).astype(np.float64)
    eligible = judgments.catalog.mirror_of < 0 if judgments.catalog is not None else None
    return propose_trials(ensemble, n_queries=n_queries, n_candidates=n_candidates, query_counts=counts,
                          eligible=eligible, seed=seed, progress=progress, cancel=cancel)


def save_proposal(path: str | Path, proposal) -> None:
    """The plain trials CSV layout with `kind` and `info_gain` columns, as `probescope propose` writes it."""
    from probescope.core.similarity.writers import write_trials_csv

    write_trials_csv(path, proposal.trials, {"kind": proposal.kind, "info_gain": proposal.info_gain})


def trial_references(trials: Trials, row: int) -> list[int]:
    return [int(r) for r in trials.references[row] if r != PAD]


def trial_choices(trials: Trials, row: int) -> list[int]:
    return [int(c) for c in trials.choices[row] if c != PAD]
