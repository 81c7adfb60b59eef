"""The Inception Score's split protocol beside the live score: torch-fidelity's (10 splits, a fixed shuffle seed:
the ScoreSettings defaults), recomputed in the I/O pool from the probability rows kept so far, at most every
SPLIT_EVERY_S while streaming."""

from __future__ import annotations

import time
from collections.abc import Callable

from probescope.app.compute.workers import WorkerPool
from probescope.app.gallery.panels import ScorePanel
from probescope.core.scoring.protocol import SplitScore, splittable
from probescope.core.scoring.settings import WINDOW
from probescope.jobs.protocol import IO, Job
from probescope.jobs.scoring.samples import GalleryScores
from probescope.jobs.scoring.stream import split_score

SPLIT_EVERY_S = 0.5


class SplitProtocol:
    """The split protocol of the scores shown; `result` is the last one computed (None below the splits' size)."""

    def __init__(self, pool: WorkerPool, key: str, panel: ScorePanel, classifier_label: Callable[[], str]):
        self.pool, self.key, self.panel, self.classifier_label = pool, key, panel, classifier_label
        self.result: SplitScore | None = None
        self.n = 0  # how many images `result` covers
        self._time = 0.0

    def reset(self) -> None:
        self.result, self.n = None, 0

    def kept(self) -> tuple[SplitScore | None, int]:
        return self.result, self.n

    def restore(self, kept: tuple[SplitScore | None, int]) -> None:
        """Back to a result set aside by `kept()` (a worked example was shown meanwhile)."""
        self.result, self.n = kept

    def update(self, scores: GalleryScores, final: bool) -> None:
        """Recompute when N changed (throttled while streaming, `final` = not streaming). Until the result for this
        N comes, the last one is said to be of the first images of the N scored (issue 45: mid-stream it read
        N=1,184 beside the score's N = 1,196, as if of another set)."""
        n, splits = scores.n, WINDOW.splits
        if not splittable(n, splits):
            self.result = None
            self.panel.show_split(None, self.classifier_label(), splits, n)
            return
        self.panel.show_split(self.result, self.classifier_label(), splits, n, pending=self.result is None)
        if n == self.n or self.pool.is_shut_down or (not final and time.monotonic() - self._time < SPLIT_EVERY_S):
            return
        self.n, self._time = n, time.monotonic()
        rows = scores.live.probabilities()  # rows never change once written: safe to read in a worker

        def done(split: SplitScore) -> None:
            self.result = split
            self.panel.show_split(split, self.classifier_label(), splits, scores.n)  # (N may have grown since)

        job = Job(split_score, dict(rows=rows, settings=WINDOW), compute=False)
        self.pool.submit(job, name="split protocol", key=self.key, executor=IO, on_result=done)
