"""Scoring a sample set is one workflow (jobs.scoring.workflow): the command line, a notebook and the gallery's
stream call the same functions, with every setting from `ScoreSettings`; the gallery's jobs travel (they pickle) and
run in a session of their own."""

from __future__ import annotations

import argparse
import json
import pickle
import re
from dataclasses import fields
from pathlib import Path

import numpy as np
import pytest
from task_steps import run_task

from probescope.core.demo.sampler import DemoSampler
from probescope.core.scoring.settings import WINDOW, ScoreSettings
from probescope.jobs.inputs import OpenRequest, hold_model
from probescope.jobs.protocol import Progress, TaskContext
from probescope.jobs.scoring.stream import MODEL, ClassifierChoice, DemoRun, classifier_of, load_classifier, stream_job
from probescope.jobs.scoring.workflow import ScoreAsk, score_images
from probescope.jobs.session import Session

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "probescope"


def score_parser() -> argparse.ArgumentParser:
    from probescope.main import build_parser

    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices["score"]


def test_the_command_lines_options_are_the_settings_fields():
    """Default, bound or choices and help of each option come from ScoreSettings (--no-shuffle is `shuffle` turned
    off)."""
    actions = {a.dest: a for a in score_parser()._actions}
    for f in fields(ScoreSettings):
        if f.name == "shuffle":
            assert actions["no_shuffle"].default is False and actions["no_shuffle"].help == f.metadata["help"]
            continue
        action = actions[f.name]
        assert action.default == f.default and action.help == f.metadata["help"]
        if "bound" in f.metadata:
            assert action.type.bound == f.metadata["bound"]
        else:
            assert tuple(action.choices or ()) == f.metadata.get("choices", ())
    args = score_parser().parse_args(["--example", "A"])
    from probescope.cli.score import settings_from_args

    assert settings_from_args(args) == ScoreSettings()
    assert settings_from_args(score_parser().parse_args(["--example", "A", "--no-shuffle", "--splits", "3"])) \
        == ScoreSettings(splits=3, shuffle=False)


def test_settings_refuse_what_a_number_cannot_mean():
    from probescope.core.errors import InputError

    with pytest.raises(InputError, match="kid_subsets"):
        ScoreSettings(kid_subsets=0)
    with pytest.raises(InputError, match="copy_cells"):
        ScoreSettings(copy_cells=10**6)
    assert WINDOW.splits == ScoreSettings().splits and WINDOW.seed == ScoreSettings().seed  # the same protocol


def test_each_scoring_default_is_defined_once():
    """torch-fidelity's seed (2020) and the pipeline's batch size have one definition in the package."""
    for name in ("DEFAULT_SEED = 2020", "DEFAULT_BATCH_SIZE =", "DEFAULT_SPLITS ="):
        hits = [p for p in PACKAGE.rglob("*.py") if re.search(rf"^{re.escape(name)}", p.read_text(), re.M)]
        assert len(hits) == 1, (name, hits)


def test_a_notebook_scores_as_the_command_line_does(tmp_path, capsys):
    """score_images run from plain Python gives the command line's JSON, number for number."""
    from probescope.core.scoring.classifiers import load_classifier as engine_classifier
    from probescope.main import main

    assert main(["score", "--images", "demo", "--n", "30", "--splits", "3", "--seed", "5", "--json"]) == 0
    expected = json.loads(capsys.readouterr().out)
    settings = ScoreSettings(splits=3, seed=5)
    _, progress, result = run_task(score_images(TaskContext(), DemoSampler(30), engine_classifier("demo"), settings,
                                                ScoreAsk()))
    assert json.loads(json.dumps(result.to_dict())) == expected
    assert any(p.fraction is None and p.message.startswith("scoring") for p in progress)  # its stage


def test_the_gallerys_stream_is_a_job_that_travels(demo_model):
    """The stream job pickles (a module-level function and plain values) and runs in a session of its own, where
    the model is loaded again from what opened it: the same logits as the engine's, batch for batch."""
    from probescope.core.scoring.classifiers import classifier_of_model

    info = hold_model(Session(), OpenRequest("model", "demo"), "cpu", demo_model)
    choice = ClassifierChoice(MODEL, info)
    job = pickle.loads(pickle.dumps(stream_job(DemoRun(12, 3, 0.7, seed=1), choice, 4, False)))
    partials, _, n = run_task(job(TaskContext()))  # a fresh session: model_of loads "demo" there
    assert n == 12 and [p.value.start for p in partials] == [4, 8]
    sampler = DemoSampler(12, 3, 0.7, seed=1)
    images = [sampler.sample(k)[0] for k in range(4, 12)]
    engine = classifier_of_model(demo_model)
    for p in partials:
        batch = p.value
        assert len(batch.thumbnails) == WINDOW.batch_size and batch.thumbnails[0].dtype == np.uint8
        expected = engine.classify(images[batch.start - 4 : batch.start - 4 + WINDOW.batch_size])
        np.testing.assert_array_equal(batch.logits, expected)
        assert batch.features is not None and batch.features.shape == (WINDOW.batch_size, 128)


def test_a_classifier_is_made_once_per_session_and_described_to_the_window(demo_model):
    session = Session()
    info = hold_model(session, OpenRequest("model", "demo"), "cpu", demo_model)
    ctx = TaskContext(session=session)
    _, progress, _ = run_task(load_classifier(ctx, ClassifierChoice("demo", info)))
    _, _, described = run_task(load_classifier(ctx, ClassifierChoice("demo", info)))  # the same, held
    assert any(isinstance(p, Progress) for p in progress)
    assert described.name == "demo" and described.has_features and not described.comparable
    assert described.choice.device == "cpu"  # the loaded model's device, decided when it was opened
    assert classifier_of(ctx, described.choice) is classifier_of(ctx, ClassifierChoice("demo", info))
    assert pickle.loads(pickle.dumps(described)) == described
