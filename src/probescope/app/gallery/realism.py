"""Each scored sample against the real images, as the Gallery shows it: `jobs.scoring.live_realism.LiveRealism`
keeps the numbers in step with the scores against real data and says which job is due; this runs them in the I/O
pool and shows realism, the nearest reference images and the copy test per sample (the selected-sample panel, the
realism sort, the copy badge and filter), and C_T against held-out real images (the Real data panel)."""

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
from probescope.core.scoring.copying import MIN_CELL_SAMPLES
from probescope.jobs.protocol import COMPUTE, IO, Job, TaskError
from probescope.jobs.scoring.live import Due
from probescope.jobs.scoring.live_realism import ALL, LiveRealism
from probescope.jobs.scoring.neighbours import held_out_job, reference_reader
from probescope.jobs.scoring.reference import DATASET, NONE
from probescope.widgets.gallery.grid import GalleryGrid

HELD_OUT_NEEDED = ("C_T needs held-out real images (never trained on) beside a reference of the generator's "
                   "training images. None are chosen, so it is not computed (choose them with Held-out images…, "
                   "above).")


class SampleRealism(QObject):
    """Runs `state`'s jobs for `real.live` and shows its numbers in `neighbours`, `copying`, the grid and the scores
    `scores()`."""

    def __init__(self, pool, task_key: Callable[[str], str], real: RealDataScores, state: LiveRealism,
                 grid: GalleryGrid, neighbours: NeighboursPanel, copying: CopyingPanel, scores: Callable[[], object],
                 on_changed: Callable[[], None]):
        super().__init__(neighbours)
        self.pool, self.task_key, self.real, self.state, self.grid = pool, task_key, real, state, grid
        self.neighbours, self.copying, self.scores, self.on_changed = neighbours, copying, scores, on_changed
        self.streaming = False
        self.spec, self.dataset = real.choice.spec, real.dataset  # where the reference images of `state.live` are
        grid.current_image_changed.connect(self.show_sample)
        real.installed.connect(lambda: self.update(self.streaming))
        copying.held_out_chosen.connect(self.choose_held_out)
        self._publish()
        self._show_copying()

    def _running(self, key: str) -> bool:
        return self.pool.is_running(self.task_key(f"scores:{key}"))

    def update(self, streaming: bool) -> None:
        """Called at every redraw of the scores: start the next computation that is due."""
        self.streaming, state = streaming, self.state
        classifier = self.real.classifier
        dropped = state.sync(self.real.live, classifier.key if classifier is not None else None)
        if dropped is not None:
            self.pool.cancel(self.task_key("scores:realism"), superseded=True)
            if dropped == ALL:
                self.pool.cancel(self.task_key("scores:copying"), superseded=True)
                self.spec, self.dataset = self.real.choice.spec, self.real.dataset
            self._publish()
            if dropped == ALL:
                self._show_copying()
        if state.usable_reference() is None or self.pool.is_shut_down:
            return
        if not streaming and not state.copying_possible():
            self._show_copying()
        for due in state.due(streaming, self._running):
            if due.key == "realism":
                self._submit(due, self._neighbours_done, lambda: self.show_sample(self.grid.current_image()))
            else:
                self.copying.show_statistic(f"Data-copying test C_T over {state.live.n:,} samples: computing…")
                self._submit(due, self._show_copying, None, "Data-copying test: ")

    def _submit(self, due: Due, shown: Callable[[], None], failed: Callable[[], None] | None,
                prefix: str = "") -> None:
        def done(result) -> None:
            if due.take(result):
                shown()

        def error(error: TaskError) -> None:
            if due.fail(error.message):
                if failed is not None:
                    failed()
                else:
                    self.copying.show_statistic(prefix + error.message)

        self.pool.submit(due.job, name=due.name, key=self.task_key(f"scores:{due.key}"), executor=IO,
                         on_result=done, on_error=error)

    def _neighbours_done(self) -> None:
        self._publish()
        self.update(self.streaming)

    # -- C_T --------------------------------------------------------------------------------------------------------
    def choose_held_out(self, spec: str) -> None:
        """Held-out real images for the data-copying test, through the classifier of the scores."""
        classifier, state = self.real.classifier, self.state
        if classifier is None or not self.real.has_features:
            self.copying.show_statistic("The data-copying test needs a classifier that gives features.")
            return
        state.held_out, state.copying_result = None, None
        self.update(self.streaming)  # flags calibrated on the images chosen before go now
        self.copying.show_statistic(f"Loading held-out images {spec} as {classifier.name} sees them…")

        def loaded(reference) -> None:
            state.held_out = (spec, classifier.key, reference)
            self._show_copying()
            self.update(self.streaming)
            self._show_copies()  # (too few for the copy test, they change no flag, but what it says)

        def failed(error: TaskError) -> None:
            self.copying.show_statistic(f"No held-out images: {error.message}")
            self._show_copies()

        self.pool.submit(Job(held_out_job, {"spec": spec, "classifier": classifier.choice}),
                         name=f"held-out images: {spec}", key=self.task_key("held-out"), executor=COMPUTE,
                         on_result=loaded, on_error=failed)

    # -- showing ----------------------------------------------------------------------------------------------------
    def _publish(self) -> None:
        """The per-sample numbers to the scores (sorting, filtering), the grid's copy badges, the panels."""
        result, scores = self.state.result, self.scores()
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
        result = self.state.result
        if result is None:
            self.copying.show_copies("")
        elif result.copy is None:
            self.copying.show_copies(f"<b>No copy test</b> over {self.state.done:,} samples: "
                                     f"{self.state.no_copy_test()}.")
        else:
            self.copying.show_copies(copies_text(result.copy))

    def _show_copying(self) -> None:
        state = self.state
        if state.usable_reference() is None:
            self.copying.show_statistic("")
            return
        held = state.held_out_set()
        if held is None:
            self.copying.show_statistic(f"<b>Data-copying test</b> (Meehan et al. 2020): {HELD_OUT_NEEDED}")
            return
        if held.features is None:
            self.copying.show_statistic(f"<b>Data-copying test</b>: {held.name} holds only mu and sigma; C_T needs "
                                        "the held-out images themselves.")
            return
        if state.copying_result is None or state.copying_result[1] is not held:
            n = state.live.n if state.live is not None else 0
            wait = (f"needs at least {MIN_CELL_SAMPLES} samples (N = {n:,})" if n < MIN_CELL_SAMPLES
                    else "computed when the stream stops")
            self.copying.show_statistic(f"<b>Data-copying test</b> against {held.describe()}: {wait}.")
            return
        n, _, result = state.copying_result
        value = "—" if not np.isfinite(result.statistic) else f"{result.statistic:.2f}"
        self.copying.show_statistic(
            f"<b>Data-copying C_T = {value}</b> (Meehan et al. 2020) at N = {n:,}: reference as training set, "
            f"{held.describe()} held out, {result.cells_used} of {result.cells} k-means cells with ≥ "
            f"{MIN_CELL_SAMPLES} samples", copying_reading(result.statistic) or
            "No cell holds enough samples and held-out images: C_T is undefined.")

    def show_sample(self, i: int) -> None:
        """The selected sample's realism and nearest reference images (or why there are none yet)."""
        result = self.state.result
        if result is None or not 0 <= i < len(result.realism):
            self.neighbours.show_missing(self.state.why_missing(self.real.choice.spec == NONE, self._running))
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
        spec, reference, dataset = self.spec, self.state.live.reference, self.dataset
        if spec == DATASET:
            return None if dataset is None else dataset.load_image
        return lambda j: reference_reader(spec, str(reference.cache_path))(j)
