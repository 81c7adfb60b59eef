"""The window's dissection of a layer, as the views need it: `layer_data_job` runs the one workflow
(`layer.dissect_layer`, kept in the cache per model, layer, dataset and settings, resumed where it stopped) and
hands back each block as a `LayerData`, with the per-image peak activations behind each unit's top images. A Job:
its arguments are the window's `LayerRequest` (the held model's `ModelInfo`, the dataset's `DatasetSpec`, the
settings: plain values) and the model's label, so it can run in another process. No Qt here: views get plain values.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np

from probescope.core.dissection.blocks import release_pages
from probescope.core.dissection.results import DissectionResult
from probescope.core.dissection.settings import DissectionSettings
from probescope.jobs.dissection.layer import LayerRequest, LayerRun, dissect_layer
from probescope.jobs.protocol import Partial, Progress, TaskContext, frozen

HISTOGRAM_CHUNK = 512  # images per read of a unit's column: the window's GUI thread gets the GIL between them


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
            column = np.empty((len(self.activations), *self.activations.shape[2:]), np.float32)
            for lo in range(0, len(column), HISTOGRAM_CHUNK):  # (one long copy would hold the GIL through every
                column[lo:lo + HISTOGRAM_CHUNK] = self.activations[lo:lo + HISTOGRAM_CHUNK, unit]  # page fault)
            counts, edges = np.histogram(column.ravel(), bins=60)
            found = self.histograms[unit] = (edges, counts)
        return found

    def top_images(self, unit: int, k: int) -> np.ndarray:
        """The k images where `unit` peaks highest, highest first."""
        column = self.peaks[:, unit]
        k = min(k, len(column))
        top = np.argpartition(-column, k - 1)[:k]
        return top[np.argsort(-column[top], kind="stable")]


def unit_peaks(activations: np.ndarray, chunk: int = 256) -> np.ndarray:
    """(images, units) maximum of each unit's map per image, read through the memmap in image chunks; the pages it
    mapped are handed back after each chunk (a pass over a 2 GB layer would otherwise keep it in the process)."""
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


def layer_data_job(ctx: TaskContext, *, request: LayerRequest, model_label: str) -> Iterator[Progress | Partial]:
    """Dissect the layer of a held model `request` names (its activations a `ModelLayer` of a `ModelInfo`, with the
    layer's name), passed whole to `dissect_layer`; yields Partial(LayerData) after every block of units and returns
    the last.

    A finished dissection in the cache comes back at once; a partial one is shown first, then resumed (only missing
    units run). The units run from the request's `first_unit` on (then wrapping round), so the unit in view is among
    the first to arrive.
    """
    task = dissect_layer(ctx, request)
    layer = request.activations.layer
    peaks, histograms, first = None, {}, True  # (one histogram cache for every block's LayerData)

    def layer_data(run: LayerRun) -> LayerData:
        return LayerData(run.path.stem, request.settings, layer, model_label, run.dataset, run.store,
                         run.activations, peaks, run.result, histograms=histograms)

    try:
        while True:
            try:
                item = next(task)
            except StopIteration as stop:
                return layer_data(stop.value)
            if not isinstance(item, Partial):
                yield item
                continue
            if peaks is None:
                yield Progress(None, "peak activation per image")
                peaks = frozen(unit_peaks(item.value.activations))  # (the same in every block: sent once)
            result, shown_first, first = item.value.result, first, False
            if result is not None and not (shown_first and (result.complete or not result.units)):
                yield Partial(layer_data(item.value))  # (an earlier launch's units: on screen before the next block)
    finally:
        task.close()
