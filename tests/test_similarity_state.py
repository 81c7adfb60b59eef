"""The Similarity workspace's view logic without a window: its evented state (what changes fire, what the list,
the sheet, the palette and the embedding's highlight are told), and its computations as Jobs that pickle and run
on their own, with the window's and the command line's defaults read from one settings module."""

from __future__ import annotations

import argparse
import pickle
from dataclasses import asdict, fields
from pathlib import Path

import numpy as np
import pytest

from oracles.simulated_trials import clustered_points, simulate_trials
from probescope.app.similarity.state import SimilarityState
from probescope.core.similarity.catalog import Catalog
from probescope.core.similarity.readers import Judgments
from probescope.core.similarity.settings import (
    DEFAULT_SEED,
    WINDOW_PROPOSAL,
    AgreementSettings,
    EmbeddingSettings,
    Filters,
    ProposeSettings,
    dims_span,
)
from probescope.core.similarity.trials import Trials
from probescope.jobs.inputs import Loaded
from probescope.jobs.protocol import Job, TaskContext
from probescope.jobs.similarity import scores, tasks
from probescope.jobs.similarity.trials import ListFilter, analyse
from probescope.main import build_parser


@pytest.fixture(scope="module")
def judgments() -> Judgments:
    """40 stimuli in 4 clusters, 300 simulated 8-rank-2 trials in 6 sessions (no catalog images)."""
    rng = np.random.default_rng(0)
    z = clustered_points(40, 2, 4, rng)
    trials = simulate_trials(z, 300, rng)
    trials = Trials.make(trials.query, trials.references, trials.choices, np.arange(300) // 50,
                         np.arange(300) // 50, rng.lognormal(np.log(4000), 0.5, 300))
    catalog = Catalog(tuple(f"{i}.png" for i in range(40)), np.full(40, -1), Path("."),
                      tuple("abcd"[i % 4] for i in range(40)))
    return Judgments(trials, catalog, Path("trials.csv"), "csv")


@pytest.fixture
def state(judgments) -> SimilarityState:
    shown = SimilarityState()
    shown.start(Loaded("judgments", "trials.csv", "trials.csv (300 trials)", judgments))
    shown.trialset = analyse(judgments, Filters())
    return shown


def test_changes_fire_once_and_new_judgments_reset_quietly(state, judgments):
    heard = []
    state.events.connect(lambda info: heard.append(info.signal.name))
    state.trial = 3
    state.trial = 3  # the same value: no event
    state.scores = []  # another (empty) list: an event (results are compared by identity)
    assert heard == ["trial", "scores"]
    heard.clear()
    state.start(Loaded("judgments", "other.csv", "other.csv", judgments))  # nothing of the old file is announced
    assert heard == [] and state.trial == -1 and state.trialset is None and state.rows == {} and state.history == []


def test_a_fit_lands_in_the_history_before_its_ensemble_is_announced(state):
    seen = []
    state.events.ensemble.connect(lambda ensemble: seen.append((ensemble, len(state.history))))
    state.fitted("first", "measures 1")
    state.fitted("second", "measures 2")
    assert seen == [("first", 1), ("second", 2)] and state.history == ["measures 1", "measures 2"]


def test_list_sheet_palette_and_highlight_follow_the_selected_row(state, judgments):
    features = np.random.default_rng(1).normal(size=(40, 3))
    row = scores.score_features("noise", features, state.trialset, judgments, None)
    state.scores = [row]
    agreement = state.agreement(0, "cosine")
    assert agreement is row.agreement["cosine"] and state.agreement(1, "cosine") is None
    mask = state.list_mask(ListFilter(agreement=(0, 5)), agreement)
    np.testing.assert_array_equal(mask, agreement.per_trial_correct <= 5)
    assert state.list_mask(ListFilter(agreement=(0, 5)), None).all()  # no row selected: the range is not applied
    titles = state.sheet_titles([0, 7], 0, "cosine")
    assert titles == [f"trial {t + 1} · {agreement.per_trial_correct[t]}/{agreement.per_trial_total[t]} (noise, "
                      "cosine)" for t in (0, 7)]
    assert state.sheet_titles([7], -1, "cosine") == ["trial 8"]
    assert state.trial_items("12 x 301 300") == [("Trial 12", 11), ("Trial 300", 299)]
    assert state.highlight() is None  # no trial on screen yet
    state.trial, state.trial_shown = 7, True
    query, picked, refs = state.highlight()
    trials = judgments.trials
    assert query == trials.query[7] and refs == trials.references[7].tolist()
    assert picked == [refs[c] for c in trials.choices[7]]
    assert not state.initial_done()  # the model table has no embedding row yet
    assert state.query_classes() == ["a", "b", "c", "d"]


def test_the_window_jobs_pickle_and_run_on_their_own(state, judgments):
    """What the window submits travels by value (a later compute kernel runs it in another process); run here with
    a fresh context, it gives the window's results."""
    job = Job(tasks.analyse_job, dict(judgments=judgments, filters=Filters(rt=False)), compute=False)
    copy = pickle.loads(pickle.dumps(job))
    assert copy.name == "probescope.jobs.similarity.tasks.analyse_job"
    trialset, (names, rank) = copy(TaskContext())
    assert trialset.report.kept == analyse(judgments, Filters(rt=False)).report.kept
    assert len(names) == len(rank) == len(judgments.trials)
    proposal = Job(tasks.propose_job, dict(ensemble=None, judgments=judgments, settings=WINDOW_PROPOSAL))
    assert pickle.loads(pickle.dumps(proposal)).kwargs["settings"] == WINDOW_PROPOSAL


def test_every_similarity_default_is_read_from_its_settings_field():
    """The command line's defaults are the settings dataclasses' (no default typed in cli/), and the window starts
    from the same ones (its proposal preset changes only the size)."""
    commands = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)).choices
    argv = {"similarity": ["--judgments", "x"], "embed": ["--judgments", "x"],
            "propose": ["--judgments", "x", "--embedding", "e", "--out", "o"]}
    for command, cls in (("similarity", AgreementSettings), ("embed", EmbeddingSettings),
                         ("propose", ProposeSettings)):
        parsed = commands[command].parse_args(argv[command])
        for f in fields(cls):
            value = getattr(parsed, f.name)
            assert getattr(value, "text", value) == f.default, (command, f.name)
        assert parsed.seed == DEFAULT_SEED
    assert dims_span(EmbeddingSettings().dims) == (2, 10)
    assert asdict(WINDOW_PROPOSAL) | {"queries": 100, "candidates": 1000} == asdict(ProposeSettings())
