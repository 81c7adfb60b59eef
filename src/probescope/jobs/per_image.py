"""Jobs behind the Dissection workspace's per-image views (issue 28): the layer's view of one image and what a unit
(or a group of units, or a concept's direction) would draw. Each is a module-level function with plain, picklable
arguments, so it can run in the window's compute kernel as well as in the worker pool.

The dataset is named by its folder and index file; the job opens it, and reads its label store, through the
session of the process it runs in (the window seeds its own session with the dataset and store it has loaded, so
nothing is read twice there).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from probescope.core.cache import cache_dir
from probescope.core.data.broden import BrodenDataset
from probescope.core.dissection.formula import Formula
from probescope.core.dissection.image_view import ImageSegmentation, segment_image
from probescope.core.dissection.label_cache import label_store
from probescope.core.dissection.results import DissectionResult
from probescope.core.featurevis.directions import concept_direction
from probescope.core.featurevis.settings import Direction, VisSettings, Visualization
from probescope.jobs.inputs import ModelInfo, model_of
from probescope.jobs.protocol import Progress, TaskContext

EDGE = np.array([255, 255, 255], np.uint8)  # region outlines
REGION_ALPHA = 0.55


@dataclass(frozen=True)
class DatasetRef:
    """A Broden dataset by its folder and index file (what the session knows it by)."""

    root: str
    index: str

    @classmethod
    def of(cls, dataset) -> DatasetRef:
        return cls(str(dataset.root), str(dataset.index_path.name))


def dataset_of(ctx: TaskContext, ref: DatasetRef):
    """The BrodenDataset `ref` names, opened once per process."""
    return ctx.session.get("dataset", ref, lambda: BrodenDataset.open(ref.root, ref.index))


def labels_of(ctx: TaskContext, ref: DatasetRef):
    """The dataset's LabelStore, from the label cache, once per process."""
    return ctx.session.get("labels", ref, lambda: label_store(dataset_of(ctx, ref), cache_dir(),
                                                              progress=ctx.progress, cancel=ctx.cancelled))


@dataclass(frozen=True)
class ImageView:
    """One image through the layer: the segmentation, the image at segmentation size with the regions drawn over
    it (uint8), the image as it is, and its file name."""

    image: int
    name: str
    segmentation: ImageSegmentation
    picture: np.ndarray  # (sh, sw, 3): the image with the regions tinted and outlined
    photo: np.ndarray  # (ih, iw, 3): the image itself
    anchors: tuple[tuple[int, int, int], ...]  # per drawn concept (its index, y, x): where its name is written


def image_view_job(ctx: TaskContext, *, dataset: DatasetRef, result: DissectionResult, activations: np.ndarray,
                   image: int, method: str, min_iou: float) -> ImageView:
    """`segment_image` of `image` (its activations at the layer, (units, h, w)), and its picture."""
    store = labels_of(ctx, dataset)
    ctx.check()
    view = segment_image(result, activations, store=store, image=image, method=method, min_iou=min_iou)
    ctx.check()
    data = dataset_of(ctx, dataset)
    photo = data.load_image(image)
    return ImageView(image, data.image_path(image).name, view, drawn_regions(photo, view), photo, anchors(view))


def anchors(view: ImageSegmentation) -> tuple[tuple[int, int, int], ...]:
    """Per concept drawn, the drawn pixel nearest its drawn pixels' centroid (inside the region even when the region
    is not convex), most pixels first."""
    out = []
    for c in sorted(range(len(view.concepts)), key=lambda c: -view.concepts[c].drawn):
        ys, xs = np.nonzero(view.segmentation == c)
        if len(ys):
            k = int(np.argmin((ys - ys.mean()) ** 2 + (xs - xs.mean()) ** 2))
            out.append((c, int(ys[k]), int(xs[k])))
    return tuple(out)


def drawn_regions(photo: np.ndarray, view: ImageSegmentation) -> np.ndarray:
    """The photo resized (nearest) to the segmentation, each drawn region tinted with its concept's colour and
    outlined in white where the concept changes."""
    sh, sw = view.shape
    rows = np.arange(sh) * photo.shape[0] // sh
    cols = np.arange(sw) * photo.shape[1] // sw
    small = photo[rows[:, None], cols[None, :]].astype(np.float32)
    seg = view.segmentation
    drawn = seg >= 0
    tint = view.colored().astype(np.float32)
    out = np.where(drawn[..., None], small * (1 - REGION_ALPHA) + tint * REGION_ALPHA, small * 0.6)
    edge = np.zeros_like(drawn)
    edge[:-1] |= seg[:-1] != seg[1:]
    edge[:, :-1] |= seg[:, :-1] != seg[:, 1:]
    out[edge] = EDGE
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)


def drawing_job(ctx: TaskContext, *, model: ModelInfo, layer: str, direction: Direction, settings: VisSettings,
                only_cached: bool = False) -> Visualization | None:
    """`visualize` of `direction` with the cache folder; `only_cached`: None unless it was made before (a quick
    look that never starts an optimisation)."""
    # (torch: the window's process imports this module for its Jobs, never torch)
    from probescope.core.featurevis.render import cached_visualization, visualize

    loaded = model_of(ctx, model)
    if only_cached:
        return cached_visualization(loaded, layer, direction, settings, cache_dir())
    return visualize(loaded, layer, direction, settings, cache=cache_dir(), progress=ctx.progress,
                     cancel=ctx.cancelled)


def concept_drawing_job(ctx: TaskContext, *, model: ModelInfo, layer: str, dataset: DatasetRef, formula: Formula,
                        name: str, settings: VisSettings) -> Iterator[Progress]:
    """What the concept's direction (its mean activation vector over the dataset, `concept_direction`) draws."""
    # (torch: the window's process imports this module for its Jobs, never torch)
    from probescope.core.data.activations import extract_layers
    from probescope.core.featurevis.render import visualize

    loaded = model_of(ctx, model)
    yield Progress(None, f"activations of {layer}")
    activations = extract_layers(loaded, [layer], dataset_of(ctx, dataset), cache_dir(), progress=ctx.progress,
                                 cancel=ctx.cancelled)[layer]
    vector = concept_direction(labels_of(ctx, dataset), activations, formula, progress=ctx.progress,
                               cancel=ctx.cancelled)
    return visualize(loaded, layer, Direction.of(vector, name), settings, cache=cache_dir(), progress=ctx.progress,
                     cancel=ctx.cancelled)
