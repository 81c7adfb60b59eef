"""Worker-side work of the Dissection workspace: the layer's dissection (cached on disk per model, layer, dataset and
settings, resumed where it stopped, delivered unit block by unit block) and the per-image peak activations behind
each unit's top images. No Qt here: views get plain values.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from probescope.app.dissection.rows import SEARCHES
from probescope.core.dissection.inputs import (
    dataset_identity,
    head_layer,
    model_identity,
    predicted_classes,
    require_spatial_map,
)
from probescope.core.dissection.results import DissectionResult
from probescope.core.dissection.settings import DissectionSettings
from probescope.jobs.inputs import model_of
from probescope.jobs.protocol import Partial, Progress, TaskContext

DEFAULT_SETTINGS = DissectionSettings(searches=SEARCHES, sweep_length=10)


@dataclass
class LayerData:
    """A dissected (or partly dissected) layer and what the views need next to it."""

    key: str
    settings: DissectionSettings
    layer: str
    model_label: str
    dataset: object  # BrodenDataset: the images and labels behind the overlays
    store: object  # LabelStore
    activations: np.ndarray  # (images, units, h, w) memmap
    peaks: np.ndarray  # (images, units) float32: each unit's maximum activation per image
    result: DissectionResult
    origin: str = ""  # where a saved result was opened from (a batch job); "" for the loaded model's dissection
    histograms: dict = field(default_factory=dict, repr=False)  # unit -> (edges, counts), see `histogram`

    def histogram(self, unit: int) -> tuple[np.ndarray, np.ndarray]:
        """(edges, counts): 60 bins of the unit's activations over every image and position. It reads the unit's
        whole column of the layer (22,210 x 14 x 14 values for ResNet-18 layer3 on ADE20K), so the I/O pool
        computes it with the unit's overlays and the view only draws it (`histograms` keeps it)."""
        found = self.histograms.get(unit)
        if found is None:
            counts, edges = np.histogram(np.asarray(self.activations[:, unit], dtype=np.float32).ravel(), bins=60)
            found = self.histograms[unit] = (edges, counts)
        return found

    def top_images(self, unit: int, k: int) -> np.ndarray:
        """The k images where `unit` peaks highest, highest first."""
        column = self.peaks[:, unit]
        k = min(k, len(column))
        top = np.argpartition(-column, k - 1)[:k]
        return top[np.argsort(-column[top], kind="stable")]


def identity(loaded_model, model, layer: str, dataset) -> tuple[dict, dict]:
    """(model_info, dataset_info): what the dissection depends on besides its settings (as `probescope dissect`
    records them, so the GUI's results and the command line's describe their inputs the same way)."""
    return model_identity(model, loaded_model.spec, layer), dataset_identity(dataset)


def result_path(cache: Path, model_info: dict, dataset_info: dict, settings: DissectionSettings) -> Path:
    """Where the dissection for these inputs and settings is kept."""
    text = json.dumps([model_info, dataset_info, settings.protocol()], sort_keys=True)
    return Path(cache) / "dissection" / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.json"


def unit_peaks(activations: np.ndarray, chunk: int = 256) -> np.ndarray:
    """(images, units) maximum of each unit's map per image, read through the memmap in image chunks; the pages it
    mapped are handed back after each chunk (a pass over a 2 GB layer would otherwise keep it in the process)."""
    from probescope.core.dissection.blocks import release_pages

    n, units = activations.shape[:2]
    out = np.empty((n, units), np.float32)
    for lo in range(0, n, chunk):
        out[lo:lo + chunk] = np.asarray(activations[lo:lo + chunk]).reshape(min(chunk, n - lo), units, -1).max(2)
        release_pages(activations)
    return out


def settings_label(settings: DissectionSettings) -> str:
    s = settings
    candidates = "all concepts" if s.beam_limit == 0 else f"limit {s.beam_limit}"
    extras = [text for on, text in ((s.beam_dedupe == "none", "duplicates kept"),
                                    (s.iou_scope == "category", "IoU per category"),
                                    ("optimal" in s.searches, "optimal")) if on]
    return " · ".join([f"q {s.quantile:g}", f"beam {s.beam_size}", candidates, f"length ≤{s.max_length}",
                       f"min {s.min_samples} images", *extras])


def layer_task(loaded_model, layer: str, dataset, store, settings: DissectionSettings,
               ctx: TaskContext, first_unit: int | None = None) -> Iterator[Progress | Partial]:
    """Dissect `layer` with `settings`; yields Partial(LayerData) after every block of units and returns the last.

    A finished dissection in the cache comes back at once; a partial one is resumed (only missing units run).
    The units run from `first_unit` on (then wrapping round), so the unit in view is among the first to arrive.
    """
    from probescope.core.cache import cache_dir
    from probescope.core.data.activations import extract_layers
    from probescope.core.dissection.label_cache import label_store
    from probescope.core.dissection.saved import dissect_in_blocks, resumable
    from probescope.core.errors import InputError

    model = model_of(ctx, loaded_model.value)
    shape = next((info.out_shape for info in loaded_model.layers if info.name == layer), None)
    if shape is not None:  # known from loading: refused before the activations are extracted
        require_spatial_map(shape, layer)
    model.module.eval()
    yield Progress(0.0, f"activations of {layer}")
    head = head_layer(model) if getattr(model, "hookable", False) else None  # the predictions, in the same pass
    activations = extract_layers(model, [layer] + ([head] if head else []), dataset, cache_dir(),
                                 progress=ctx.progress, cancel=ctx.cancelled)[layer]
    require_spatial_map(activations.shape[1:], layer)
    if store is None:
        yield Progress(None, "reading the label maps")
        store = label_store(dataset, cache_dir(), progress=ctx.progress, cancel=ctx.cancelled)
    yield Progress(None, "peak activation per image")
    peaks = unit_peaks(activations)
    model_info, dataset_info = identity(loaded_model, model, layer, dataset)
    head, correct = yield from _correct_predictions(model, dataset, store, ctx)
    if head is not None:
        model_info["predictions"] = head  # results with accuracies are kept apart from those without
    path = result_path(cache_dir(), model_info, dataset_info, settings)
    key = path.stem
    try:
        previous, _ = resumable(path, settings, dataset_info, model_info, int(activations.shape[1]))
    except InputError:
        previous = None  # a damaged cache entry is recomputed
    histograms: dict = {}  # shared by every block's LayerData

    def layer_data(result: DissectionResult) -> LayerData:
        return LayerData(key, settings, layer, loaded_model.label, dataset, store, activations, peaks, result,
                         histograms=histograms)

    if previous is not None and previous.complete:
        return layer_data(previous)
    if previous is not None and previous.units:
        yield Partial(layer_data(previous))  # what an earlier launch finished is on screen before the next block

    def progress(fraction: float, message: str) -> None:
        ctx.progress(fraction, f"dissecting {layer}: {message}")

    n_units = int(activations.shape[1])
    start = first_unit if first_unit is not None and 0 <= first_unit < n_units else 0
    order = [*range(start, n_units), *range(start)]  # (runs of consecutive units: read without indexing)
    result = previous
    for result in dissect_in_blocks(path, store, activations, settings, order, previous=previous, correct=correct,
                                    dataset_info=dataset_info, model_info=model_info, progress=progress,
                                    cancel=ctx.cancelled, spare_cores=1):  # automatic jobs leave a core to the GUI
        yield Partial(layer_data(result))
    return layer_data(result)


def _correct_predictions(model, dataset, store, ctx: TaskContext) -> Iterator[Progress]:
    """(head layer name, int8 right/wrong/unknown per image) from the classifier head's outputs when the model names
    its classes and the dataset's scene labels name some of them; (None, None) otherwise."""
    from probescope.core.cache import cache_dir
    from probescope.core.dissection.correlation import correct_predictions, scene_truth

    if not getattr(model, "class_names", None) or not getattr(model, "hookable", False):
        return None, None
    yield Progress(None, "the model's predictions")
    predicted = predicted_classes(model, dataset, cache_dir(), progress=ctx.progress, cancel=ctx.cancelled)
    if predicted is None:
        return None, None
    head, predictions = predicted
    truth = scene_truth(store, model.class_names)
    if not (truth >= 0).any():
        return None, None
    return head, correct_predictions(predictions, truth)
