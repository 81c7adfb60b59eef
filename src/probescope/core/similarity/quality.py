"""Quality control of similarity judgments as in ImageNet-HSJ: catch trials, session grades, response times.

A catch trial shows, among the references, the mirror image of the query (catalog `mirror_of`) or the query itself.
Each catch trial is graded 1 if that reference was picked first, .5 if second, 0 otherwise; a session's grade is the
mean over its catch trials (or the grade the file gives when it has none); trials of no known session (session
-1: a file without session ids) form no session and get no grade. Sessions are premium (> .875),
satisfactory ([.5, .875]) or unsatisfactory (< .5, dropped); trials faster than 1 s are dropped; a trial's weight
becomes its session grade. Filters apply in the order catch -> grade -> rt and each dropped trial is counted once,
under the first filter that drops it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from probescope.core.similarity.trials import PAD, Trials

PREMIUM = 0.875
SATISFACTORY = 0.5
MIN_RT_MS = 1000.0


def catch_position(trials: Trials, mirror_of: np.ndarray | None = None) -> np.ndarray:
    """(m,) position of the catch reference in each trial (the query repeated or its mirror image), -1 if none."""
    refs = trials.references
    hit = refs == trials.query[:, None]
    if mirror_of is not None and len(mirror_of):
        safe = np.where(refs == PAD, 0, refs)
        mirrored = np.where(refs == PAD, PAD, np.asarray(mirror_of)[np.minimum(safe, len(mirror_of) - 1)])
        hit |= (mirrored == trials.query[:, None]) & (refs != PAD) & (refs < len(mirror_of))
    return np.where(hit.any(axis=1), hit.argmax(axis=1), -1)


def catch_grades(trials: Trials, position: np.ndarray) -> np.ndarray:
    """(m,) grade of each catch trial: 1 picked first, .5 picked second, 0 not picked; nan for other trials."""
    grade = np.full(len(trials), np.nan)
    is_catch = position >= 0
    c = trials.choices
    first = c[:, 0] == position
    second = (c[:, 1] == position) if c.shape[1] > 1 else np.zeros(len(trials), dtype=bool)
    grade[is_catch] = np.where(first, 1.0, np.where(second, 0.5, 0.0))[is_catch]
    return grade


def session_grades(trials: Trials, grade: np.ndarray) -> dict[int, float]:
    """Mean catch grade of each known session (id >= 0) that has catch trials."""
    is_catch = ~np.isnan(grade) & (trials.session >= 0)
    sessions, inverse = np.unique(trials.session[is_catch], return_inverse=True)
    totals = np.bincount(inverse, weights=grade[is_catch], minlength=len(sessions))
    counts = np.bincount(inverse, minlength=len(sessions))
    return {int(s): float(t / n) for s, t, n in zip(sessions, totals, counts)}


def grade_class(grade: float) -> str:
    if grade > PREMIUM:
        return "premium"
    return "satisfactory" if grade >= SATISFACTORY else "unsatisfactory"


@dataclass(frozen=True)
class FilterReport:
    """What quality control did: trials dropped per filter, sessions per grade class, trials kept.

    `kept_rows` holds the input rows of the kept trials, in order, so views can map filtered trials back to the file.
    """

    dropped: dict[str, int]
    sessions: dict[str, int]
    kept: int
    catch_trials: int
    grades: dict[int, float] = field(default_factory=dict)
    kept_rows: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int64))


def apply_quality_control(
    trials: Trials,
    mirror_of: np.ndarray | None = None,
    file_grades: dict[int, float] | None = None,
    *,
    catch: bool = True,
    grade: bool = True,
    rt: bool = True,
    min_rt_ms: float = MIN_RT_MS,
) -> tuple[Trials, FilterReport]:
    """Drop catch trials, unsatisfactory sessions and fast trials (each switchable); weight = session grade.

    Unknown response times (nan) are kept; sessions without any grade keep their weights.
    """
    position = catch_position(trials, mirror_of)
    graded = catch_grades(trials, position)
    grades = {**(file_grades or {}), **session_grades(trials, graded)}
    keep = np.ones(len(trials), dtype=bool)
    dropped = {"catch": 0, "grade": 0, "rt": 0}
    if catch:
        drop = position >= 0
        dropped["catch"] = int((keep & drop).sum())
        keep &= ~drop
    weight = trials.weight.copy()
    if grade and grades:
        ids = np.array(sorted(grades), dtype=np.int64)
        values = np.array([grades[i] for i in ids])
        loc = np.searchsorted(ids, trials.session)
        loc = np.minimum(loc, len(ids) - 1)
        has = ids[loc] == trials.session
        session_grade = np.where(has, values[loc], np.nan)
        drop = has & (session_grade < SATISFACTORY)
        dropped["grade"] = int((keep & drop).sum())
        keep &= ~drop
        weight = np.where(has, session_grade, weight)
    if rt:
        drop = trials.rt_ms < min_rt_ms  # nan compares False: unknown times are kept
        dropped["rt"] = int((keep & drop).sum())
        keep &= ~drop
    classes = {"premium": 0, "satisfactory": 0, "unsatisfactory": 0}
    for g in grades.values():
        classes[grade_class(g)] += 1
    report = FilterReport(dropped, classes, int(keep.sum()), int((position >= 0).sum()), grades,
                          np.flatnonzero(keep))
    return trials.with_weight(weight).subset(keep), report
