"""The Dissection workspace's layer runs: dissecting the loaded model's layer with some settings (a `Job` in the
worker pool: `jobs.dissection.layer_data.layer_data_job`), the results kept per settings to switch between, the
result on screen coming back when a run is cancelled, and a batch job's saved result opened in place of a run.
"""

from __future__ import annotations

from dataclasses import replace

from PySide6.QtCore import QObject

from probescope.app.compute.workers import TaskHandle
from probescope.core.dissection.settings import DissectionSettings
from probescope.jobs.dissection.layer import hold_dataset
from probescope.jobs.dissection.layer_data import LayerData, layer_data_job, settings_label
from probescope.jobs.protocol import Job, TaskError


class LayerRunner(QObject):
    """Runs for the workspace `ws` (its Settings panel, header and view state)."""

    def __init__(self, ws):
        super().__init__(ws)
        self.ws = ws
        self.kept: dict[str, LayerData] = {}  # results per settings for the current inputs
        self.done = False  # the result on screen is the whole of the initial work
        self._run: TaskHandle | None = None  # the dissection running for the inputs on screen
        self._before: LayerData | None = None  # the complete result on screen when it started: back on cancel
        ws.pool.finished.connect(self._finished)

    def run(self, settings: DissectionSettings) -> None:
        """Dissect the layer with `settings` (at once from the cache when done before)."""
        ws, state = self.ws, self.ws.current
        loaded, layer, dataset = ws._inputs
        ws.browser.leave()
        settings = replace(settings, device=str(loaded.value.device))  # where the model is: the app's device
        state.settings = settings
        ws.runs.show_settings(settings)
        self.done = False
        self._before = state.data if state.data is not None and state.data.result.complete else None
        refining = state.refining(dataset)
        if refining:
            ws.header.setText(state.header(state.data, ws.iou_min(), (0, state.data.result.n_units)))
        else:
            ws.header.setText(f"<b>Units of {layer}</b> of {loaded.label} (computing…)")
        ws.runs.set_running(True, "dissecting " + settings_label(settings))
        first = state.unit if state.unit >= 0 else None  # the unit in view comes first, and stays selected

        def shown(d: LayerData) -> None:
            if refining and not d.result.complete:  # the first part's units stay until the whole's are all done
                ws.header.setText(state.header(state.data, ws.iou_min(), (len(d.result.units), d.result.n_units)))
                return
            ws.show_layer(d)
            if d.result.units:
                ws.mark_first_results()

        def finished(d: LayerData) -> None:
            self.done = not state.of_first_part(d)  # a first part's result is not the initial work's end
            self.kept[d.key] = d
            shown(d)
            part = f" (first {d.dataset.n_images:,} images)" if state.of_first_part(d) else ""
            ws.runs.set_running(False, f"done: {len(d.result.units)} units{part}")
            self._list_kept(d.key)
            ws.check_initial()

        def failed(error: TaskError) -> None:
            ws.mark_first_results()  # (none will come: the other workspaces' work starts)
            ws.runs.set_running(False, error.message)
            what = f"on the first {state.data.dataset.n_images:,} images (all of them: " if refining else "("
            ws.header.setText(f"<b>Units of {layer}</b> {what}failed: see the message above)")

        shape = next((info.units for info in loaded.layers if info.name == layer), None)
        job = Job(layer_data_job, {"model": loaded.value, "model_label": loaded.label, "layer": layer, "shape": shape,
                                   "dataset": hold_dataset(ws.pool.session, dataset), "settings": settings,
                                   "first_unit": first})
        self._run = ws.pool.submit(job, name=f"dissect {layer}", key=ws.task_key("layer"), on_partial=shown,
                                   on_result=finished, on_error=failed)

    def _list_kept(self, current: str) -> None:
        self.ws.runs.set_runs([(k, settings_label(v.settings)) for k, v in self.kept.items()], current)

    def _finished(self, handle: TaskHandle) -> None:
        """The dissection on screen was cancelled (Settings, the status bar or the Tasks panel; not replaced by a
        newer run): the complete result shown before it comes back with its settings, or, when there was none,
        what it finished stays, said to be cut short."""
        ws, state = self.ws, self.ws.current
        if handle is not self._run:
            return
        self._run = None
        superseded = ws.pool.is_running(ws.task_key("layer"))  # (a batch job opened in its place)
        if not handle.cancelled or superseded or ws.pool.is_shut_down:
            return
        before, self._before = self._before, None
        if before is not None:
            state.settings = before.settings
            ws.runs.show_settings(before.settings)
            self.done = True
            ws.show_layer(before)
            self._list_kept(before.key)
            ws.runs.set_running(False, f"cancelled; back to the result with {settings_label(before.settings)}")
            ws.check_initial()
            return
        if state.data is not None:
            state.cut_short = state.data
            ws.show_layer(state.data)
        else:  # cancelled before its first units: the header no longer says it computes
            ws.mark_first_results()  # (none will come: the other workspaces' work starts)
            loaded, layer, _dataset = ws._inputs
            ws.header.setText(f"<b>Units of {layer}</b> of {loaded.label} (cancelled before its first units: Run in "
                              "Settings dissects it)")
        ws.runs.set_running(False, "cancelled" + (f" after {len(state.data.result.units)} units" if state.data
                                                   else ""))

    def switch(self, key: str) -> None:
        """Back to a kept result."""
        d = self.kept.get(key)
        if d is not None:
            self.ws.current.settings = d.settings
            self.ws.runs.show_settings(d.settings)
            self.ws.show_layer(d)

    # -- a batch job's saved result in place of a run ------------------------------------------------------------------
    def reusable_inputs(self) -> tuple:
        """(the loaded model's ModelInfo, the loaded dataset's spec, held for the jobs, each None when not loaded;
        the window's compute device, where models are loaded)."""
        state = self.ws.state
        model = state.model if state is not None else None
        dataset = state.dataset if state is not None else None
        spec = hold_dataset(self.ws.pool.session, dataset) if dataset is not None else None
        return model, spec, state.device

    def showing_saved(self) -> bool:
        data = self.ws.current.data
        return self.ws.pool.is_running(self.ws.task_key("layer")) or (data is not None and bool(data.origin))

    def job_opening(self, job) -> None:
        origin = self.ws.browser.view.overview.folder.name
        self.done = False
        self.ws.header.setText(f"<b>Units of {job.layer}</b> ({job.model}, opening from batch {origin}…)")
        self.ws.runs.set_saved(f"opening {job.model} / {job.layer} from batch {origin}")

    def job_opened(self, d: LayerData) -> None:
        ws, job = self.ws, self.ws.browser.job
        self.done = True
        ws.runs.show_settings(d.settings)
        ws.runs.set_runs([(d.key, f"{d.origin}: " + settings_label(d.settings))], d.key)
        ws.runs.set_saved(f"a saved result of {d.origin} ({job.model} / {job.layer}); to dissect with other "
                          "settings, go back to the loaded model (Batch tab) or re-run the batch")
        ws.show_layer(d)
        ws.check_initial()

    def job_failed(self, job, message: str) -> None:
        self.ws.runs.set_running(False, message)
        self.ws.header.setText(f"<b>Units of {job.layer}</b> ({job.model}: could not be opened, see the Batch tab)")

    def show_loaded_model(self) -> None:
        """Back from a batch job to the loaded model's layer."""
        if not self.ws.ready():
            self.ws.batch.message.setText("no model and dataset loaded")
            return
        self.ws.refresh()  # a batch job shown: the loaded model's layer again (from the cache when dissected before)
