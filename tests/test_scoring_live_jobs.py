"""The Gallery's live scores are jobs state (jobs.scoring.live, live_realism), driven here without a window: the
stream's batches are taken as the window takes them, the jobs that are due run inline, and the numbers are those
`probescope score` gives for the same images through the same classifier and reference. The throttles follow a
clock, and a result that comes back after its scores were replaced is dropped."""

from __future__ import annotations

import csv
from collections import Counter

import numpy as np
import pytest
from task_steps import run_task

from probescope.core.demo.sampler import DemoSampler
from probescope.core.scoring.settings import WINDOW
from probescope.jobs.inputs import OpenRequest, hold_model
from probescope.jobs.protocol import TaskContext
from probescope.jobs.scoring.live import SLOW_EVERY_S, SPLIT_EVERY_S, LiveReadings, LiveSplit
from probescope.jobs.scoring.live_realism import ALL, LiveRealism
from probescope.jobs.scoring.reference import ReferenceChoice, load_reference_scores
from probescope.jobs.scoring.samples import GalleryScores
from probescope.jobs.scoring.stream import ClassifierChoice, DemoRun, classifier_of, stream_samples
from probescope.jobs.scoring.workflow import ScoreAsk, score_images
from probescope.jobs.session import Session

N = 60
RUN = DemoRun(N, 3, 0.7, seed=1)


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Gallery:
    """The live scores of one run, as the window holds them (its GalleryState's), with the jobs run inline."""

    def __init__(self, ctx: TaskContext, live, clock: Clock):
        self.ctx, self.clock = ctx, clock
        self.scores = GalleryScores()
        self.split, self.readings, self.realism = LiveSplit(clock=clock), LiveReadings(clock=clock), LiveRealism()
        self.readings.install(live)
        self.asked: Counter[str] = Counter()

    def take(self, batch) -> None:
        self.scores.add_logits(batch.logits)
        self.readings.live.add(batch.features, batch.logits)

    def due(self, streaming: bool) -> list:
        self.realism.sync(self.readings.live, "demo")
        split = self.split.due(self.scores, final=not streaming)
        dues = ([split] if split is not None else []) + self.readings.due(streaming, lambda _key: False)
        return dues + self.realism.due(streaming, lambda _key: False)

    def run(self, streaming: bool) -> None:
        for due in self.due(streaming):
            self.asked[due.key] += 1
            assert due.take(run_task(due.job(self.ctx))[2])


@pytest.fixture(scope="module")
def world(tmp_path_factory, demo_model):
    """A reference of 80 real-like images, the demo classifier as the Gallery's choice, the stream's batches, and
    `probescope score`'s result and per-image table for the same images."""
    folder = tmp_path_factory.mktemp("live")
    real = DemoSampler(80, 9, 1.0, seed=7)
    np.save(folder / "real.npy", np.stack([real.sample(k)[0] for k in range(80)]))
    session = Session()
    ctx = TaskContext(session=session)
    choice = ClassifierChoice("demo", hold_model(session, OpenRequest("model", "demo"), "cpu", demo_model))
    batches = [p.value for p in run_task(stream_samples(ctx, RUN, choice, 0))[0]]
    per_image = folder / "per_image.csv"
    ask = ScoreAsk(fid=str(folder / "real.npy"), prc=True, per_image=str(per_image))
    command_line = run_task(score_images(ctx, RUN.sampler, classifier_of(ctx, choice), WINDOW, ask))[2].to_dict()
    with open(per_image, newline="", encoding="utf-8") as fh:
        table = list(csv.DictReader(fh))
    return ctx, choice, ReferenceChoice(str(folder / "real.npy")), batches, command_line, table


def _gallery(world, clock: Clock) -> Gallery:
    ctx, choice, reference, *_ = world
    _reference, live = run_task(load_reference_scores(ctx, reference, None, choice, None))[2]
    return Gallery(ctx, live, clock)


def test_the_live_scores_are_the_command_lines(world):
    """Streamed batch by batch, with every due job run, the split protocol, IS, FID, precision/recall, each
    sample's KL, realism, nearest reference image and copy flag equal `probescope score`'s."""
    *_, batches, command_line, table = world
    gallery = _gallery(world, Clock())
    for batch in batches:
        gallery.take(batch)
        gallery.run(streaming=True)
    gallery.run(streaming=False)
    assert gallery.due(streaming=False) == []  # nothing left to compute at N

    split = gallery.split.result
    assert (split.n, split.splits, split.seed) == (N, command_line["splits"], command_line["seed"])
    assert split.mean == pytest.approx(command_line["is_mean"], rel=1e-9)
    assert split.std == pytest.approx(command_line["is_std"], rel=1e-9)
    values = gallery.readings.headline().values
    assert values["IS"] == pytest.approx(command_line["is_all"], rel=1e-9)
    assert values["FID"] == pytest.approx(command_line["fid"], rel=1e-6)
    assert values["precision"] == pytest.approx(command_line["precision"], rel=1e-9)
    assert values["recall"] == pytest.approx(command_line["recall"], rel=1e-9)
    assert gallery.readings.fid_path[-1] == (N, values["FID"])

    realism = gallery.realism.result
    assert gallery.realism.done == N and len(table) == N
    np.testing.assert_allclose(gallery.scores.kl(), [float(row["kl"]) for row in table], rtol=1e-6)
    np.testing.assert_allclose(realism.realism, [float(row["realism"]) for row in table], rtol=1e-6)
    assert realism.nearest[:, 0].tolist() == [int(row["nearest_reference"]) for row in table]
    assert realism.possible_copy.astype(int).tolist() == [int(row["possible_copy"] or 0) for row in table]


def test_while_streaming_the_slow_computations_follow_the_clock(world):
    """A quick reading is due at every new N; the split protocol at most every SPLIT_EVERY_S and the slow reading
    every SLOW_EVERY_S while streaming; both once more when the stream stops."""
    *_, batches, _, _ = world
    clock = Clock()
    gallery = _gallery(world, clock)
    for batch in batches:
        gallery.take(batch)
        gallery.run(streaming=True)
    assert gallery.asked == {"real-fast": len(batches), "real-slow": 1, "split": 1}
    clock.now += max(SPLIT_EVERY_S, SLOW_EVERY_S)
    gallery.run(streaming=True)  # N did not move: the quick reading is not asked again
    assert gallery.asked == {"real-fast": len(batches), "real-slow": 2, "split": 2}
    gallery.run(streaming=False)
    assert gallery.asked["realism"] == 1 and gallery.asked["split"] == 2  # (the split of this N is in)


def test_a_result_for_replaced_scores_is_dropped(world):
    """A job's result that comes back after a new run, reference or classifier replaced its scores changes
    nothing: `take` says so."""
    *_, batches, _, _ = world
    gallery = _gallery(world, Clock())
    for batch in batches:
        gallery.take(batch)
    dues = {due.key: due for due in gallery.due(streaming=False)}
    assert set(dues) == {"split", "real-fast", "real-slow", "realism"}
    results = {key: run_task(due.job(gallery.ctx))[2] for key, due in dues.items()}

    gallery.split.reset()
    assert not dues["split"].take(results["split"]) and gallery.split.result is None
    old_live = gallery.readings.live
    gallery.readings.install(old_live.snapshot())
    assert not dues["real-fast"].take(results["real-fast"]) and gallery.readings.fast is None
    assert gallery.readings.fid_path == []
    assert gallery.realism.sync(gallery.readings.live, "demo") == ALL
    assert not dues["realism"].take(results["realism"]) and gallery.realism.result is None
    assert not dues["realism"].fail("cancelled") and gallery.realism.error == ""
