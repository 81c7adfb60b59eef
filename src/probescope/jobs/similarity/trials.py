"""The judgments' trials as the similarity workflows see them: quality control (the one function `probescope
similarity`, `embed`, `propose` and the Similarity workspace all filter with), each trial's grades and classes, the
trial list's filters and captions, and one trial's view of a model (its ranks, the triplets it gets wrong).

Nothing here touches a widget or torch: each function takes judgments and returns arrays or small frozen results.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probescope.core.errors import InputError
from probescope.core.similarity.quality import (
    FilterReport,
    apply_quality_control,
    catch_grades,
    catch_position,
    grade_class,
)
from probescope.core.similarity.readers import Judgments
from probescope.core.similarity.settings import Filters, filter_flag
from probescope.core.similarity.sources import JudgmentSource, open_judgments
from probescope.core.similarity.trials import PAD, Trials, triplets


def quality_control(judgments: Judgments, filters: Filters) -> tuple[Trials, FilterReport]:
    """The trials `filters` keep (with their session-grade weights) and what each filter dropped."""
    mirror = judgments.catalog.mirror_of if judgments.catalog is not None else None
    return apply_quality_control(judgments.trials, mirror, judgments.session_grade, catch=filters.catch,
                                 grade=filters.grade, rt=filters.rt)


def open_filtered(spec: str, catalog: Path | None, images: Path | None, index_base: int | None,
                  filters: Filters) -> tuple[JudgmentSource, Trials, FilterReport]:
    """The judgments `spec` names ('demo' or a file) and the trials `filters` keep: (source, trials, report);
    InputError saying which filters dropped what when no trial is left."""
    source = open_judgments(spec, catalog, images, index_base=index_base)
    j = source.judgments
    trials, report = quality_control(j, filters)
    if len(trials) == 0:
        why = ", ".join(f"{n} by the {k} filter ({filter_flag(k)} keeps them)" for k, n in report.dropped.items()
                        if n)
        raise InputError(f"no trials left after quality control: of {len(j.trials)} read, {why}", j.source)
    return source, trials, report


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
    filtered, report = quality_control(judgments, filters)
    kept = report.kept_rows
    position = catch_position(trials, judgments.catalog.mirror_of if judgments.catalog is not None else None)
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


def n_references(trials: Trials, row: int) -> int:
    """How many references trial `row` shows (`Trials.n_reference` counts every trial's: 10 ms at 312,500)."""
    return int((trials.references[row] != PAD).sum())


def model_ranks(distance: np.ndarray, n_references: int) -> list[int]:
    """1-based rank of each reference by distance (closest first; ties keep presentation order)."""
    order = np.argsort(distance[:n_references], kind="stable")
    ranks = np.empty(n_references, dtype=np.int64)
    ranks[order] = np.arange(1, n_references + 1)
    return ranks.tolist()


def trial_references(trials: Trials, row: int) -> list[int]:
    return [int(r) for r in trials.references[row] if r != PAD]


def trial_choices(trials: Trials, row: int) -> list[int]:
    return [int(c) for c in trials.choices[row] if c != PAD]
