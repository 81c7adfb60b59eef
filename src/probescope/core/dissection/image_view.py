"""A layer's view of one image: the image segmented by every unit that fires in it, each region labelled with its
unit's explanation (Network Dissection's "segmenting images with the top-activated units"), beside the image's own
labels and, per concept, how well the units' segmentation agrees with the ground truth.

    view = segment_image(result, activations[i], store=store, image=i, method="iou", min_iou=0.04)
    view.segmentation          # (sh, sw) concept index per pixel, -1 where no unit fires
    view.covering(y, x)        # the units covering a pixel, with their activation there

Protocol (the dissection's own, from the saved results): each unit's activation map is upsampled bilinearly to the
segmentation size and its mask is A_u >= T_u (unitmasks.py, with T_u from the results), so a unit fires in the image
exactly where the dissection counted its pixels. A unit takes part when it fires somewhere in the image, has an
explanation for the chosen method and that explanation's IoU is at least `min_iou`.

Drawing rule (ours; NetDissect's figures do not state one): where several units cover a pixel, the one whose
activation there is highest relative to its threshold, A_u / T_u, is drawn (ties: the lower unit number). A unit
whose threshold is not positive (a dead or constant unit: its mask is everywhere its activation is) is drawn only
where no other unit covers. Colours are one per explanation and stable over the layer (see `concept_colors`).

Agreement per concept E (the per-image term of the dissection's IoU): the union U_E of the masks of the units
explained by E against E's ground-truth mask G_E in this image, |U_E & G_E| / |U_E | G_E|; `drawn_iou` is the same
for the pixels drawn as E.
"""

from __future__ import annotations

import colorsys
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import numpy as np

from probescope.core.dissection.formula import Formula
from probescope.core.dissection.labels import LabelStore
from probescope.core.dissection.masks import formula_mask
from probescope.core.dissection.results import DissectionResult, Explanation, UnitResult
from probescope.core.dissection.unitmasks import _ROUNDING_MARGIN, bilinear, float32_threshold
from probescope.core.errors import InputError

METHODS = ("netdissect", "iou", "da-select", "da-stop", "optimal")  # "iou": the compositional beam search
NOT_POSITIVE = -1e30  # the drawing score of units whose threshold is not positive: below any other unit's


def explanation(unit: UnitResult, method: str) -> Explanation | None:
    """The unit's explanation by `method` (None when that search did not run or found nothing)."""
    _check_method(method)
    return unit.netdissect if method == "netdissect" else unit.explanations.get(method)


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise InputError(f"unknown explanation method {method!r} (choose from {', '.join(METHODS)})")


def concept_colors(labels: Iterable[str]) -> dict[str, tuple[int, int, int]]:
    """One colour per explanation text: hues a golden angle apart in sorted order, alternating in saturation and
    value, so a layer's colours stay put as units and images change (pass every explanation of the layer)."""
    out = {}
    for k, label in enumerate(sorted(set(labels))):
        r, g, b = colorsys.hsv_to_rgb((k * 0.381966) % 1.0, 0.85 - 0.3 * (k // 5 % 2), 0.95 - 0.25 * (k // 2 % 2))
        out[label] = (round(255 * r), round(255 * g), round(255 * b))
    return out


def layer_colors(result: DissectionResult, method: str) -> dict[str, tuple[int, int, int]]:
    """`concept_colors` of every explanation the layer's units have by `method`."""
    return concept_colors(e.label for u in result.units.values() if (e := explanation(u, method)) is not None)


@dataclass(frozen=True)
class FiringUnit:
    """A unit that takes part: its explanation and how it fires in the image."""

    unit: int
    label: str
    concept: int  # index into ImageSegmentation.concepts
    iou: float
    threshold: float
    peak: float  # its highest upsampled activation in the image
    pixels: int  # its mask's pixels in the image
    drawn: int  # pixels where it is drawn


@dataclass(frozen=True)
class ConceptRegion:
    """One explanation in the image: its units, their pixels, and (with labels) their agreement with the truth."""

    label: str
    formula: Formula
    color: tuple[int, int, int]
    units: tuple[int, ...]
    pixels: int  # the union of its units' masks
    drawn: int
    truth: int | None  # its ground-truth pixels in the image (None without the dataset's labels)
    iou: float | None
    drawn_iou: float | None


@dataclass(frozen=True)
class Covering:
    """A unit covering a pixel, with its activation there (upsampled, as the dissection saw it)."""

    unit: int
    label: str
    iou: float
    activation: float
    threshold: float


@dataclass(frozen=True)
class ImageLabel:
    """A label of the image with its pixels (an image-level label, such as a scene, covers them all)."""

    number: int
    name: str
    category: str
    pixels: int


@dataclass
class ImageSegmentation:
    """The layer's view of one image (see the module docstring)."""

    method: str
    min_iou: float
    units: list[FiringUnit]  # in unit order
    concepts: list[ConceptRegion]  # in order of appearance (the unit order of their first unit)
    segmentation: np.ndarray  # (sh, sw) int32: concept index, -1 where none is drawn
    winner: np.ndarray  # (sh, sw) int32: index into `units` of the unit drawn, -1 where none
    labels: list[ImageLabel]  # the image's own labels, most pixels first ([] without the dataset's labels)
    left_out: int  # units that fire in the image but have no explanation by the method, or one below min_iou
    maps: np.ndarray  # (len(units), sh, sw) float32: their upsampled activations
    masks: np.ndarray  # (len(units), sh, sw) bool

    @property
    def shape(self) -> tuple[int, int]:
        return self.segmentation.shape  # type: ignore[return-value]

    def covering(self, y: int, x: int) -> list[Covering]:
        """The units whose mask holds pixel (y, x), in drawing order (the drawn one first)."""
        if not (0 <= y < self.shape[0] and 0 <= x < self.shape[1]):
            raise InputError(f"pixel ({y}, {x}) is outside the {self.shape[0]}x{self.shape[1]} segmentation")
        here = np.flatnonzero(self.masks[:, y, x])
        score = _scores(self.maps[here, y, x], np.array([self.units[k].threshold for k in here]))
        order = here[np.lexsort((here, -score))]
        return [Covering(self.units[k].unit, self.units[k].label, self.units[k].iou, float(self.maps[k, y, x]),
                         self.units[k].threshold) for k in order]

    def colored(self, background: tuple[int, int, int] = (0, 0, 0)) -> np.ndarray:
        """The segmentation in its concepts' colours, uint8 (sh, sw, 3)."""
        palette = np.array([c.color for c in self.concepts] + [background], np.uint8).reshape(-1, 3)
        return palette[self.segmentation]


def segment_image(result: DissectionResult, activations: np.ndarray, seg_shape: tuple[int, int] | None = None, *,
                  store: LabelStore | None = None, image: int | None = None, method: str = "netdissect",
                  min_iou: float = 0.0, colors: dict[str, tuple[int, int, int]] | None = None) -> ImageSegmentation:
    """The view of one image from its activations at the dissected layer, (units, h, w).

    With `store` and `image` (the image's row in the dissected dataset) the segmentation has the image's
    segmentation size and comes with its labels and the agreement with them; otherwise give `seg_shape` (the
    protocol's is half the image's size). `colors` defaults to `layer_colors(result, method)`."""
    activations = np.asarray(activations)
    seg_shape = _segmentation_shape(result, activations, seg_shape, store, image, method, min_iou)
    colors = layer_colors(result, method) if colors is None else colors
    keep, maps, masks, fired = _firing_units(result, activations, seg_shape, method, min_iou)
    unit_thresholds = np.array([result.units[u].threshold for u, _ in keep])
    winner = _winners(maps, masks, unit_thresholds)
    concept_of: dict[str, int] = {}
    for _, e in keep:
        concept_of.setdefault(e.label, len(concept_of))
    unit_concept = np.array([concept_of[e.label] for _, e in keep], np.int32)
    segmentation = np.where(winner >= 0, unit_concept[np.maximum(winner, 0)] if len(keep) else -1, -1)
    drawn_per_unit = np.bincount(winner[winner >= 0], minlength=len(keep))
    units = [FiringUnit(u, e.label, concept_of[e.label], e.iou, float(unit_thresholds[k]), float(maps[k].max()),
                        int(masks[k].sum()), int(drawn_per_unit[k])) for k, (u, e) in enumerate(keep)]
    truth_of = (lambda f: None) if store is None else (lambda f: formula_mask(store, image, f))
    concepts = _concepts(concept_of, keep, unit_concept, masks, segmentation, colors, truth_of)
    return ImageSegmentation(method, min_iou, units, concepts, segmentation.astype(np.int32), winner,
                             [] if store is None else image_labels(store, image), fired - len(keep), maps, masks)


def _segmentation_shape(result: DissectionResult, activations: np.ndarray, seg_shape: tuple[int, int] | None,
                        store: LabelStore | None, image: int | None, method: str, min_iou: float) -> tuple[int, int]:
    """The request checked, and the segmentation size: the image's in the dataset, else the one given."""
    if activations.ndim != 3 or activations.shape[0] != result.n_units:
        raise InputError(f"activations must be (units, h, w) with the layer's {result.n_units} units, got "
                         f"{activations.shape}")
    _check_method(method)
    if not 0.0 <= min_iou <= 1.0:
        raise InputError(f"minimum IoU must lie in [0, 1], got {min_iou}")
    if (store is None) != (image is None):
        raise InputError("give both the label store and the image's row, or neither")
    if store is not None:
        if not 0 <= image < store.n_images:
            raise InputError(f"image {image} is not in the dataset ({store.n_images} images)")
        return tuple(int(s) for s in store.seg_shapes[image])
    if seg_shape is None:
        raise InputError("without the dataset's labels, the segmentation size must be given")
    return seg_shape


def _firing_units(result: DissectionResult, activations: np.ndarray, seg_shape: tuple[int, int], method: str,
                  min_iou: float) -> tuple[list[tuple[int, Explanation]], np.ndarray, np.ndarray, int]:
    """(the units taking part with their explanations, their upsampled maps and masks, how many units fire)."""
    dissected = sorted(result.units)  # a partly dissected layer: the units done so far
    thresholds = np.array([result.units[u].threshold for u in dissected])
    peaks = activations[dissected].reshape(len(dissected), -1).max(axis=1).astype(np.float64)
    # bilinear upsampling never exceeds the map's maximum (up to float32 rounding): only these can fire
    may_fire = peaks >= thresholds - _ROUNDING_MARGIN * (np.abs(thresholds) + np.abs(peaks))
    candidates = [u for u, m in zip(dissected, may_fire) if m]
    ups = bilinear(activations[candidates], seg_shape)
    every_mask = _masks(ups, thresholds[may_fire])
    fires = every_mask.any(axis=(1, 2))
    keep, rows = [], []
    for row, u in enumerate(candidates):
        e = explanation(result.units[u], method)
        if fires[row] and e is not None and e.iou >= min_iou:
            keep.append((u, e))
            rows.append(row)
    return keep, ups[rows], every_mask[rows], int(fires.sum())


def _concepts(concept_of: dict[str, int], keep: list[tuple[int, Explanation]], unit_concept: np.ndarray,
              masks: np.ndarray, segmentation: np.ndarray, colors: dict[str, tuple[int, int, int]],
              truth_of: Callable[[Formula], np.ndarray | None]) -> list[ConceptRegion]:
    """Each explanation's region: its units, the union of their masks, what is drawn, the agreement with the truth."""
    out = []
    for label, c in concept_of.items():
        members = np.flatnonzero(unit_concept == c)
        formula = keep[members[0]][1].formula
        union, drawn, truth = masks[members].any(axis=0), segmentation == c, truth_of(formula)
        out.append(ConceptRegion(label, formula, colors.get(label, (255, 255, 255)),
                                 tuple(keep[k][0] for k in members), int(union.sum()), int(drawn.sum()),
                                 None if truth is None else int(truth.sum()), _iou(union, truth), _iou(drawn, truth)))
    return out


def image_labels(store: LabelStore, image: int) -> list[ImageLabel]:
    """The labels of one image with their pixels, most pixels first (then by label number)."""
    row = store.image_hist.getrow(image)
    found = [(int(n), int(p)) for n, p in zip(row.indices, row.data) if p > 0]
    found.sort(key=lambda np_: (-np_[1], np_[0]))
    return [ImageLabel(n, store.names.get(n, str(n)), store.categories.get(n, ""), p) for n, p in found]


def _masks(maps: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """A_u >= T_u per unit, as the dissection compares (float32 values against the smallest float32 >= T_u)."""
    t32 = np.array([float32_threshold(float(t)) for t in thresholds], np.float32).reshape(-1, 1, 1)
    return maps >= t32


def _scores(activation: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """The drawing score A / T (NOT_POSITIVE for thresholds <= 0)."""
    positive = thresholds > 0
    return np.where(positive, activation / np.where(positive, thresholds, 1.0), NOT_POSITIVE)


def _winners(maps: np.ndarray, masks: np.ndarray, thresholds: np.ndarray) -> np.ndarray:
    """Per pixel, the index of the covering unit with the highest score (the first on ties), -1 where none."""
    if not len(maps):
        return np.full(maps.shape[1:], -1, np.int32)
    score = np.where(masks, _scores(maps, thresholds.reshape(-1, 1, 1)), -np.inf)
    return np.where(masks.any(axis=0), score.argmax(axis=0), -1).astype(np.int32)


def _iou(a: np.ndarray, b: np.ndarray | None) -> float | None:
    if b is None:
        return None
    union = int((a | b).sum())
    return int((a & b).sum()) / union if union else 0.0
