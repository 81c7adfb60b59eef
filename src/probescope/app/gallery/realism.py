"""Each scored sample against the real images, kept in step with the Gallery's scores against real data: realism,
the nearest reference images and the calibrated copy test per sample (for the selected-sample panel, the realism
sort, the copy badge and filter), and the data-copying test C_T against held-out real images (for the Real data
panel).

The numbers belong to one `LiveScores` of `RealDataScores` (the samples streamed and the reference they are scored
against, through one classifier): a new run, reference or classifier installs another, and every number kept here
is dropped with it. The copy test is calibrated on the held-out images chosen (Held-out images…) when they were read
by the same classifier and are enough for its alpha (`min_held_out`), otherwise on a part of the reference set aside
(none when the reference is too small for that): choosing other held-out images drops the per-sample numbers too,
so no flag calibrated on other images is shown. A sample's realism, neighbours and flag depend only on it, the
reference and the calibration, so they are computed for the samples that arrived since the last result (a `Job` in
the I/O pool, batch after batch while streaming); C_T depends on every sample and is computed when the stream stops.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QObject

from probescope.app.gallery.real_data_scores import RealDataScores
from probescope.app.gallery.realism_panel import (
    CopyingPanel,
    NeighboursPanel,
    SampleCopy,
    copies_text,
    copying_reading,
)
from probescope.app.gallery.thumbnails import thumbnail_task
from probescope.core.scoring.copy_test import min_held_out
from probescope.core.scoring.copying import MIN_CELL_SAMPLES
from probescope.core.scoring.realism import SampleNeighbours
from probescope.core.scoring.settings import WINDOW
from probescope.jobs.protocol import COMPUTE, IO, Job, TaskError
from probescope.jobs.scoring.neighbours import copying_job, held_out_job, neighbours_job, reference_reader
from probescope.jobs.scoring.reference import DATASET, NONE
from probescope.widgets.gallery.grid import GalleryGrid

STREAMING_BATCH = 256  # while streaming, the neighbours of this many new samples at a time (each job re-reads the
# reference: 10 samples a job cost 6x the CPU of one job for 1,000 at the demo's scale)
HELD_OUT_NEEDED = ("C_T needs held-out real images (never trained on) beside a reference of the generator's "
                   "training images. None are chosen, so it is not computed (choose them with Held-out images…, "
                   "above).")


class SampleRealism(QObject):
    """Computes for `real.live` and shows in `neighbours`, `copying`, the grid and the scores `scores()`."""

    def __init__(self, pool, task_key: Callable[[str], str], real: RealDataScores, grid: GalleryGrid,
                 neighbours: NeighboursPanel, copying: CopyingPanel, scores: Callable[[], object],
                 on_changed: Callable[[], None]):
        super().__init__(neighbours)
        self.pool, self.task_key, self.real, self.grid = pool, task_key, real, grid
        self.neighbours, self.copying, self.scores, self.on_changed = neighbours, copying, scores, on_changed
        self.live = None  # the LiveScores the numbers below belong to
        self.result: SampleNeighbours | None = None  # of live's first `done` samples
        self.copying_result = None  # (n, held-out set, DataCopying)
        self.held_out = None  # (spec, classifier key, ReferenceSet) of the held-out images
        self.calibrated_on = None  # the held-out ReferenceSet the copy test of `result` (and of jobs asked) uses
        self.streaming = False
        grid.current_image_changed.connect(self.show_sample)
        real.installed.connect(lambda: self.update(self.streaming))
        copying.held_out_chosen.connect(self.choose_held_out)
        self._forget(None)

    @property
    def done(self) -> int:
        return 0 if self.result is None else len(self.result.realism)

    # -- keeping in step --------------------------------------------------------------------------------------------
    def _usable_reference(self):
        live = self.real.live
        return None if live is None or live.reference is None or live.reference.features is None else live.reference

    def _why_missing(self) -> str:
        live = self.real.live
        if live is None:
            return ""
        if live.reference is None:
            return ("no reference chosen (Real data panel)" if self.real.choice.spec == NONE
                    else "waiting for a reference")
        if live.reference.features is None:
            return "the reference holds only mu and sigma: no real images to compare with"
        if self.error:
            return self.error
        if self.asked > self.done and not self.pool.is_running(self.task_key("scores:realism")):
            return "cancelled; computed again for the next samples, run or reference"
        return "computing…"

    def _forget(self, live) -> None:
        """Drop every number: they belonged to another run, reference or classifier."""
        self.pool.cancel(self.task_key("scores:copying"), superseded=True)
        self.live, self.copying_result = live, None
        self.copying_asked = None  # (n, held-out set) of the last C_T asked for: asked once (a cancel, a failure hold)
        self.spec, self.dataset = self.real.choice.spec, self.real.dataset  # where live's reference images are
        self._forget_neighbours(self._copy_held_out())
        self._show_copying()

    def _forget_neighbours(self, held) -> None:
        """Drop the per-sample numbers (they belonged to another run, reference or classifier, or their copy test
        to other held-out images); those computed from now on calibrate the copy test on `held` (None: a part of
        the reference set aside)."""
        self.pool.cancel(self.task_key("scores:realism"), superseded=True)
        self.result, self.calibrated_on = None, held
        self.error = ""  # why the neighbours could not be computed
        self.asked = 0  # the samples the last neighbours job submitted covers (from `done` on)
        self._publish()

    def update(self, streaming: bool) -> None:
        """Called at every redraw of the scores: start the next computation that is due."""
        self.streaming = streaming
        live = self.real.live
        if live is not self.live:
            self._forget(live)
        held = self._copy_held_out()
        if held is not self.calibrated_on:
            self._forget_neighbours(held)
        reference = self._usable_reference()
        if reference is None or self.pool.is_shut_down:
            return
        n = live.n
        if streaming:
            if n - self.done >= STREAMING_BATCH and not self.pool.is_running(self.task_key("scores:realism")):
                self._compute_neighbours(live, reference, self.done, n)
            return
        if n > self.asked:  # at the stream's end the job for every sample left is asked for at once (replacing a
            self._compute_neighbours(live, reference, self.done, n)  # shorter one), so nothing waits behind it;
            # a job cancelled by the user is not asked for again until more samples come (or another run, reference)
        self._compute_copying(live, n)

    def _compute_neighbours(self, live, reference, start: int, stop: int) -> None:
        generated = np.array(live.features[start:stop])  # (rows kept so far are never written over)
        self.asked = stop
        held = self.calibrated_on

        def done(result: SampleNeighbours) -> None:
            if live is not self.live or start != self.done or held is not self.calibrated_on:
                return
            self.result = result  # (the samples before `start` joined in the job: the GUI thread only shows)
            self._publish()
            self.update(self.streaming)

        def failed(error: TaskError) -> None:
            if live is self.live and held is self.calibrated_on:
                self.error = error.message
                self.show_sample(self.grid.current_image())

        args = {"generated": generated, "reference": reference, "k": live.prc_k, "before": self.result}
        if held is not None:
            args["held_out"] = held
        self.pool.submit(Job(neighbours_job, args, compute=False),
                         name="realism and nearest real images", key=self.task_key("scores:realism"), executor=IO,
                         on_result=done, on_error=failed)

    # -- C_T --------------------------------------------------------------------------------------------------------
    def choose_held_out(self, spec: str) -> None:
        """Held-out real images for the data-copying test, through the classifier of the scores."""
        classifier = self.real.classifier
        if classifier is None or not self.real.has_features:
            self.copying.show_statistic("The data-copying test needs a classifier that gives features.")
            return
        self.held_out, self.copying_result = None, None
        self.update(self.streaming)  # flags calibrated on the images chosen before go now
        self.copying.show_statistic(f"Loading held-out images {spec} as {classifier.name} sees them…")

        def loaded(reference) -> None:
            self.held_out = (spec, classifier.key, reference)
            self._show_copying()
            self.update(self.streaming)
            self._show_copies()  # (too few for the copy test, they change no flag, but what it says)

        def failed(error: TaskError) -> None:
            self.copying.show_statistic(f"No held-out images: {error.message}")
            self._show_copies()

        self.pool.submit(Job(held_out_job, {"spec": spec, "classifier": classifier.choice}),
                         name=f"held-out images: {spec}", key=self.task_key("held-out"), executor=COMPUTE,
                         on_result=loaded, on_error=failed)

    def _held_out_set(self):
        """The held-out set when it was read by the classifier of the scores shown."""
        classifier = self.real.classifier
        if self.held_out is None or classifier is None or self.held_out[1] != classifier.key:
            return None
        return self.held_out[2]

    def _copy_held_out(self):
        """The held-out set the copy test is calibrated on: the one chosen, when it was read by the classifier of the
        scores shown and holds enough images for the window's alpha (None: a part of the reference set aside)."""
        held = self._held_out_set()
        if held is None or held.features is None or len(held.features) < min_held_out(WINDOW.copy_alpha):
            return None
        return held

    def _no_copy_test(self) -> str:
        """Why the result has no copy test: too few reference images to set enough aside, and held-out images that
        are not chosen, hold only mu and sigma, or are too few."""
        alpha, share = WINDOW.copy_alpha, WINDOW.held_out_share
        needed = min_held_out(alpha)
        held = self._held_out_set()
        n = self.live.reference.n if self.live is not None and self.live.reference is not None else 0
        if held is None:
            chosen = f"choose at least {needed:,} held-out real images (Held-out images…, below) to calibrate it"
        elif held.features is None:
            chosen = f"the held-out images {held.name} hold only mu and sigma; the test needs the images themselves"
        else:
            chosen = f"the held-out images {held.describe()} are fewer than that"
        return (f"at α = {alpha:g} it needs {needed:,} held-out real images; {share:.0%} of the {n:,} reference "
                f"images, set aside, are fewer, and {chosen}")
    def _compute_copying(self, live, n: int) -> None:
        held = self._held_out_set()
        if held is None or held.features is None or n < MIN_CELL_SAMPLES:
            self._show_copying()
            return
        asked = self.copying_asked
        if (asked is not None and asked[0] == n and asked[1] is held) \
                or self.pool.is_running(self.task_key("scores:copying")):
            return
        self.copying_asked = (n, held)
        train = live.reference.features

        def done(result) -> None:
            if live is self.live:
                self.copying_result = (n, held, result)
                self._show_copying()

        def failed(error: TaskError) -> None:
            if live is self.live:
                self.copying.show_statistic(f"Data-copying test: {error.message}")

        self.copying.show_statistic(f"Data-copying test C_T over {n:,} samples: computing…")
        self.pool.submit(Job(copying_job, {"train": train, "held_out": held.features,
                                           "generated": np.array(live.features[:n])},
                             compute=False),
                         name="data-copying test", key=self.task_key("scores:copying"), executor=IO,
                         on_result=done, on_error=failed)

    # -- showing ----------------------------------------------------------------------------------------------------
    def _publish(self) -> None:
        """The per-sample numbers to the scores (sorting, filtering), the grid's copy badges, the panels."""
        result, scores = self.result, self.scores()
        scores.measured.clear()
        if result is not None:
            scores.measured.update(realism=result.realism, possible_copy=result.possible_copy.astype(np.float64))
        self.grid.thumbnails.set_flags(None if result is None else result.possible_copy)
        self.grid.viewport().update()
        self._show_copies()
        self.show_sample(self.grid.current_image())
        if not self.streaming:
            self.on_changed()

    def _show_copies(self) -> None:
        """The copy test over the samples so far, or why there is none."""
        result = self.result
        if result is None:
            self.copying.show_copies("")
        elif result.copy is None:
            self.copying.show_copies(f"<b>No copy test</b> over {self.done:,} samples: {self._no_copy_test()}.")
        else:
            self.copying.show_copies(copies_text(result.copy))

    def _show_copying(self) -> None:
        if self._usable_reference() is None:
            self.copying.show_statistic("")
            return
        held = self._held_out_set()
        if held is None:
            self.copying.show_statistic(f"<b>Data-copying test</b> (Meehan et al. 2020): {HELD_OUT_NEEDED}")
            return
        if held.features is None:
            self.copying.show_statistic(f"<b>Data-copying test</b>: {held.name} holds only mu and sigma; C_T needs "
                                        "the held-out images themselves.")
            return
        if self.copying_result is None or self.copying_result[1] is not held:
            n = self.live.n if self.live is not None else 0
            wait = (f"needs at least {MIN_CELL_SAMPLES} samples (N = {n:,})" if n < MIN_CELL_SAMPLES
                    else "computed when the stream stops")
            self.copying.show_statistic(f"<b>Data-copying test</b> against {held.describe()}: {wait}.")
            return
        n, _, result = self.copying_result
        value = "—" if not np.isfinite(result.statistic) else f"{result.statistic:.2f}"
        self.copying.show_statistic(
            f"<b>Data-copying C_T = {value}</b> (Meehan et al. 2020) at N = {n:,}: reference as training set, "
            f"{held.describe()} held out, {result.cells_used} of {result.cells} k-means cells with ≥ "
            f"{MIN_CELL_SAMPLES} samples", copying_reading(result.statistic) or
            "No cell holds enough samples and held-out images: C_T is undefined.")

    def show_sample(self, i: int) -> None:
        """The selected sample's realism and nearest reference images (or why there are none yet)."""
        result = self.result
        if result is None or not 0 <= i < len(result.realism):
            why = self._why_missing()
            self.neighbours.show_missing(why)
            return
        test = result.copy
        copy = None if test is None else SampleCopy(int(test.nearest[i]), float(test.distance[i]),
                                                    float(test.p_value[i]), bool(test.flagged[i]), test.alpha,
                                                    test.threshold)
        classifier = self.real.classifier
        self.neighbours.show_sample(i, float(result.realism[i]), result.nearest[i].tolist(),
                                    result.distances[i].tolist(), result.k,
                                    f"{classifier.name} features" if classifier is not None else "features", copy,
                                    "" if test is not None else "see the Real data panel")
        self._load_thumbnails(result.nearest[i].tolist())

    def _load_thumbnails(self, indices: list[int]) -> None:
        read = self._reader()
        if read is None or self.pool.is_shut_down:
            return
        jobs = [(j, lambda j=j: read(j)) for j in indices]
        self.pool.submit(lambda ctx: thumbnail_task(jobs, ctx), name="nearest real images",
                         key=self.task_key("scores:realism-thumbs"), executor=IO,
                         on_partial=self.neighbours.set_thumbnails)

    def _reader(self):
        """Reference image j by its index in the reference's order (None when it cannot be read)."""
        spec, reference, dataset = self.spec, self.live.reference, self.dataset
        if spec == DATASET:
            return None if dataset is None else dataset.load_image
        return lambda j: reference_reader(spec, str(reference.cache_path))(j)
