"""The gallery's view logic without a window: GalleryState (Qt-free, evented) says what the play button, the run line,
the classifier line and the score panel's offers read, and tells its followers when they change."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from probescope.app.gallery.state import KNOBS, MODEL, SAMPLES, GalleryState, Offer
from probescope.jobs.inputs import ModelInfo, OpenRequest
from probescope.jobs.scoring.stream import ClassifierChoice, ClassifierInfo, DemoRun


def classifier(name: str = "demo", comparable: bool = False) -> ClassifierInfo:
    info = ModelInfo(OpenRequest("model", "demo"), "cpu", "demo", ("a", "b"), "fc", True, "demo")
    return ClassifierInfo(ClassifierChoice(MODEL, info), name, "its own classes", comparable, ("a", "b"), True, "k")


def test_the_state_module_imports_no_qt():
    code = "import sys, probescope.app.gallery.state; print(any(m.startswith('PySide6') for m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


def test_the_play_button_reads_start_pause_or_resume():
    state = GalleryState()
    assert state.play_label(40) == "Start"
    state.scores.add_probabilities(np.full((8, 2), 0.5))
    assert state.play_label(40) == "Resume"  # 8 of 40 scored
    assert state.play_label(8) == "Start"  # all scored: Start begins again
    assert state.play_label(None) == "Start"  # a stream of unknown length
    state.streaming = True
    assert state.play_label(40) == "Pause"


def test_events_follow_the_changes_and_only_them():
    state, seen = GalleryState(), []
    state.events.streaming.connect(seen.append)
    state.events.offer.connect(lambda offer: seen.append(offer and offer.kind))
    state.streaming = True
    state.streaming = True  # no change, no event
    state.streaming = False
    state.use_classifier(classifier())
    state.offer_model("demo again")
    assert seen == [True, False, MODEL]
    assert state.offer == Offer(MODEL, "The loaded model is now demo again; these scores are by demo.",
                                "Score with the loaded model")


def test_the_knobs_apply_to_the_next_run_which_is_offered():
    state = GalleryState(run=DemoRun(1000, 14, 1.0))
    assert state.run_text("ignored", 1000) == "This run: demo sampler, diversity 14, fidelity 1.00, N 1,000"
    state.knobs_changed((3, 0.5))
    assert state.offer.kind == KNOBS and "diversity 3, fidelity 0.50" in state.offer.text
    state.knobs_changed((14, 1.0))  # back to this run's knobs: nothing to offer
    assert state.offer is None
    other = GalleryState()  # not the demo sampler: no run, no knobs to offer
    other.knobs_changed((3, 0.5))
    assert other.offer is None and other.run_text("samples.npz", 0) == "Scoring samples.npz"
    assert other.run_text(None, 0) == ""


def test_the_classifier_line_and_the_split_protocols_label():
    state = GalleryState()
    assert state.classifier_label() == "—"
    state.use_classifier(classifier("inception-tf", comparable=True))
    assert state.class_names == ("a", "b") and state.classifier_label() == "inception-tf"
    assert state.classifier_text() == ("inception-tf", "its own classes (comparable with published scores)")
    state.source = "A"  # a worked example: its probabilities are given
    assert not state.shows_samples and state.classifier_label() == "none (given probabilities)"
    state.source = SAMPLES
    assert state.shows_samples
