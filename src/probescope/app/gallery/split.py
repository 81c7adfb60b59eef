"""The Inception Score's split protocol beside the live score, as the score panel shows it: `jobs.scoring.live`'s
`LiveSplit` says when it is due, and it runs in the I/O pool."""

from __future__ import annotations

from collections.abc import Callable

from probescope.app.compute.workers import WorkerPool
from probescope.app.gallery.panels import ScorePanel
from probescope.jobs.protocol import IO
from probescope.jobs.scoring.live import LiveSplit
from probescope.jobs.scoring.samples import GalleryScores


class SplitProtocol:
    """Shows `split`'s result in `panel` and runs its jobs in `pool` under `key`."""

    def __init__(self, pool: WorkerPool, key: str, panel: ScorePanel, classifier_label: Callable[[], str],
                 split: LiveSplit):
        self.pool, self.key, self.panel, self.classifier_label, self.split = pool, key, panel, classifier_label, split

    def update(self, scores: GalleryScores, final: bool) -> None:
        """Recompute when N changed (throttled while streaming, `final` = not streaming). Until the result for this
        N comes, the last one is said to be of the first images of the N scored (issue 45: mid-stream it read
        N=1,184 beside the score's N = 1,196, as if of another set)."""
        split, n = self.split, scores.n
        due = None if self.pool.is_shut_down else split.due(scores, final)
        splits = split.settings.splits
        self.panel.show_split(split.result, self.classifier_label(), splits, n,
                              pending=split.splittable(n) and split.result is None)
        if due is None:
            return

        def done(result) -> None:
            if due.take(result):
                self.panel.show_split(split.result, self.classifier_label(), splits, scores.n)  # (N may have grown)

        self.pool.submit(due.job, name=due.name, key=self.key, executor=IO, on_result=done)
