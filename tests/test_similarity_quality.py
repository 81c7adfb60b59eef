"""Catch-trial grading and the quality filters (counts of what each drops)."""

from __future__ import annotations

import numpy as np
import pytest

from probescope.core.similarity.quality import (
    apply_quality_control,
    catch_grades,
    catch_position,
    grade_class,
    session_grades,
)
from probescope.core.similarity.trials import Trials


def make() -> tuple[Trials, np.ndarray]:
    # stimuli 0..9; 10 mirrors 0, 11 mirrors 1
    mirror_of = np.array([-1] * 10 + [0, 1])
    refs = np.array([
        [10, 2, 3], [4, 11, 5], [2, 3, 0],  # session 0: catch picked first, second, (query repeated) not picked
        [2, 3, 4], [5, 6, 7],               # session 0: ordinary
        [10, 5, 6], [3, 4, 5], [4, 5, 6],   # session 1: catch picked first; ordinary (one fast)
        [4, 5, 6],                          # session 2: no catch trials
    ])
    query = np.array([0, 1, 0, 1, 2, 0, 1, 2, 3])
    choices = np.array([[0, 1], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1], [0, 1]])
    session = np.array([0, 0, 0, 0, 0, 1, 1, 1, 2])
    rt = np.array([3000, 3000, 3000, 900, np.nan, 3000, 3000, 500, 3000.0])
    return Trials.make(query, refs, choices, session, session, rt), mirror_of


def test_catch_detection_and_grades() -> None:
    trials, mirror_of = make()
    pos = catch_position(trials, mirror_of)
    assert pos.tolist() == [0, 1, 2, -1, -1, 0, -1, -1, -1]
    grades = catch_grades(trials, pos)
    assert grades[:3].tolist() == [1.0, 0.5, 0.0] and grades[5] == 1.0 and np.isnan(grades[3])
    assert session_grades(trials, grades) == {0: 0.5, 1: 1.0}
    assert catch_position(trials, None).tolist() == [-1, -1, 2, -1, -1, -1, -1, -1, -1]  # only the repeated query


def test_grade_classes() -> None:
    assert grade_class(0.9) == "premium" and grade_class(0.875) == "satisfactory"
    assert grade_class(0.5) == "satisfactory" and grade_class(0.49) == "unsatisfactory"


def test_filters_and_counts() -> None:
    trials, mirror_of = make()
    kept, report = apply_quality_control(trials, mirror_of)
    # catch: 4 catch trials dropped; grade: session 0 = .5 (kept, satisfactory); rt: trials 3 and 7 (<1 s)
    assert report.dropped == {"catch": 4, "grade": 0, "rt": 2}
    assert report.kept == len(kept) == 3 and report.catch_trials == 4
    assert report.sessions == {"premium": 1, "satisfactory": 1, "unsatisfactory": 0}
    np.testing.assert_allclose(kept.weight, [0.5, 1.0, 1.0])  # session 0 grade, session 1 grade, session 2 as given


def test_unsatisfactory_session_dropped_and_filters_switch_off() -> None:
    trials, mirror_of = make()
    choices = trials.choices.copy()
    choices[1] = [2, 0]  # session 0's second catch not picked -> grade (1 + 0 + 0) / 3 < .5
    trials = Trials.make(trials.query, trials.references, choices, trials.session, trials.participant, trials.rt_ms)
    _, report = apply_quality_control(trials, mirror_of)
    assert report.dropped == {"catch": 4, "grade": 2, "rt": 1}
    kept, report = apply_quality_control(trials, mirror_of, catch=False, grade=False, rt=False)
    assert report.dropped == {"catch": 0, "grade": 0, "rt": 0} and len(kept) == len(trials)
    np.testing.assert_allclose(kept.weight, 1.0)
    _, report = apply_quality_control(trials, mirror_of, catch=False)
    assert report.dropped["grade"] == 5  # the whole session, catch trials included


def test_file_grades_apply_when_a_session_has_no_catch_trials() -> None:
    trials, mirror_of = make()
    kept, report = apply_quality_control(trials, mirror_of, {2: 0.3}, rt=False)
    assert report.dropped["grade"] == 1 and 3 not in kept.query[kept.session == 2]
    kept, _ = apply_quality_control(trials, mirror_of, {2: 0.8}, rt=False)
    assert kept.weight[kept.session == 2].tolist() == pytest.approx([0.8])
