"""Each scored sample against the real images, kept in step with the Gallery's scores against real data, without Qt:
realism, the nearest reference images and the calibrated copy test per sample (the selected-sample panel, the
realism sort, the copy badge and filter), and the data-copying test C_T against held-out real images.

The numbers belong to one `LiveScores` (the samples streamed and the reference they are scored against, through one
classifier): another one (a new run, reference or classifier) drops every number kept here. The copy test is
calibrated on the held-out images chosen when they were read by the same classifier and are enough for its alpha
(`min_held_out`), otherwise on a part of the reference set aside (none when the reference is too small for that):
choosing other held-out images drops the per-sample numbers too, so no flag calibrated on other images is shown. A
sample's realism, neighbours and flag depend only on it, the reference and the calibration, so they are computed
for the samples that arrived since the last result (batch after batch while streaming); C_T depends on every sample
and is computed when the stream stops. `due` says which job is due; the window runs it in its I/O pool.
"""

from __future__ import annotations

import numpy as np

from probescope.core.scoring.copy_test import min_held_out
from probescope.core.scoring.copying import MIN_CELL_SAMPLES
from probescope.core.scoring.live_scores import LiveScores
from probescope.core.scoring.realism import SampleNeighbours
from probescope.core.scoring.reference import ReferenceSet
from probescope.core.scoring.settings import WINDOW, ScoreSettings
from probescope.jobs.protocol import Job
from probescope.jobs.scoring.live import Due, Running
from probescope.jobs.scoring.neighbours import copying_job, neighbours_job

STREAMING_BATCH = 256  # while streaming, the neighbours of this many new samples at a time (each job re-reads the
# reference: 10 samples a job cost 6x the CPU of one job for 1,000 at the demo's scale)

ALL, NEIGHBOURS = "all", "neighbours"  # what `sync` dropped


class LiveRealism:
    """The per-sample numbers and C_T of `live` (set by `sync`): `result` covers its first `done` samples,
    `copying_result` is (n, held-out set, DataCopying); `held_out` the held-out images chosen, as
    (spec, classifier key, ReferenceSet)."""

    def __init__(self, settings: ScoreSettings = WINDOW):
        self.settings = settings
        self.held_out: tuple[str, str, ReferenceSet] | None = None
        self.live: LiveScores | None = None
        self.classifier_key: str | None = None  # the classifier of the scores `live`
        self.forget(None)

    @property
    def done(self) -> int:
        return 0 if self.result is None else len(self.result.realism)

    # -- keeping in step --------------------------------------------------------------------------------------------
    def forget(self, live: LiveScores | None) -> None:
        """Drop every number: they belonged to another run, reference or classifier."""
        self.live, self.copying_result = live, None
        self.copying_asked = None  # (n, held-out set) of the last C_T asked for: asked once (a cancel, a failure hold)
        self.forget_neighbours(None)

    def forget_neighbours(self, held: ReferenceSet | None) -> None:
        """Drop the per-sample numbers; those computed from now on calibrate the copy test on `held` (None: a part
        of the reference set aside)."""
        self.result: SampleNeighbours | None = None
        self.calibrated_on = held
        self.error = ""  # why the neighbours could not be computed
        self.asked = 0  # the samples the last neighbours job asked for covers (from `done` on)

    def sync(self, live: LiveScores | None, classifier_key: str | None) -> str | None:
        """Follow the scores `live` by the classifier `classifier_key`: ALL when every number was dropped (another
        `live`), NEIGHBOURS when the per-sample ones were (the copy test's calibration changed), else None."""
        dropped, self.classifier_key = None, classifier_key
        if live is not self.live:
            self.forget(live)
            dropped = ALL
        held = self.copy_held_out()
        if held is not self.calibrated_on:
            self.forget_neighbours(held)
            dropped = dropped or NEIGHBOURS
        return dropped

    def usable_reference(self) -> ReferenceSet | None:
        """The reference of the scores when it holds real images' features (not only mu and sigma)."""
        live = self.live
        return None if live is None or live.reference is None or live.reference.features is None else live.reference

    def due(self, streaming: bool, running: Running) -> list[Due]:
        """The jobs due after `sync`: the neighbours of STREAMING_BATCH new samples while `streaming` (once the last
        job is back); when the stream stops, those of every sample left (replacing a shorter job, so nothing waits
        behind it) and C_T. A job cancelled by the user is not asked for again until more samples come."""
        reference, live = self.usable_reference(), self.live
        if reference is None:
            return []
        n = live.n
        if streaming:
            ready = n - self.done >= STREAMING_BATCH and not running("realism")
            return [self._neighbours(live, reference, self.done, n)] if ready else []
        due = [self._neighbours(live, reference, self.done, n)] if n > self.asked else []
        copying = self._copying(live, n, running)
        return due + ([copying] if copying is not None else [])

    def _neighbours(self, live: LiveScores, reference: ReferenceSet, start: int, stop: int) -> Due:
        generated = np.array(live.features[start:stop])  # (rows kept so far are never written over)
        self.asked = stop
        held = self.calibrated_on

        def current() -> bool:
            return live is self.live and held is self.calibrated_on

        def take(result: SampleNeighbours) -> bool:
            if not current() or start != self.done:
                return False
            self.result = result  # (the samples before `start` joined in the job)
            return True

        def fail(message: str) -> bool:
            if current():
                self.error = message
            return current()

        args = {"generated": generated, "reference": reference, "k": live.prc_k, "before": self.result}
        if held is not None:
            args["held_out"] = held
        return Due("realism", "realism and nearest real images", Job(neighbours_job, args, compute=False), take,
                   fail)

    # -- C_T --------------------------------------------------------------------------------------------------------
    def held_out_set(self) -> ReferenceSet | None:
        """The held-out set when it was read by the classifier of the scores."""
        if self.held_out is None or self.classifier_key is None or self.held_out[1] != self.classifier_key:
            return None
        return self.held_out[2]

    def copy_held_out(self) -> ReferenceSet | None:
        """The held-out set the copy test is calibrated on: the one chosen, when it was read by the classifier of the
        scores and holds enough images for the settings' alpha (None: a part of the reference set aside)."""
        held = self.held_out_set()
        if held is None or held.features is None or len(held.features) < min_held_out(self.settings.copy_alpha):
            return None
        return held

    def copying_possible(self) -> bool:
        """C_T can be computed: held-out images with features, read by this classifier, and enough samples."""
        held = self.held_out_set()
        n = self.live.n if self.live is not None else 0
        return held is not None and held.features is not None and n >= MIN_CELL_SAMPLES

    def _copying(self, live: LiveScores, n: int, running: Running) -> Due | None:
        if not self.copying_possible():
            return None
        held = self.held_out_set()
        asked = self.copying_asked
        if (asked is not None and asked[0] == n and asked[1] is held) or running("copying"):
            return None
        self.copying_asked = (n, held)

        def take(result) -> bool:
            if live is not self.live:
                return False
            self.copying_result = (n, held, result)
            return True

        job = Job(copying_job, {"train": live.reference.features, "held_out": held.features,
                                "generated": np.array(live.features[:n])}, compute=False)
        return Due("copying", "data-copying test", job, take, lambda _message: live is self.live)

    # -- what is said -----------------------------------------------------------------------------------------------
    def why_missing(self, no_reference_chosen: bool, running: Running) -> str:
        """Why a sample has no realism yet."""
        live = self.live
        if live is None:
            return ""
        if live.reference is None:
            return "no reference chosen (Real data panel)" if no_reference_chosen else "waiting for a reference"
        if live.reference.features is None:
            return "the reference holds only mu and sigma: no real images to compare with"
        if self.error:
            return self.error
        if self.asked > self.done and not running("realism"):
            return "cancelled; computed again for the next samples, run or reference"
        return "computing…"

    def no_copy_test(self) -> str:
        """Why the result has no copy test: too few reference images to set enough aside, and held-out images that
        are not chosen, hold only mu and sigma, or are too few."""
        alpha, share = self.settings.copy_alpha, self.settings.held_out_share
        needed = min_held_out(alpha)
        held = self.held_out_set()
        n = self.live.reference.n if self.live is not None and self.live.reference is not None else 0
        if held is None:
            chosen = f"choose at least {needed:,} held-out real images (Held-out images…, below) to calibrate it"
        elif held.features is None:
            chosen = f"the held-out images {held.name} hold only mu and sigma; the test needs the images themselves"
        else:
            chosen = f"the held-out images {held.describe()} are fewer than that"
        return (f"at α = {alpha:g} it needs {needed:,} held-out real images; {share:.0%} of the {n:,} reference "
                f"images, set aside, are fewer, and {chosen}")

