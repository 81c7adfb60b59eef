"""The Gallery's live scores without Qt: which computation is due as batches arrive, and taking its result back.

The window takes each streamed batch into the scores, and after each redraw asks `due(...)` for the computations
that are due now; it runs each `Due`'s job in its I/O pool under the Due's key and hands the result to `take`. A
test drives the same objects with the jobs run inline (tests/test_scoring_live_jobs.py), and gets the numbers
`probescope score` gets for the same images. Every number belongs to the scores it was computed from: one replaced
meanwhile (a new run, reference or classifier) makes `take` drop the result and return False.

- `LiveSplit`: the Inception Score's split protocol of the probability rows kept so far (torch-fidelity's 10
  splits and shuffle seed: the ScoreSettings defaults), at most every SPLIT_EVERY_S while streaming.
- `LiveReadings`: readings of one `LiveScores` (the scores against real data). A quick one (IS, FID, KID) is due
  whenever N moved and the last one came back, so it redraws as often as the machine allows; a slow one (the
  infinite-N fits, class coverage, precision/recall, density/coverage and CMMD, O(N^2 d)) at most every
  SLOW_EVERY_S, and at most a fifth of the time, while streaming, and once more when the stream stops.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from probescope.core.scoring.live_scores import LiveScores, Readout
from probescope.core.scoring.settings import WINDOW, ScoreSettings
from probescope.core.scoring.splits import SplitScore, splittable
from probescope.jobs.protocol import Job
from probescope.jobs.scoring.reference import read_scores
from probescope.jobs.scoring.samples import GalleryScores
from probescope.jobs.scoring.stream import split_score

SPLIT_EVERY_S = 0.5  # the split protocol while streaming: at most this often
SLOW_EVERY_S = 2.0  # slow readings while streaming: at most this often, and at most a fifth of the time
LIVE_PRC_WORK = 2e10  # N (N + M) d up to which precision/recall is read while streaming (about a second)

Clock = Callable[[], float]
Running = Callable[[str], bool]  # whether the task of a Due's key still runs


@dataclass(frozen=True)
class Due:
    """A computation due now: its `job` (run in the I/O pool: `compute=False`), the `key` one task at a time runs
    under (a newer one replaces it), its `name` for the Tasks panel, and `take`, which keeps its result and says
    whether it still belongs to the scores shown; `fail` the same for a failure's message (None: it always does)."""

    key: str
    name: str
    job: Job
    take: Callable[[Any], bool]
    fail: Callable[[str], bool] | None = None


class LiveSplit:
    """The split protocol of the scores shown: `result` covers the first `n` images (None below the splits'
    size, and until the first result comes)."""

    def __init__(self, settings: ScoreSettings = WINDOW, clock: Clock = time.monotonic):
        self.settings, self.clock = settings, clock
        self._generation = 0  # a result asked for before the last reset is dropped
        self.reset()

    def reset(self) -> None:
        self.result: SplitScore | None = None
        self.n = 0
        self._asked = -math.inf  # when the last one was asked for
        self._generation += 1

    def kept(self) -> tuple[SplitScore | None, int]:
        return self.result, self.n

    def restore(self, kept: tuple[SplitScore | None, int]) -> None:
        """Back to a result set aside by `kept()` (a worked example was shown meanwhile)."""
        self.reset()
        self.result, self.n = kept

    def splittable(self, n: int) -> bool:
        return splittable(n, self.settings.splits)

    def due(self, scores: GalleryScores, final: bool) -> Due | None:
        """The protocol of the rows kept so far when N changed (`final`: the stream stopped; while streaming, at
        most every SPLIT_EVERY_S)."""
        n = scores.n
        if not self.splittable(n):
            self.result = None
            return None
        now = self.clock()
        if n == self.n or (not final and now - self._asked < SPLIT_EVERY_S):
            return None
        self.n, self._asked, generation = n, now, self._generation
        rows = scores.live.probabilities()  # rows never change once written: safe to read in a worker

        def take(split: SplitScore) -> bool:
            if generation != self._generation:
                return False
            self.result = split
            return True

        return Due("split", "split protocol", Job(split_score, dict(rows=rows, settings=self.settings),
                                                  compute=False), take)


class LiveReadings:
    """The readings of one `LiveScores` (`install` another for a new run, reference or classifier): `fast` and
    `slow` the last of each kind, `fid_path` the (N, FID) of every quick reading."""

    def __init__(self, clock: Clock = time.monotonic):
        self.clock = clock
        self._generation = 0
        self.install(None)

    def install(self, live: LiveScores | None) -> None:
        self._generation += 1
        self.live = live
        self.fast: Readout | None = None
        self.slow: Readout | None = None
        self.fid_path: list[tuple[int, float]] = []
        self._slow_asked = self._slow_cost = 0.0

    def kept(self) -> tuple:
        """The readings as they stand, for `restore` (a worked example is shown meanwhile)."""
        return self.live, self.fast, self.slow, self.fid_path

    def restore(self, kept: tuple) -> None:
        self.install(kept[0])
        self.fast, self.slow, self.fid_path = kept[1:]

    @property
    def has_reference(self) -> bool:
        return self.live is not None and self.live.reference is not None

    def due(self, streaming: bool, running: Running) -> list[Due]:
        """The readings due: when N moved since the last of a kind and its task is back (slow ones throttled
        while `streaming`)."""
        live = self.live
        if live is None or live.n == 0:
            return []
        due = []
        if (self.fast is None or self.fast.n != live.n) and not running("real-fast"):
            due.append(self._reading(live, slow=False, streaming=streaming))
        slow_due = not streaming or self.clock() - self._slow_asked >= max(SLOW_EVERY_S, 5 * self._slow_cost)
        if (self.slow is None or self.slow.n != live.n) and slow_due and not running("real-slow"):
            due.append(self._reading(live, slow=True, streaming=streaming))
        return due

    def _reading(self, live: LiveScores, slow: bool, streaming: bool) -> Due:
        generation, asked = self._generation, self.clock()
        frozen = live.snapshot()
        reference = live.reference
        prc = slow and (not streaming or reference is None or reference.features is None
                        or live.n * (live.n + len(reference.features)) * reference.features.shape[1] <= LIVE_PRC_WORK)

        def take(readout: Readout) -> bool:
            if generation != self._generation:
                return False
            live.adopt(frozen)  # (the batches it folded in the worker are not folded again here)
            if slow:
                self.slow, self._slow_cost = readout, self.clock() - asked
            else:
                self.fast = readout
                if "FID" in readout.values:
                    self.fid_path.append((readout.n, readout.values["FID"]))
            return True

        if slow:
            self._slow_asked = asked
        kind = "slow" if slow else "fast"
        return Due(f"real-{kind}", "scores against real data",
                   Job(read_scores, dict(frozen=frozen, fits=slow, prc=prc), compute=False), take)

    def headline(self) -> Readout | None:
        """The quick readout with the slow one's precision/recall, density/coverage and CMMD when both are of the
        same N."""
        fast, slow = self.fast, self.slow
        if fast is None or slow is None or slow.n != fast.n:
            return fast
        return Readout(fast.n, {**slow.values, **fast.values}, {**slow.missing, **fast.missing}, slow.fid_inf,
                       slow.is_inf, slow.coverage)

    def paths(self) -> dict[str, list[tuple[int, float]]]:
        """The live paths the 1/N fits are drawn with."""
        return {"FID": self.fid_path, "IS": self.live.history["IS"] if self.live is not None else []}
