"""The Inception Score's split protocol beside the live score: torch-fidelity's (10 splits, a fixed shuffle seed),
recomputed in the I/O pool from the probability rows kept so far, at most every SPLIT_EVERY_S while streaming."""

from __future__ import annotations

import time
from collections.abc import Callable

from probescope.app.gallery.panels import ScorePanel
from probescope.app.gallery.scores import GalleryScores
from probescope.app.workers import WorkerPool
from probescope.core.scoring.protocol import DEFAULT_SEED, DEFAULT_SPLITS, SplitScore, splittable
from probescope.jobs.protocol import IO

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
        """Recompute when N changed (throttled while streaming, `final` = not streaming)."""
        n = scores.n
        if not splittable(n, DEFAULT_SPLITS):
            self.result = None
            self.panel.show_split(None, self.classifier_label(), DEFAULT_SPLITS, n)
            return
        if n == self.n or self.pool.is_shut_down or (not final and time.monotonic() - self._time < SPLIT_EVERY_S):
            return
        self.n, self._time = n, time.monotonic()
        rows = scores.live.probabilities()  # rows never change once written: safe to read in a worker

        def task(ctx):
            from probescope.core.scoring.distributions import ClassScores
            from probescope.core.scoring.protocol import split_inception_score

            return split_inception_score(ClassScores(rows, "probs"), DEFAULT_SPLITS, True, DEFAULT_SEED)

        def done(split: SplitScore) -> None:
            self.result = split
            self.panel.show_split(split, self.classifier_label(), DEFAULT_SPLITS, n)

        self.pool.submit(task, name="split protocol", key=self.key, executor=IO, on_result=done)
