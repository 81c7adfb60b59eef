"""Unit thresholds and binary unit masks at segmentation resolution.

Protocol (seed 002, made exact): `T_u` is numpy's linear-interpolation quantile `1 - q` of all of unit u's
activations (every image, every position, feature-map resolution), computed in float64. The mask is the activation
map upsampled with torch `interpolate(mode="bilinear", align_corners=False)` to the segmentation size, then
`M_u = A_u >= T_u`, exact comparison of the float32 upsampled values with the float64 threshold (done in float32
against the smallest float32 not below T_u, which is equivalent).

Speed: bilinear interpolation is a convex combination of source values, so an image whose maximum lies below T_u
cannot reach it after upsampling, and one whose minimum reaches it stays there; only the other images are upsampled
(a small margin covers float32 rounding). A unit's mask is kept as the pixels of each region inside it (every
formula holds on whole regions), never as a list of pixels: a dead unit's mask is all 278M pixels of ADE20K.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import torch

    from probescope.core.dissection.labels import LabelStore

_ROUNDING_MARGIN = 1e-5  # relative; far above the few-ulp error of a float32 bilinear weighted sum
_CHUNK_BYTES = 4 << 20  # small enough for the allocator to reuse memory (no page faults per chunk)


def unit_thresholds(block: np.ndarray, quantile: float, chunk_values: int = 1 << 22) -> np.ndarray:
    """Exact per-unit thresholds for activations `block` (images, units, h, w): float64 (units,).

    Works through a few units at a time (about `chunk_values` values) in one reused float64 buffer, partitioned in
    place, so a memmap of a whole layer is fine and no memory is allocated per unit.
    """
    n, units = block.shape[:2]
    per_unit = max(1, block[:1, :1].size * n)
    step = max(1, min(units, chunk_values // per_unit))
    buffer = np.empty((step, n, per_unit // n), np.float64)
    out = np.empty(units, np.float64)
    for lo in range(0, units, step):
        k = min(step, units - lo)
        for j in range(k):
            buffer[j] = block[:, lo + j].reshape(n, -1)
        out[lo:lo + k] = np.quantile(buffer[:k].reshape(k, -1), 1.0 - quantile, axis=1, overwrite_input=True)
    return out


def upsample(maps: np.ndarray, seg_shape: tuple[int, int], device: str = "cpu") -> torch.Tensor:
    """Bilinear upsampling (align_corners=False) of float maps (n, h, w) to (n, sh, sw), float32 on `device`."""
    import torch  # (torch: the window's process imports this module's NumPy parts, never torch)
    import torch.nn.functional as F

    # a fresh writable copy: maps may be a read-only view of a memmap, which torch does not take
    t = torch.from_numpy(np.array(maps, dtype=np.float32)).to(device)[:, None]
    return F.interpolate(t, size=tuple(int(s) for s in seg_shape), mode="bilinear", align_corners=False)[:, 0]


def bilinear(maps: np.ndarray, seg_shape: tuple[int, int]) -> np.ndarray:
    """`upsample` in NumPy, float32 (n, sh, sw): the same sampling (align_corners=False: source x = (i + 0.5) *
    in / out - 0.5, clamped at the edges) as two small weight matrices, for the window's views (its process has no
    torch). It agrees with torch's kernel to float32 rounding (a few ulps), so a mask from it differs from the one
    the dissection counted only at pixels within _ROUNDING_MARGIN of the threshold."""
    maps = np.asarray(maps, np.float32)
    rows = _bilinear_weights(maps.shape[-2], int(seg_shape[0]))
    cols = _bilinear_weights(maps.shape[-1], int(seg_shape[1]))
    return np.matmul(np.matmul(rows, maps), cols.T)


def _bilinear_weights(n_in: int, n_out: int) -> np.ndarray:
    """(n_out, n_in) float32: each output's two source samples and their weights along one axis."""
    source = np.maximum((np.arange(n_out) + 0.5) * (n_in / n_out) - 0.5, 0.0)
    low = np.minimum(np.floor(source).astype(np.int64), n_in - 1)
    high = np.minimum(low + 1, n_in - 1)
    frac = source - low
    weights = np.zeros((n_out, n_in), np.float64)
    np.add.at(weights, (np.arange(n_out), low), 1.0 - frac)
    np.add.at(weights, (np.arange(n_out), high), frac)
    return weights.astype(np.float32)


def float32_threshold(threshold: float) -> float:
    """The smallest float32 >= threshold: for float32 values a, `a >= threshold` iff `a >= float32_threshold`."""
    t = np.float32(threshold)
    if float(t) < threshold:
        t = np.nextafter(t, np.float32(np.inf))
    return float(t)


def unit_mask(act_map: np.ndarray, threshold: float, seg_shape: tuple[int, int]) -> np.ndarray:
    """One image's unit mask for display: bool (sh, sw). `act_map` is the unit's (h, w) activation map for that
    image (upsampled by `bilinear`: the views need no torch)."""
    return bilinear(np.asarray(act_map)[None], seg_shape)[0] >= np.float32(float32_threshold(threshold))


def unit_mask_regions(maps: np.ndarray, threshold: float, store: LabelStore, device: str) -> np.ndarray:
    """Pixels of each region of the dataset inside the unit's mask: int64 (store.n_regions,).

    `maps` holds the unit's activations (images, h, w) in the store's image order. The work is bounded by the
    smaller side of each image's mask: an image is counted whole when its maximum lies below T (no pixel inside) or
    its minimum reaches T (every pixel inside: for a dead ReLU unit, where T = 0, that is every image); otherwise it
    is upsampled and, chunk by chunk, the pixels inside or those outside are turned into regions, whichever are
    fewer.
    """
    n = len(maps)
    flat = np.ascontiguousarray(maps.reshape(n, -1))  # a unit of a block is strided: its reductions 5x slower
    peak, low = flat.max(axis=1).astype(np.float64), flat.min(axis=1).astype(np.float64)
    margin = _ROUNDING_MARGIN * (abs(threshold) + np.maximum(np.abs(peak), np.abs(low)))
    # bilinear weights are >= 0, so maps >= 0 stay >= 0 exactly: T = 0 needs no margin
    whole = (low >= threshold + margin) | ((threshold == 0.0) & (low >= 0.0))
    inside = np.zeros(store.n_regions, np.int64)
    region_counts = np.diff(store.image_regions)
    if whole.any():
        in_whole = np.repeat(whole, region_counts)
        inside[in_whole] = store.region_pixels[in_whole]
    candidates = np.flatnonzero(~whole & (peak >= threshold - margin))
    t32 = np.float32(float32_threshold(threshold))
    shapes = store.seg_shapes[candidates]
    for shape in np.unique(shapes, axis=0):
        images = candidates[(shapes == shape).all(axis=1)]
        size = int(shape[0]) * int(shape[1])
        for start in range(0, len(images), max(1, _CHUNK_BYTES // (4 * size))):
            chunk = images[start:start + max(1, _CHUNK_BYTES // (4 * size))]
            up = upsample(flat[chunk].reshape(len(chunk), *maps.shape[1:]), (int(shape[0]), int(shape[1])), device)
            hit = up.cpu().numpy() >= t32  # float32 against float32 (in NumPy: torch's comparison took 7x longer)
            _count_chunk(inside, store, chunk, region_counts[chunk], size, hit.reshape(-1))
    return inside


def _count_chunk(inside: np.ndarray, store: LabelStore, chunk: np.ndarray, counts: np.ndarray, size: int,
                 hit: np.ndarray) -> None:
    """Set the regions' pixels inside the mask for the images `chunk` (`counts`: their regions; `hit`: their pixels
    inside, flat), from the pixels inside or from those outside, whichever are fewer."""
    mostly_in = 2 * int(np.count_nonzero(hit)) > hit.size
    at = np.flatnonzero(~hit if mostly_in else hit)
    local_first = np.cumsum(counts) - counts  # the chunk's regions numbered from 0
    image, pixel = np.divmod(at, size)
    local = local_first[image] + store.pixel_region[store.offsets[chunk][image] + pixel]
    total = int(local_first[-1] + counts[-1])
    counted = np.bincount(local, minlength=total)
    regions = np.repeat(store.image_regions[chunk] - local_first, counts) + np.arange(total)
    inside[regions] = store.region_pixels[regions] - counted if mostly_in else counted
