"""Dissect a layer: the one workflow behind `probescope dissect`, the window's dissection and a notebook.

    from probescope.jobs.dissection.layer import DatasetSpec, LayerRequest, ModelLayer, dissect_layer, run
    done = run(dissect_layer(TaskContext(), LayerRequest(DatasetSpec(Path("demo")), ModelLayer("demo"),
                                                         DissectionSettings(), out=Path("out"))))
    done.result.units[0].explanations["iou"].label      # out/ holds what `probescope dissect` writes

The steps, in order: the probing dataset; the layer's activations (an ACT.npy file, a model spec loaded here, or
a model the process already holds, found by its `ModelInfo`); the label maps (the label store); which images the
model classifies right (from a predictions file or the model's own head, against the dataset's scene labels);
an earlier result to resume; then the units, block by block, each block saved at once (`core.dissection.saved`).

It is a task of the jobs protocol (`jobs.protocol`): it yields `Progress`, a `Partial(LayerRun)` when its inputs
are ready and after every block, and returns the last `LayerRun`. What to dissect is one `LayerRequest`, built whole
by its caller (the command line, the window, a notebook) and read only here: plain values (paths, specs, the
settings), frozen and picklable, so it also runs as a `Job` in another process. A batch (`jobs.batch`) fans a
layer's units out in chunks instead, through the same inputs (`prediction_correctness`, the engine) and the same
result format.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from probescope.core.bounds import IntRanges
from probescope.core.cache import cache_dir
from probescope.core.data.broden import BrodenDataset
from probescope.core.dissection.correlation import correct_predictions, read_label_map, scene_truth
from probescope.core.dissection.inputs import (
    dataset_identity,
    extract_model_layers,
    head_layer,
    load_activation_file,
    model_identity,
    predicted_classes,
    require_spatial_map,
)
from probescope.core.dissection.label_cache import label_store
from probescope.core.dissection.results import DissectionResult
from probescope.core.dissection.settings import DissectionSettings
from probescope.core.errors import InputError
from probescope.core.files import NUMPY_FILE_ERRORS
from probescope.core.models.class_names import read_class_names
from probescope.core.models.layout import Layout
from probescope.jobs.inputs import ModelInfo, model_of
from probescope.jobs.kernel.pickling import cross_by_name
from probescope.jobs.protocol import Partial, Progress, TaskContext
from probescope.jobs.session import Session


@dataclass(frozen=True)
class DatasetSpec:
    """A Broden-format probing dataset by where it is: its folder, index file and row filter (a path prefix)."""

    root: Path
    index: str = "index.csv"
    source: str = ""

    @staticmethod
    def of(dataset) -> DatasetSpec:
        """The spec that opens `dataset` (a BrodenDataset) again (an index file outside its folder by its path)."""
        root, index = Path(dataset.root), Path(dataset.index_path)
        return DatasetSpec(root, index.name if index.parent == root else str(index), dataset.source or "")


@dataclass(frozen=True)
class ActivationFile:
    """ACT.npy: float (images, units, h, w), images in the order of the index rows; or laid out as `layout` says
    (channels last, a token sequence)."""

    path: Path
    layout: Layout | None = None


@dataclass(frozen=True)
class ModelLayer:
    """A model's layer: `model` a spec (loaded here, on the settings' device, with the trust of the task's
    context) or the `ModelInfo` of a model the process holds (the window's). `layer` None: the model's default
    layer; `shape` its units per image (C, h, w) when known (a layer without a spatial map is refused before
    extracting); `input_size` and `layout` the user's, as `load_model` takes them."""

    model: str | ModelInfo
    layer: str | None = None
    shape: tuple[int, ...] | None = None
    input_size: int | tuple[int, int] | None = None
    layout: Layout | None = None


@dataclass
class LayerRun:
    """A layer's dissection as it goes: the inputs it was computed from and the result so far (None before any).
    `path` is where the result is kept (the output folder's dissection.json, or the cache's entry)."""

    dataset: Any  # BrodenDataset
    store: Any  # LabelStore
    activations: np.ndarray  # (images, units, h, w), usually a memmap
    dataset_info: dict
    model_info: dict
    path: Path
    result: DissectionResult | None = None
    correct: np.ndarray | None = field(default=None, repr=False)  # int8 per image: 1 right, 0 wrong, -1 unknown


def dataset_of(ctx: TaskContext, spec: DatasetSpec):
    """The BrodenDataset `spec` names, from the session of the process running the job (opened there once)."""
    return held_dataset(ctx.session, spec)


def held_dataset(session: Session, spec: DatasetSpec):
    """The BrodenDataset `spec` names, held in `session` (opened the first time it is asked for)."""
    return session.get("dataset", spec, lambda: BrodenDataset.open(spec.root, spec.index,
                                                                      only_source=spec.source or None))


# a probing dataset crosses to and from the compute kernel as the spec that opens it
cross_by_name("probescope.core.data.broden.BrodenDataset", held_dataset, spec_of=DatasetSpec.of)


def hold_dataset(session, dataset) -> DatasetSpec:
    """`dataset` (an opened BrodenDataset) held in `session` in place of any older one, and the spec that finds it."""
    spec = DatasetSpec.of(dataset)
    session.hold("dataset", spec, dataset)
    return spec


def labels_of(ctx: TaskContext, spec: DatasetSpec, dataset) -> Iterator[Progress]:
    """The dataset's LabelStore, from the session (built once per process, through the label cache on disk)."""
    if spec not in ctx.session.held("labels"):
        yield Progress(None, "reading the label maps")
    return ctx.session.get("labels", spec, lambda: label_store(dataset, cache_dir(), progress=ctx.progress,
                                                               cancel=ctx.cancelled))


def prediction_correctness(store, predictions: np.ndarray, class_names, label_map: Path | None = None,
                           source: Path | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(true class per image, -1 unknown; int8 right/wrong/unknown per image) of the model's `predictions` (class
    indices or scores, from the file `source` when they come from one) against the dataset's scene labels, named
    as the model's classes (or through the `label_map` CSV)."""
    truth = scene_truth(store, class_names, read_label_map(label_map) if label_map else None,
                        overrides_source=label_map)
    return truth, correct_predictions(predictions, truth, source)


def layer_units(ranges: IntRanges, n_units: int) -> list[int]:
    """The units `ranges` (--units) names, once the layer's width says which exist (never expanded before)."""
    return ranges.values("--units", "unit", high=n_units - 1, because=f"the layer has {n_units} units")


def result_path(cache: Path, model_info: dict, dataset_info: dict, settings: DissectionSettings) -> Path:
    """Where the cache keeps the dissection of these inputs with these settings."""
    text = json.dumps([model_info, dataset_info, settings.protocol()], sort_keys=True)
    return Path(cache) / "dissection" / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.json"


@dataclass(frozen=True)
class LayerRequest:
    """One dissection of a layer, whole: the probing `dataset`, the layer's `activations` and the `settings` (every
    default is theirs: `DissectionSettings`).

    `units`: the units to dissect (ranges are expanded once the layer's width is known; default all); `first_unit`:
    they run from it on, wrapping round (the unit in view arrives first). `out`: a folder written as `probescope
    dissect` writes it (dissection.json, tally.csv, correlation.csv), resumed unless `restart`; None: the cache, per
    inputs and settings (a damaged entry is computed again). `predictions`: PRED.npy, the model's predicted class
    per image (or scores); without it, a model's own head gives them when it names its classes (`class_names`: a
    file naming them, one per line); `label_map`: a CSV naming the dataset's scene labels as the model's classes.
    `spare_cores`: cores the automatic process count leaves free (the window keeps one)."""

    dataset: DatasetSpec
    activations: ActivationFile | ModelLayer
    settings: DissectionSettings
    units: IntRanges | tuple[int, ...] | None = None
    out: Path | None = None
    restart: bool = False
    predictions: Path | None = None
    class_names: Path | None = None
    label_map: Path | None = None
    first_unit: int | None = None
    spare_cores: int = 0

    def __post_init__(self) -> None:
        if self.units is not None and not isinstance(self.units, IntRanges | tuple):
            object.__setattr__(self, "units", tuple(int(u) for u in self.units))  # (a list: frozen as a tuple)


def dissect_layer(ctx: TaskContext, request: LayerRequest,
                  log: Callable[[str], None] | None = None) -> Iterator[Progress | Partial]:
    """Dissect the layer `request` names with its settings; yields Partial(LayerRun) when the inputs are ready (with
    the result an earlier run saved, if any) and after every block of units, and returns the last LayerRun.

    `log` gets the lines a person reads (what is resumed, how many images have a true label). One run at a time
    writes `request.out` (it holds the folder's lock).
    """
    from probescope.core.locks import folder_lock  # (lazy: `probescope --help` imports this module; 13 ms)

    out = request.out
    with folder_lock(out, "probescope dissect") if out is not None else contextlib.nullcontext():
        return (yield from _dissect_layer(ctx, request, log))


def _dissect_layer(ctx: TaskContext, request: LayerRequest, log) -> Iterator[Progress | Partial]:
    q, settings, out = request, request.settings, request.out
    data = dataset_of(ctx, q.dataset)
    dataset_info = dataset_identity(data)
    act, model_info, predicted, class_names = yield from _activations(ctx, q.activations, data, settings.device,
                                                                      q.predictions is None, q.class_names)
    if q.predictions is not None:
        predicted = _read_predictions(q.predictions)
    units = layer_units(q.units, int(act.shape[1])) if isinstance(q.units, IntRanges) else q.units
    store = yield from labels_of(ctx, q.dataset, data)
    correct = None
    if predicted is not None:
        if class_names is None:
            raise InputError("--predictions needs --class-names (or a --model with class names) to read true labels")
        truth, correct = prediction_correctness(store, predicted, class_names, q.label_map, q.predictions)
        held = isinstance(q.activations, ModelLayer) and isinstance(q.activations.model, ModelInfo)
        if held and not (truth >= 0).any():  # a held model's own head: only where the scenes name its classes
            correct = None
        elif log is not None:
            log(f"{int((truth >= 0).sum())} of {len(truth)} images have a true label among the model's classes")
    n_units = int(act.shape[1])
    path = out / "dissection.json" if out is not None else result_path(cache_dir(), model_info, dataset_info, settings)
    previous = None if q.restart else _previous(path, settings, dataset_info, model_info, n_units, units, out, log)
    run_ = LayerRun(data, store, act, dataset_info, model_info, path, previous, correct)
    yield Partial(replace(run_))
    if previous is not None and previous.complete and out is None:  # (a folder's files are written again)
        return run_
    order = list(units) if units is not None else list(range(n_units))
    first = q.first_unit
    if first is not None and 0 <= first < n_units and units is None:
        order = [*range(first, n_units), *range(first)]  # (runs of consecutive units: read without indexing)
    result = yield from _blocks(ctx, run_, settings, order, previous, q.spare_cores)
    _write(out, result)
    return run_


def run(task: Iterator, progress: Callable[[Progress], None] | None = None) -> Any:
    """Drive a task's generator in this thread (a notebook, the command line): each Progress to `progress`,
    Partials skipped; the task's return value."""
    while True:
        try:
            item = next(task)
        except StopIteration as stop:
            return stop.value
        if isinstance(item, Progress) and progress is not None:
            progress(item)


def _activations(ctx: TaskContext, source: ActivationFile | ModelLayer, dataset, device: str, predict: bool,
                 class_names: Path | None) -> Iterator[Progress]:
    """(activations, model identity, the model's predicted class per image or None, its class names or None)."""
    names = read_class_names(class_names) if class_names else None
    if isinstance(source, ActivationFile):
        act, model_info = load_activation_file(source.path, dataset.n_images, source.layout)
        return act, model_info, None, names
    if isinstance(source.model, ModelInfo):
        return (yield from _held_model_layer(ctx, source, dataset, predict))
    spec = DatasetSpec.of(dataset)
    [job] = extract_model_layers(source.model, [source.layer], spec.root, spec.index, spec.source, device,
                                 ctx.trust, class_names=class_names, predict=predict, progress=ctx.progress,
                                 input_size=source.input_size,
                                 layouts=None if source.layout is None else {source.layer: source.layout})
    return job.activations, job.model_info, job.predictions, names or job.class_names


def _held_model_layer(ctx: TaskContext, source: ModelLayer, dataset, predict: bool) -> Iterator[Progress]:
    """The layer of a model the process holds (the window's), its head's predictions in the same pass when the
    model names its classes and can be hooked; the model identity records the head when it predicts."""
    # (torch: the window's process imports this module for its Jobs, never torch)
    from probescope.core.data.activations import extract_layers

    info: ModelInfo = source.model  # type: ignore[assignment]
    model = model_of(ctx, info)
    layer = source.layer or model.default_layer
    if source.shape is not None:  # known from loading: refused before the activations are extracted
        require_spatial_map(source.shape, layer)
    model.module.eval()
    yield Progress(0.0, f"activations of {layer}")
    head = head_layer(model) if getattr(model, "hookable", False) else None  # the predictions, in the same pass
    act = extract_layers(model, [layer] + ([head] if head else []), dataset, cache_dir(),
                         progress=ctx.progress, cancel=ctx.cancelled)[layer]
    require_spatial_map(act.shape[1:], layer)
    model_info = model_identity(model, info.spec, layer)
    if not (predict and model.class_names and getattr(model, "hookable", False)):
        return act, model_info, None, None
    yield Progress(None, "the model's predictions")
    predicted = predicted_classes(model, dataset, cache_dir(), progress=ctx.progress, cancel=ctx.cancelled)
    if predicted is None:
        return act, model_info, None, None
    head, classes = predicted
    return act, {**model_info, "predictions": head}, classes, model.class_names


def _read_predictions(path: Path) -> np.ndarray:
    try:
        loaded = np.load(path, allow_pickle=False)
    except NUMPY_FILE_ERRORS as exc:
        raise InputError(f"not a readable .npy array ({exc})", path) from None
    if not isinstance(loaded, np.ndarray):  # a .npz archive
        loaded.close()
        raise InputError("expected one .npy array of predictions, found a .npz archive", path)
    return loaded


def _previous(path: Path, settings: DissectionSettings, dataset_info: dict, model_info: dict, n_units: int,
              units: Sequence[int] | None, out: Path | None, log) -> DissectionResult | None:
    """The earlier result to resume: an output folder's (a damaged one is refused: it may be somebody's result),
    or the cache's (a damaged entry is computed again)."""
    # (lazy: `probescope --help` imports this module; the engine adds 29 ms to it)
    from probescope.core.dissection.saved import resumable

    try:
        previous, why = resumable(path, settings, dataset_info, model_info, n_units)
    except InputError:
        if out is not None:
            raise
        return None
    if log is not None and why:
        log(why)
    elif log is not None and previous is not None:
        left = len(set(range(n_units) if units is None else units) - set(previous.units))
        log(f"resuming: {len(previous.units)} units already done, {left} to go" if left else
            f"complete: all {len(previous.units)} units already done, nothing to resume (--restart dissects again)")
    return previous


def _blocks(ctx: TaskContext, run_: LayerRun, settings: DissectionSettings, order: list[int],
            previous: DissectionResult | None, spare_cores: int) -> Iterator[Partial]:
    # (lazy: `probescope --help` imports this module; the engine adds 29 ms to it)
    from probescope.core.dissection.saved import dissect_in_blocks

    result = previous
    for result in dissect_in_blocks(run_.path, run_.store, run_.activations, settings, order, previous=previous,
                                    correct=run_.correct, dataset_info=run_.dataset_info,
                                    model_info=run_.model_info, progress=ctx.progress, cancel=ctx.cancelled,
                                    spare_cores=spare_cores):
        run_.result = result
        yield Partial(replace(run_))
    return result


def _write(out: Path | None, result: DissectionResult) -> None:
    if out is not None:
        from probescope.core.dissection.saved import write_layer  # (lazy: --help imports this module; see _blocks)

        write_layer(out, result)
