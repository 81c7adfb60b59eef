"""Run a batch: every (model, layer) of a manifest dissected into `<out>/<model>/<layer>/`.

The label store is built once in the driver and shared; each model's activations are extracted once (a task per
model); each layer's units fan out as chunk tasks; finished chunks are written as they come back and a layer is
merged into dissection.json / tally.csv when its last chunk is in. Running the same batch again skips finished
chunks (see `chunks`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from probescope.core.cache import cache_dir
from probescope.core.dissection.inputs import LayerInput, load_activation_file, open_dataset
from probescope.core.dissection.label_cache import label_store
from probescope.core.dissection.saved import run_identity, write_layer
from probescope.core.locks import folder_lock
from probescope.core.trust import NO_TRUST, Trust
from probescope.jobs.batch.chunks import (
    finished_chunks,
    merge_chunks,
    plan_chunks,
    remove_layer_outputs,
    write_chunk,
)
from probescope.jobs.batch.executors import Executor, LocalExecutor
from probescope.jobs.batch.manifest import Manifest, ModelJob, folder_name
from probescope.jobs.batch.status import BatchStatus, stderr_log
from probescope.jobs.dissection.layer import prediction_correctness


def layer_folder(model: str, layer: str) -> str:
    """A job's output folder, relative to the batch folder."""
    return f"{model}/{folder_name(layer)}"


@dataclass
class _Layer:
    folder: Path
    key: tuple  # identity of its chunks (see chunks.identity)
    pending: int  # chunk tasks not back yet


class _Batch:
    def __init__(self, manifest: Manifest, out: Path, executor: Executor, status: BatchStatus, trust: Trust):
        self.manifest, self.out, self.ex, self.status, self.trust = manifest, out, executor, status, trust
        self.settings = manifest.settings
        self.pending: dict[Any, tuple[str, Any]] = {}
        self.layers: dict[str, _Layer] = {}

    def run(self, log: Callable[[str], None] | None) -> None:
        m = self.manifest
        dataset, self.dataset_info = open_dataset(m.dataset, m.index, m.source)
        if log is not None:
            log(f"reading the label maps of {dataset.n_images} images")
        store = label_store(dataset, cache_dir())
        self.store_ref = self.ex.put(store)
        self.store = store
        for model in m.models:
            if model.activations is not None:
                act, info = load_activation_file(model.activations, dataset.n_images, model.layout)
                self._start_layer(model, LayerInput(model.layers[0], act, int(act.shape[1]), info))
            else:
                for layer in model.layers:
                    self.status.job(layer_folder(model.name, layer))["state"] = "extracting"
                if log is not None:
                    log(f"{model.name}: extracting {', '.join(model.layers)}")
                device = "cuda" if model.gpus > 0 else self.settings.device
                handle = self.ex.extract(model.spec, list(model.layers), m.dataset, m.index, m.source, device,
                                         self.trust, model.gpus)
                self.pending[handle] = ("extract", model)
        self.status.write()
        while self.pending:
            handle, result = self.ex.wait(list(self.pending))
            kind, what = self.pending.pop(handle)
            if kind == "extract":
                for item in result:
                    self._start_layer(what, item)
            else:
                rel, units = what
                layer = self.layers[rel]
                write_chunk(layer.folder, units, result)
                layer.pending -= 1
                self.status.chunk_done(rel)
                if layer.pending == 0:
                    self._finish_layer(rel)

    def _start_layer(self, model: ModelJob, item: LayerInput) -> None:
        rel = layer_folder(model.name, item.layer)
        folder = self.out / rel
        n_units = item.n_units
        key = run_identity(self.settings, self.dataset_info, item.model_info, n_units)
        done = finished_chunks(folder, key)
        done_units = {u for c in done for u in c.units}
        todo = plan_chunks([u for u in range(n_units) if u not in done_units], self.manifest.chunk_units)
        self.layers[rel] = _Layer(folder, key, len(todo))
        self.status.start_layer(rel, n_units, len(done), len(done) + len(todo))
        if not todo:
            self._finish_layer(rel)
            return
        remove_layer_outputs(folder)  # from other settings or unfinished: never listed as a finished layer
        correct = None
        if item.predictions is not None and item.class_names:
            _truth, correct = prediction_correctness(self.store, item.predictions, item.class_names)
        act_ref, correct_ref = self.ex.put(item.activations), self.ex.put(correct)
        for units in todo:
            handle = self.ex.chunk(self.store_ref, act_ref, self.settings, units, correct_ref, self.dataset_info,
                                   item.model_info)
            self.pending[handle] = ("chunk", (rel, units))

    def _finish_layer(self, rel: str) -> None:
        layer = self.layers[rel]
        merged = merge_chunks(finished_chunks(layer.folder, layer.key))
        write_layer(layer.folder, merged)
        self.status.set_state(rel, "done")


def run_batch(manifest: Manifest, out: str | Path, executor: Executor | None = None,
              log: Callable[[str], None] | None = stderr_log, trust: Trust = NO_TRUST) -> dict:
    """Dissect every (model, layer) of `manifest` into `out`; returns the final status document.

    `executor` defaults to running locally, the chunks in `settings.jobs` processes (pass a RayExecutor for a
    cluster); `trust` is the command line's (model files that run code load only when it allows them). On any error
    or interrupt, status.json says 'failed' or 'stopped' and finished chunks stay for the next run. One batch at a
    time writes `out` (it holds out/.probescope.lock; a second is refused naming the first)."""
    out = Path(out)
    with folder_lock(out, "probescope batch"):
        jobs = [(m.name, layer, layer_folder(m.name, layer)) for m, layer in manifest.layer_jobs]
        status = BatchStatus(out, manifest.path, jobs, log)
        local = LocalExecutor() if executor is None else None
        batch = _Batch(manifest, out, executor or local, status, trust)
        try:
            batch.run(log)
        except KeyboardInterrupt:
            status.finish("stopped")
            raise
        except BaseException as exc:
            for job in status.doc["jobs"]:
                if job["state"] != "done":
                    job["state"] = "failed"
            status.finish("failed", f"{type(exc).__name__}: {exc}")
            raise
        finally:
            if local is not None:
                local.close()  # its worker processes, when it started some
        status.finish("done")
    return status.doc
