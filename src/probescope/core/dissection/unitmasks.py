"""Unit thresholds and binary unit masks at segmentation resolution.

Protocol (seed 002, made exact): `T_u` is numpy's linear-interpolation quantile `1 - q` of all of unit u's
activations (every image, every position, feature-map resolution), computed in float64. The mask is the activation
map upsampled with torch `interpolate(mode="bilinear", align_corners=False)` to the segmentation size, then
`M_u = A_u >= T_u`, exact comparison of the float32 upsampled values with the float64 threshold (done in float32
against the smallest float32 not below T_u, which is equivalent).

Speed: bilinear interpolation is a convex combination of source values, so an image whose maximum lies below T_u
cannot reach it after upsampling; only the other images are upsampled (a small margin covers float32 rounding).
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

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
    # a fresh writable copy: maps may be a read-only view of a memmap, which torch does not take
    t = torch.from_numpy(np.array(maps, dtype=np.float32)).to(device)[:, None]
    return F.interpolate(t, size=tuple(int(s) for s in seg_shape), mode="bilinear", align_corners=False)[:, 0]


def float32_threshold(threshold: float) -> float:
    """The smallest float32 >= threshold: for float32 values a, `a >= threshold` iff `a >= float32_threshold`."""
    t = np.float32(threshold)
    if float(t) < threshold:
        t = np.nextafter(t, np.float32(np.inf))
    return float(t)


def unit_mask(act_map: np.ndarray, threshold: float, seg_shape: tuple[int, int], device: str = "cpu") -> np.ndarray:
    """One image's unit mask: bool (sh, sw). `act_map` is the unit's (h, w) activation map for that image."""
    up = upsample(np.asarray(act_map)[None], seg_shape, device)[0]
    return (up >= float32_threshold(threshold)).cpu().numpy()


def unit_pixels(maps: np.ndarray, threshold: float, offsets: np.ndarray, seg_shapes: np.ndarray,
                device: str = "cpu") -> np.ndarray:
    """Sorted global pixel indices of the unit's mask over the dataset (int32 while the dataset has fewer than 2^31
    pixels, else int64).

    `maps` holds the unit's activations (images, h, w); `offsets` (images + 1) and `seg_shapes` (images, 2) number
    the pixels as the label store does.
    """
    n = len(maps)
    flat = maps.reshape(n, -1)
    peak = flat.max(axis=1).astype(np.float64)
    margin = _ROUNDING_MARGIN * (abs(threshold) + np.abs(flat).max(axis=1).astype(np.float64))
    candidates = np.flatnonzero(peak >= threshold - margin)
    if not len(candidates):
        return np.zeros(0, np.int32 if int(offsets[-1]) < 2**31 else np.int64)
    out = []
    dtype = np.int32 if int(offsets[-1]) < 2**31 else np.int64  # half the bytes below 2G pixels (ADE20K: 278M)
    t32 = float32_threshold(threshold)
    shapes = seg_shapes[candidates]
    groups = np.unique(shapes, axis=0)
    for shape in groups:
        images = candidates[(shapes == shape).all(axis=1)]
        per_chunk = max(1, _CHUNK_BYTES // (4 * int(shape[0]) * int(shape[1])))
        for start in range(0, len(images), per_chunk):
            chunk = images[start:start + per_chunk]
            size = int(shape[0]) * int(shape[1])
            up = upsample(maps[chunk], (int(shape[0]), int(shape[1])), device)
            hit = np.flatnonzero((up >= t32).cpu().numpy())
            out.append((offsets[chunk[hit // size]] + hit % size).astype(dtype, copy=False))
    pixels = np.concatenate(out)
    if len(groups) > 1:  # one size: chunks come in image order, already sorted
        pixels.sort()  # in place: a dead unit's mask (T = its constant value) is every pixel, 278M at ADE20K scale
    return pixels
