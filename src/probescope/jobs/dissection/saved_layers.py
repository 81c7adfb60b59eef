"""Worker-side work of browsing a batch output folder (`probescope batch`) in the Dissection workspace.

The overview reads status.json and summarises every merged layer; opening a job shows its dissection.json as it was
saved (never re-dissected), next to what the views need: the probing dataset it was dissected on (the loaded one when
it is the same, so a folder copied from a cluster opens against a local copy of the dataset), the label store and the
activations (the batch's activation file, or the recorded model's, through the activation cache that a batch on this
machine has already filled). Both tasks are Jobs (module-level functions with plain arguments: a folder, a batch
job, the loaded model's `ModelInfo` and dataset's `DatasetSpec`), so they can run in another process. No Qt here.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from probescope.core.cache import cache_dir
from probescope.core.dissection.inputs import load_activation_file
from probescope.core.dissection.results import DissectionResult
from probescope.core.dissection.settings import DissectionSettings
from probescope.core.errors import InputError
from probescope.core.models.layout import Layout
from probescope.jobs.batch.reader import BatchJob, BatchOverview, read_batch
from probescope.jobs.dissection.layer import DatasetSpec, dataset_of, labels_of
from probescope.jobs.dissection.layer_data import LayerData, unit_peaks
from probescope.jobs.dissection.rows import INTERPRETABLE_IOU, LayerCounts, layer_counts, unit_row
from probescope.jobs.inputs import ModelInfo, model_of
from probescope.jobs.protocol import Progress, TaskContext

JOB_COLUMNS = ("#", "model", "layer", "state", "units", "interp.", "conc.", "spec.", "ND IoU", "comp IoU")
JOB_LEGEND = (f"interp.: units whose NetDissect IoU is above {INTERPRETABLE_IOU:g}; conc.: their distinct concepts; "
              "spec.: specialised units (da-stop keeps one concept, the IoU search more); ND IoU, comp IoU: mean IoU "
              "of the NetDissect and compositional explanations over all units")
Known = dict[Path, tuple[int, LayerCounts]]  # dissection.json -> (its mtime_ns, its counts)


@dataclass(frozen=True)
class BatchView:
    """What the batch panel shows: the overview, the counts of every merged layer (None where not merged or not
    readable) and, per job, why its dissection.json could not be read (None when it could)."""

    overview: BatchOverview
    counts: tuple[LayerCounts | None, ...]
    problems: tuple[str | None, ...]

    def state(self, k: int) -> str:
        return "unreadable" if self.problems[k] else job_state(self.overview.jobs[k])


def job_state(job: BatchJob) -> str:
    if job.state in ("running", "extracting") and job.chunks_total:
        return f"{job.state} {job.chunks_done}/{job.chunks_total}"
    return job.state


def job_cells(view: BatchView, k: int) -> list[object]:
    job, counts = view.overview.jobs[k], view.counts[k]
    if counts is None:
        return [k, job.model, job.layer, view.state(k), job.units, None, None, None, None, None]
    return [k, job.model, job.layer, view.state(k), counts.units, counts.interpretable, len(counts.concepts),
            counts.specialised, counts.mean_iou, counts.mean_comp_iou]


def overview_job(ctx: TaskContext, *, folder: Path, known: Known) -> Iterator[Progress]:
    """(BatchView, updated Known) of the batch in `folder`. Layers already summarised (same file, same mtime) are
    not read again, so re-reading a running batch costs one file per newly merged layer. A damaged dissection.json
    is reported on its job's row; the other jobs stay browsable."""
    overview = read_batch(folder)
    known = dict(known)
    counts: list[LayerCounts | None] = []
    problems: list[str | None] = []
    for k, job in enumerate(overview.jobs):
        ctx.check()
        counts.append(None)
        problems.append(None)
        try:
            mtime = job.result.stat().st_mtime_ns
            if job.result not in known or known[job.result][0] != mtime:
                yield Progress(k / len(overview.jobs), f"summarising {job.model}/{job.layer}")
                result = DissectionResult.load(job.result)
                known[job.result] = (mtime, layer_counts([unit_row(result, u) for u in result.units.values()]))
            counts[-1] = known[job.result][1]
        except FileNotFoundError:
            pass  # not merged yet
        except InputError as exc:
            problems[-1] = str(exc)
    return BatchView(overview, tuple(counts), tuple(problems)), known


def job_dataset(ctx: TaskContext, info: dict, loaded: DatasetSpec | None) -> DatasetSpec:
    """The dataset a saved result describes: `loaded` (the window's) when its index is the same (rows, size, name
    and source; the folder may differ), else the recorded folder, checked against the record."""

    def same(dataset) -> bool:
        return (dataset.n_images == info.get("n_images") and dataset.index_path.name == info.get("index")
                and dataset.source == info.get("source")
                and dataset.index_path.stat().st_size == info.get("index_bytes"))

    if loaded is not None and same(dataset_of(ctx, loaded)):
        return loaded
    root = Path(str(info.get("root", "")))
    if not (root / str(info.get("index", "index.csv"))).is_file():
        raise InputError("the batch's probing dataset is not on this machine: open a copy of it (File > Open "
                         "Probing Dataset) and choose the job again", root)
    spec = DatasetSpec(root, str(info.get("index", "index.csv")), str(info.get("source", "")))
    dataset = dataset_of(ctx, spec)
    if not same(dataset):
        raise InputError(f"the probing dataset changed since the batch ran ({dataset.n_images} images now, "
                         f"{info.get('n_images')} then)", dataset.index_path)
    return spec


def job_activations(result: DissectionResult, layer: str, dataset, live_model, device: str,
                    ctx: TaskContext) -> Iterator[Progress]:
    """The activations a saved result was computed from: the batch's activation file, or the recorded model's layer
    (the loaded model when it is the one recorded, else loaded from its spec) through the activation cache. A spec
    read back from a result grants no trust: a model file that runs code loads only when the user trusts its
    content (`ctx.trust`; the window asks)."""
    # (torch: the window's process imports this module for its Jobs, never torch)
    from probescope.core.data.activations import extract_activations
    from probescope.core.models.loading import load_model

    info = result.model
    if "activations" in info:
        yield Progress(None, "checking the activation file")
        layout = Layout.parse(str(info["layout"])) if "layout" in info else None
        activations, _ = load_activation_file(Path(info["activations"]), dataset.n_images, layout)
    elif "spec" in info:
        spec = str(info["spec"])
        model = model_of(ctx, live_model) if live_model is not None and live_model.spec == spec else None
        if model is None:
            yield Progress(None, f"loading {spec}")
            size = info.get("input_size")
            model = load_model(spec, trust=ctx.trust, device=device,
                               input_size=tuple(size) if isinstance(size, list) and len(size) == 2 else None)
        _read_as_recorded(model, layer, info)
        if model.source_key != info.get("source_key"):
            raise InputError(f"the weights of {spec} are not the ones the batch dissected (the file changed "
                             "since): run the batch again to redo this model")
        model.module.eval()
        yield Progress(0.0, f"activations of {layer}")
        activations = extract_activations(model, layer, dataset, cache_dir(),
                                          progress=ctx.progress, cancel=ctx.cancelled)
    else:
        raise InputError("the saved result names neither a model nor an activation file")
    if activations.shape[1] != result.n_units:
        raise InputError(f"{activations.shape[1]} units in the activations, {result.n_units} in the saved result")
    return activations


def saved_layer_job(ctx: TaskContext, *, job: BatchJob, origin: str, model: ModelInfo | None,
                    dataset: DatasetSpec | None, device: str) -> Iterator[Progress]:
    """LayerData of a merged batch job. `model` / `dataset` are the loaded ones (used when they are the ones the
    batch used); `device` is where a recorded model that is not the loaded one is loaded."""
    yield Progress(None, f"reading {job.result.name} of {job.model}/{job.layer}")
    result = DissectionResult.load(job.result)
    spec = job_dataset(ctx, result.dataset, dataset)
    data = dataset_of(ctx, spec)
    store = yield from labels_of(ctx, spec, data)
    activations = yield from job_activations(result, job.layer, data, model, device, ctx)
    yield Progress(None, "peak activation per image")
    peaks = unit_peaks(activations)
    key = f"batch:{job.result}:{os.stat(job.result).st_mtime_ns}"
    label = str(result.model.get("name") or job.model)
    settings = DissectionSettings.from_mapping(result.settings, str(job.result))
    return LayerData(key, settings, job.layer, label, data, store, activations, peaks, result, origin)


def _read_as_recorded(model, layer: str, info: dict) -> None:
    """The layer read with the layout the result records: given to the model as the user's only where the model
    does not decide the same one itself (a user's layout is part of the activation cache's key)."""
    # (torch: the window's process imports this module for its Jobs, never torch)
    from probescope.core.models.layers import layer_layout

    if "layout" not in info:
        return
    recorded = Layout.parse(str(info["layout"]))
    try:
        decided = layer_layout(model, layer)
    except InputError:
        decided = None
    if decided != recorded:
        model.layouts[layer] = recorded
