"""The Dissection workspace's layer runs: dissecting the loaded model's layer with some settings (one `LayerRequest`,
built here whole and sent as a `Job` to the worker pool: `jobs.dissection.layer_data.layer_data_job`), the results
kept per settings to switch between, the result on screen coming back when a run is cancelled, and a batch job's
saved result opened in place of a run.

The settings come from the Settings panel's form (a Run) or are those of the result on screen (new inputs, dissected
as it was); they go one way, into the request and the view state's record. The form is written back only when the
user returns to a result (`RunsPanel.restore`): a kept result chosen, or a cancelled run's result before it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QObject, Signal
from PySide6.QtWidgets import QLabel

from probescope.app.compute.workers import TaskHandle, WorkerPool
from probescope.app.dissection.panels import RunsPanel
from probescope.app.dissection.view_state import DissectionState
from probescope.core.dissection.settings import DissectionSettings
from probescope.jobs.dissection.layer import LayerRequest, ModelLayer, hold_dataset
from probescope.jobs.dissection.layer_data import LayerData, layer_data_job, settings_label
from probescope.jobs.protocol import Job, TaskError


class LayerRunner(QObject):
    """Runs in `pool` under the task key `key`, for the view state `state` (its inputs, settings record and kept
    results); `runs` (the Settings panel) and `header` (the unit table's header line) say how they go. `show(d)` puts
    a result on screen, `first_results()` says the first results are there (or will not come), `settled()` asks the
    workspace whether its initial work is done, `iou_min()` is the interpretable IoU the header's summary counts with.
    `started()` when a run of the loaded model's layer starts (a batch job's result is no longer the one shown).
    `done`: the result on screen is the whole of the initial work."""

    started = Signal()

    def __init__(self, pool: WorkerPool, key: str, state: DissectionState, runs: RunsPanel, header: QLabel, *,
                 show: Callable[[LayerData], None], first_results: Callable[[], None], settled: Callable[[], None],
                 iou_min: Callable[[], float], parent: QObject | None = None):
        super().__init__(parent)
        self.pool, self.key, self.state, self.runs, self.header = pool, key, state, runs, header
        self._show, self._first_results, self._settled, self._iou_min = show, first_results, settled, iou_min
        self.done = False
        self._run: TaskHandle | None = None  # the dissection running for the inputs on screen
        self._before: LayerData | None = None  # the complete result on screen when it started: back on cancel
        pool.finished.connect(self._finished)

    def run(self, settings: DissectionSettings) -> None:
        """Dissect the layer with `settings` (at once from the cache when done before)."""
        state, header = self.state, self.header
        loaded, layer, dataset = state.inputs
        self.started.emit()
        settings = replace(settings, device=str(loaded.value.device))  # where the model is: the app's device
        state.settings = settings  # (the record of what runs; the form that asked keeps what it shows)
        self.done = False
        self._before = state.data if state.data is not None and state.data.result.complete else None
        refining = state.refining(dataset)
        if refining:
            header.setText(state.header(state.data, self._iou_min(), (0, state.data.result.n_units)))
        else:
            header.setText(f"<b>Units of {layer}</b> of {loaded.label} (computing…)")
        self.runs.set_running(True, "dissecting " + settings_label(settings))
        first = state.unit if state.unit >= 0 else None  # the unit in view comes first, and stays selected

        def shown(d: LayerData) -> None:
            if refining and not d.result.complete:  # the first part's units stay until the whole's are all done
                header.setText(state.header(state.data, self._iou_min(), (len(d.result.units), d.result.n_units)))
                return
            self._show(d)
            if d.result.units:
                self._first_results()

        def finished(d: LayerData) -> None:
            self.done = not state.of_first_part(d)  # a first part's result is not the initial work's end
            state.keep(d)
            shown(d)
            part = f" (first {d.dataset.n_images:,} images)" if state.of_first_part(d) else ""
            self.runs.set_running(False, f"done: {len(d.result.units)} units{part}")
            self._list_kept(d.key)
            self._settled()

        def failed(error: TaskError) -> None:
            self._first_results()  # (none will come: the other workspaces' work starts)
            self.runs.set_running(False, error.message)
            what = f"on the first {state.data.dataset.n_images:,} images (all of them: " if refining else "("
            header.setText(f"<b>Units of {layer}</b> {what}failed: see the message above)")

        shape = next((info.units for info in loaded.layers if info.name == layer), None)
        request = LayerRequest(hold_dataset(self.pool.session, dataset), ModelLayer(loaded.value, layer, shape),
                               settings, first_unit=first, spare_cores=1)  # (automatic jobs leave the window a core)
        self._run = self.pool.submit(Job(layer_data_job, {"request": request, "model_label": loaded.label}),
                                     name=f"dissect {layer}", key=self.key, on_partial=shown, on_result=finished,
                                     on_error=failed)

    def _list_kept(self, current: str) -> None:
        self.runs.set_runs([(k, settings_label(v.settings)) for k, v in self.state.kept.items()], current)

    def _finished(self, handle: TaskHandle) -> None:
        """The dissection on screen was cancelled (Settings, the status bar or the Tasks panel; not replaced by a
        newer run): the complete result shown before it comes back with its settings (into the form too: Cancel
        undoes the run), or, when there was none, what it finished stays, said to be cut short."""
        state, pool = self.state, self.pool
        if handle is not self._run:
            return
        self._run = None
        superseded = pool.is_running(self.key)  # (a batch job opened in its place)
        if not handle.cancelled or superseded or pool.is_shut_down:
            return
        before, self._before = self._before, None
        if before is not None:
            state.settings = before.settings
            self.runs.restore(before.settings)
            self.done = True
            self._show(before)
            self._list_kept(before.key)
            self.runs.set_running(False, f"cancelled; back to the result with {settings_label(before.settings)}")
            self._settled()
            return
        if state.data is not None:
            state.cut_short = state.data
            self._show(state.data)
        else:  # cancelled before its first units: the header no longer says it computes
            self._first_results()  # (none will come: the other workspaces' work starts)
            loaded, layer, _dataset = state.inputs
            self.header.setText(f"<b>Units of {layer}</b> of {loaded.label} (cancelled before its first units: Run "
                                "in Settings dissects it)")
        self.runs.set_running(False, "cancelled" + (f" after {len(state.data.result.units)} units" if state.data
                                                     else ""))

    def switch(self, key: str) -> None:
        """Back to a kept result (chosen in the Settings panel's list: the form takes its settings back)."""
        d = self.state.kept.get(key)
        if d is not None:
            self.state.settings = d.settings
            self.runs.restore(d.settings)
            self._show(d)

    # -- a batch job's saved result in place of a run ------------------------------------------------------------------
    def showing_saved(self) -> bool:
        data = self.state.data
        return self.pool.is_running(self.key) or (data is not None and bool(data.origin))

    def job_opening(self, job, origin: str) -> None:
        self.done = False
        self.header.setText(f"<b>Units of {job.layer}</b> ({job.model}, opening from {origin}…)")
        self.runs.set_saved(f"opening {job.model} / {job.layer} from {origin}")

    def job_opened(self, job, d: LayerData) -> None:
        """The saved result on screen; its recorded settings are shown in the list of results (the form keeps the
        loaded model's settings: Run is off while a saved result is shown)."""
        self.done = True
        self.runs.set_runs([(d.key, f"{d.origin}: " + settings_label(d.settings))], d.key)
        self.runs.set_saved(f"a saved result of {d.origin} ({job.model} / {job.layer}); to dissect with other "
                            "settings, go back to the loaded model (Batch tab) or re-run the batch")
        self._show(d)
        self._settled()

    def job_failed(self, job, message: str) -> None:
        self.runs.set_running(False, message)
        self.header.setText(f"<b>Units of {job.layer}</b> ({job.model}: could not be opened, see the Batch tab)")
