"""A concept's direction in a layer: the layer's mean activation vector over the concept's pixels in the probing
dataset, with the activations seen as the dissection sees them (upsampled bilinearly to the segmentation size):

    v_c = sum over images i and concept pixels p of up(A_i)(p) / (number of concept pixels)

Upsampling is linear, up(A)(p) = sum_q U[p, q] A(q) over the feature map's positions q, so the sum over a mask m is
A @ (U^T m): each image costs one small product instead of an upsampled map per unit.
"""

from __future__ import annotations

import numpy as np

from probescope.core.dissection.formula import Formula
from probescope.core.dissection.labels import LabelStore
from probescope.core.dissection.masks import formula_mask
from probescope.core.dissection.unitmasks import upsample
from probescope.core.errors import InputError
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report


def upsampling_matrix(feature_shape: tuple[int, int], seg_shape: tuple[int, int]) -> np.ndarray:
    """U^T as (h * w, sh * sw) float64: row q is the upsampled map of a one at position q."""
    h, w = feature_shape
    basis = np.eye(h * w, dtype=np.float32).reshape(h * w, h, w)
    return upsample(basis, seg_shape).numpy().reshape(h * w, -1).astype(np.float64)


def concept_direction(store: LabelStore, activations: np.ndarray, formula: Formula, *,
                      progress: ProgressCallback | None = None, cancel: CancelCheck | None = None) -> np.ndarray:
    """v_c for `formula` (an atom or a compositional explanation) over the dataset: (units,) float64.
    `activations` is the layer's (images, units, h, w) in the dataset's order (a memmap is read image by image)."""
    if activations.ndim != 4 or len(activations) != store.n_images:
        raise InputError(f"activations must be (images, units, h, w) for the dataset's {store.n_images} images, "
                         f"got {activations.shape}")
    candidates = np.unique(np.concatenate([store.images_with(a) for a in formula.atoms]))
    matrices: dict[tuple, np.ndarray] = {}
    total = np.zeros(activations.shape[1])
    pixels = 0
    for k, i in enumerate(candidates.tolist()):
        if k % 64 == 0:
            check_cancel(cancel)
            report(progress, k / len(candidates), f"concept direction: image {k}/{len(candidates)}")
        mask = formula_mask(store, i, formula)
        if not mask.any():
            continue
        shapes = (tuple(activations.shape[2:]), mask.shape)
        if shapes not in matrices:
            matrices[shapes] = upsampling_matrix(*shapes)
        weights = matrices[shapes] @ mask.reshape(-1)
        total += np.asarray(activations[i], dtype=np.float64).reshape(activations.shape[1], -1) @ weights
        pixels += int(mask.sum())
    if pixels == 0:
        raise InputError("the concept is present in no image of the dataset")
    report(progress, 1.0, f"concept direction: {pixels} pixels in {len(candidates)} images")
    return total / pixels
