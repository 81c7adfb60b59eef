"""Per-image masks for display: one unit's mask and one formula's mask in one image, at segmentation size."""

from __future__ import annotations

import numpy as np

from probescope.core.dissection.counts import RegionSet
from probescope.core.dissection.formula import Formula
from probescope.core.dissection.labels import LabelStore
from probescope.core.dissection.unitmasks import unit_mask


def formula_mask(store: LabelStore, image: int, formula: Formula) -> np.ndarray:
    """Where `formula` holds in `image`: bool (sh, sw)."""
    first = int(store.image_regions[image])
    regions = RegionSet.whole(store, np.arange(first, int(store.image_regions[image + 1])))
    lo, hi = store.image_pixel_range(image)
    inside = regions.evaluate(formula)[store.pixel_region[lo:hi]]
    return inside.reshape(tuple(int(s) for s in store.seg_shapes[image]))


def image_masks(store: LabelStore, activations: np.ndarray, unit: int, threshold: float, image: int,
                formula: Formula | None = None) -> tuple[np.ndarray, np.ndarray | None]:
    """(unit mask, formula mask or None) for `image`, as the dissection saw them (threshold from the results)."""
    shape = tuple(int(s) for s in store.seg_shapes[image])
    unit_m = unit_mask(np.asarray(activations[image, unit], dtype=np.float32), threshold, shape)
    return unit_m, None if formula is None else formula_mask(store, image, formula)
