"""Overlays of a unit on its images, built in workers: the activation as a heat map, the unit's binary mask (at its
threshold, or at a display threshold) as an outline, and an explanation's concept mask as a tint in a second colour.

`top` mode shows the unit's top-activating images; `present` mode the images where the explanation is present (the
images behind Detection Accuracy), each marked with whether the unit fired there and how much of the concept the
unit's mask covers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from probescope.core.dissection.counts import DatasetCounts
from probescope.core.dissection.formula import Formula
from probescope.core.dissection.masks import image_masks
from probescope.core.dissection.unitmasks import bilinear
from probescope.jobs.protocol import Partial, Progress, TaskContext
from probescope.widgets.images import blend, boundaries, to_qimage
from probescope.widgets.thumbnail_grid import Thumbnail

UNIT_COLOR = np.array([255, 214, 0], np.uint8)  # the unit's mask outline: yellow
CONCEPT_COLOR = np.array([0, 190, 255], np.uint8)  # the explanation's mask: cyan
CHUNK = 6
_HEAT = np.array([[0, 0, 0], [80, 0, 120], [200, 30, 60], [255, 140, 0], [255, 255, 160]], np.float32)


@dataclass(frozen=True)
class OverlayOptions:
    """What the overlays show. `display_threshold` scales the unit's threshold for display only (1 = T_u)."""

    opacity: float = 0.5
    display_threshold: float = 1.0
    heat: bool = True
    outline: bool = True


@dataclass(frozen=True)
class ImageOverlay:
    """One image with overlays and the numbers shown under it (`fired`/`overlap` only in `present` mode)."""

    image: int
    thumbnail: Thumbnail
    peak: float
    unit_pixels: int
    concept_pixels: int
    overlap_pixels: int

    @property
    def fired(self) -> bool:
        return self.unit_pixels > 0

    @property
    def overlap(self) -> float:
        """Share of the concept's pixels inside the unit's mask."""
        return self.overlap_pixels / self.concept_pixels if self.concept_pixels else 0.0


def heat_colors(values: np.ndarray) -> np.ndarray:
    """A dark-to-bright heat palette for values in [0, 1]: uint8 (..., 3)."""
    x = np.clip(values, 0, 1) * (len(_HEAT) - 1)
    lo = np.minimum(x.astype(np.int64), len(_HEAT) - 2)
    t = (x - lo)[..., None]
    return np.clip(_HEAT[lo] * (1 - t) + _HEAT[lo + 1] * t, 0, 255).astype(np.uint8)


def nearest(mask: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    """Nearest-neighbour resize of a label or mask array to `shape` (segmentations are half the image size)."""
    rows = np.arange(shape[0]) * mask.shape[0] // shape[0]
    cols = np.arange(shape[1]) * mask.shape[1] // shape[1]
    return mask[rows[:, None], cols[None, :]]


def compose(image: np.ndarray, heat: np.ndarray | None, unit_mask: np.ndarray, concept: np.ndarray | None,
            options: OverlayOptions) -> np.ndarray:
    """The picture: heat map blended in proportion to the activation, concept tinted, unit mask outlined (all at
    image size)."""
    out = image
    if heat is not None and options.heat:
        alpha = options.opacity * np.sqrt(np.clip(heat, 0, 1))[..., None]
        out = np.clip(out * (1 - alpha) + heat_colors(heat) * alpha + 0.5, 0, 255).astype(np.uint8)
    if concept is not None:  # diagonal stripes: no natural colour of the image is mistaken for the mask
        yy, xx = np.indices(concept.shape)
        stripes = concept & (((yy + xx) // 3) % 2 == 0)
        out = blend(out, np.broadcast_to(CONCEPT_COLOR, out.shape), stripes, alpha=max(options.opacity, 0.35) + 0.3)
        out[boundaries(concept.astype(np.uint8)) & concept] = CONCEPT_COLOR
    if options.outline:
        edge = boundaries(unit_mask.astype(np.uint8))
        thick = edge.copy()
        thick[1:] |= edge[:-1]
        thick[:, 1:] |= edge[:, :-1]
        out = out.copy() if out is image else out
        out[thick] = UNIT_COLOR
    else:
        out = blend(out, np.broadcast_to(UNIT_COLOR, out.shape), unit_mask, alpha=options.opacity * 0.6)
    return out


def image_overlay(dataset, store, activations: np.ndarray, unit: int, threshold: float, scale: float, image: int,
                  formula: Formula | None, options: OverlayOptions, caption: str = "",
                  tooltip: str = "") -> tuple[ImageOverlay, np.ndarray]:
    """One image's overlay (and the composed RGB array, for the large view). `scale` normalises the heat map (the
    unit's maximum over the dataset)."""
    picture = dataset.load_image(image)
    shape = picture.shape[:2]
    unit_m, concept_m = image_masks(store, activations, unit, threshold * options.display_threshold, image, formula)
    act = np.asarray(activations[image, unit], dtype=np.float32)
    heat = bilinear(act[None], shape)[0] / max(scale, 1e-12)
    unit_big = nearest(unit_m, shape)
    concept_big = None if concept_m is None else nearest(concept_m, shape)
    rgb = compose(picture, heat, unit_big, concept_big, options)
    overlap = int((unit_m & concept_m).sum()) if concept_m is not None else 0
    concept_px = int(concept_m.sum()) if concept_m is not None else 0
    return ImageOverlay(image, Thumbnail(to_qimage(rgb), caption, tooltip), float(act.max()), int(unit_m.sum()),
                        concept_px, overlap), rgb


def overlay_task(dataset, store, activations: np.ndarray, unit: int, threshold: float, scale: float,
                 images: list[int], formula: Formula | None, options: OverlayOptions, present: bool,
                 ctx: TaskContext) -> Iterator[Partial | Progress]:
    """Overlays of `images`, yielded in chunks; captions give the peak activation, or (present mode) whether the
    unit fired on the image and the overlap."""
    chunk: list[ImageOverlay] = []
    name = dataset.image_path
    for k, i in enumerate(images):
        ctx.check()
        item, _ = image_overlay(dataset, store, activations, unit, threshold, scale, int(i), formula, options)
        if present:
            mark = "fired" if item.fired else "silent"
            caption = f"{mark} · overlap {item.overlap:.0%}"
        else:
            caption = f"#{int(i)} · max {item.peak:.2f}"
        chunk.append(ImageOverlay(item.image, Thumbnail(item.thumbnail.image, caption, f"{name(int(i)).name}\n"
                                                        f"{caption}"), item.peak, item.unit_pixels,
                                  item.concept_pixels, item.overlap_pixels))
        if len(chunk) == CHUNK or k == len(images) - 1:
            yield Partial(chunk)
            chunk = []
        yield Progress((k + 1) / len(images), f"overlays {k + 1} of {len(images)}")


def present_images(store, formula: Formula, peaks: np.ndarray, unit: int, k: int) -> tuple[np.ndarray, int]:
    """(up to k images where `formula` is present, the unit's strongest first; how many there are in all)."""
    images = DatasetCounts(store).record(formula).images
    order = images[np.argsort(-peaks[images, unit], kind="stable")]
    return order[:k], len(images)


def image_labels(dataset, image: int) -> list[str]:
    """Every concept labelled in `image`, as 'name (category)'."""
    found: dict[int, str] = {}
    for category, labels in dataset.pixel_layers(image):
        for n in np.unique(labels):
            if n > 0:
                found[int(n)] = category
    for category, n in dataset.image_labels(image):
        found[int(n)] = category
    return [f"{dataset.labels[n].name} ({c})" for n, c in sorted(found.items()) if n in dataset.labels]
