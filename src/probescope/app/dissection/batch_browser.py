"""Browsing a batch output folder (`probescope batch --out`) in the Dissection workspace's Batch tab.

The overview (status.json and a summary of every merged layer) is read in the I/O pool and read again every few
seconds while the batch runs (only newly merged layers are read in full); choosing a merged job opens its saved
dissection.json with everything the views need (`jobs.dissection.saved_layers.saved_layer_job`), never
re-dissecting it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from PySide6.QtCore import QObject, QTimer, Signal
from PySide6.QtWidgets import QFileDialog, QWidget

from probescope.app.compute.workers import WorkerPool
from probescope.app.dissection.panels import BatchPanel
from probescope.app.window.state import AppState
from probescope.jobs.dissection.layer import hold_dataset
from probescope.jobs.dissection.saved_layers import BatchView, job_state, overview_job, saved_layer_job
from probescope.jobs.protocol import IO, Job, TaskError

POLL_MS = 3000  # how often a running batch's status is read again while its panel is shown


def reusable_inputs(state: AppState | None, session) -> tuple:
    """(the loaded model's ModelInfo, the loaded dataset's spec, held in `session` for the jobs, each None when not
    loaded; the window's compute device `AppState.device`, where a recorded model is loaded)."""
    model = state.model if state is not None else None
    dataset = state.dataset if state is not None else None
    spec = hold_dataset(session, dataset) if dataset is not None else None
    return model, spec, state.device


class BatchBrowser(QObject):
    """`opening(job, origin)` when a job starts opening (`origin`: 'batch FOLDER'), `opened(job, LayerData)` when it
    can be shown, `failed(job, message)`, `nothing_merged()` when a first read finds no merged layer yet."""

    opening = Signal(object, str)
    opened = Signal(object, object)
    failed = Signal(object, str)
    nothing_merged = Signal()

    def __init__(self, pool: WorkerPool, key: Callable[[str], str], panel: BatchPanel,
                 inputs: Callable[[], tuple], showing_saved: Callable[[], bool], parent: QWidget):
        """`inputs()` gives (the loaded model's ModelInfo or None, the loaded dataset's DatasetSpec or None, the
        compute device) to reuse;
        `showing_saved()` tells whether the workspace shows (or is opening) a saved result; `parent` is the
        workspace (a running batch is read again while it is visible)."""
        super().__init__(parent)
        self.pool, self._key, self.panel = pool, key, panel
        self._inputs, self._showing_saved = inputs, showing_saved
        self.job = None  # the batch job shown (a BatchJob), None while the loaded model's layer is shown
        self.folder: Path | None = None
        self.view: BatchView | None = None
        self._known: dict = {}  # the batch's layer summaries, kept between reads (see overview_job)
        self.timer = QTimer(self)
        self.timer.setSingleShot(True)
        self.timer.setInterval(POLL_MS)
        self.timer.timeout.connect(self._poll)
        panel.open_requested.connect(lambda: self.open_dialog(panel))
        panel.reload_requested.connect(self.read)
        panel.job_chosen.connect(self.show_job)

    def open_dialog(self, parent: QWidget) -> None:
        folder = QFileDialog.getExistingDirectory(parent, "Open a batch output folder (probescope batch --out)")
        if folder:
            self.open(folder)

    def open(self, folder: str | Path) -> None:
        """List the jobs of the batch in `folder` and show its first merged layer."""
        self.view, self._known = None, {}
        self.folder = Path(folder)
        self.panel.message.setText(f"reading {folder}…")
        self.read(show_first=True)

    def read(self, show_first: bool = False) -> None:
        folder, known = self.folder, self._known

        def done(out: tuple) -> None:
            view, self._known = out
            self.view = view
            self.panel.show_batch(view)
            self.panel.message.setText("")
            if view.overview.state == "running":
                self.timer.start()
            finished = [k for k, j in enumerate(view.overview.jobs) if j.finished and not view.problems[k]]
            results = [j.result for j in view.overview.jobs]
            if self.job is not None and self.job.result in results:
                self.panel.select_job(results.index(self.job.result))
            elif show_first and finished:
                self.show_job(finished[0])
            elif show_first:
                self.panel.message.setText("no layer of this batch is merged yet: the list follows the batch")
                self.nothing_merged.emit()

        self.pool.submit(Job(overview_job, {"folder": folder, "known": known}, compute=False),
                         name=f"read batch {folder.name}",
                         key=self._key("batch"), executor=IO, on_result=done,
                         on_error=lambda error: self.panel.message.setText(error.message))

    def _poll(self) -> None:
        """A running batch: read its status again (only newly merged layers are read in full)."""
        if self.view is not None and not self.pool.is_shut_down and self.parent().isVisible():
            self.read()
        elif self.view is not None and self.view.overview.state == "running":
            self.timer.start()

    def show_job(self, number: int) -> None:
        """Open the batch job `number` (its saved result, with overlays), unless it is not merged yet."""
        view = self.view
        if view is None or not 0 <= number < len(view.overview.jobs):
            return
        job = view.overview.jobs[number]
        if view.problems[number]:
            self.panel.message.setText(view.problems[number])
            return
        if not job.finished:
            self.panel.message.setText(f"{job.model} / {job.layer} is not merged yet ({job_state(job)})")
            return
        if job == self.job and self._showing_saved():
            return
        self.job = job
        self.panel.message.setText("")
        self.panel.select_job(number)
        origin = f"batch {view.overview.folder.name}"
        model, dataset, device = self._inputs()
        self.opening.emit(job, origin)

        def failed(error: TaskError) -> None:
            self.job = None
            self.panel.message.setText(error.message)
            self.failed.emit(job, error.message)

        self.pool.submit(Job(saved_layer_job, {"job": job, "origin": origin, "model": model, "dataset": dataset,
                                               "device": device}),
                         name=f"open {job.model}/{job.layer}", key=self._key("layer"),
                         on_result=lambda d: self.opened.emit(job, d), on_error=failed)

    def leave(self) -> None:
        """Back to the loaded model's layer: no job is shown."""
        self.job = None

