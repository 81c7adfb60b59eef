"""numpy image arrays to QImage: the one conversion every view needs.

A QImage made over a numpy buffer does not own it, so the result is always a copy; that makes it safe to build in a
worker thread and hand to the GUI thread (QPixmaps are made there, never in workers).
"""

from __future__ import annotations

import numpy as np
from PySide6.QtGui import QImage


def to_qimage(array: np.ndarray) -> QImage:
    """uint8 (H, W), (H, W, 3) or (H, W, 4) -> an owning QImage (Grayscale8, RGB888 or RGBA8888)."""
    array = np.ascontiguousarray(array)
    if array.dtype != np.uint8:
        raise ValueError(f"expected a uint8 image, got {array.dtype}")
    if array.ndim == 2:
        fmt, channels = QImage.Format.Format_Grayscale8, 1
    elif array.ndim == 3 and array.shape[2] in (3, 4):
        channels = array.shape[2]
        fmt = QImage.Format.Format_RGB888 if channels == 3 else QImage.Format.Format_RGBA8888
    else:
        raise ValueError(f"expected an image of shape (H, W), (H, W, 3) or (H, W, 4), got {array.shape}")
    h, w = array.shape[:2]
    return QImage(array.data, w, h, w * channels, fmt).copy()


def blend(image: np.ndarray, overlay_rgb: np.ndarray, mask: np.ndarray, alpha: float = 0.5) -> np.ndarray:
    """`image` with `overlay_rgb` mixed in at `alpha` where `mask` is true (all the same H, W); uint8 out."""
    out = image.astype(np.float32)
    m = mask.astype(bool)
    out[m] = (1 - alpha) * out[m] + alpha * overlay_rgb[m].astype(np.float32)
    return np.clip(out + 0.5, 0, 255).astype(np.uint8)


def boundaries(labels: np.ndarray) -> np.ndarray:
    """True where a pixel's label differs from its right or lower neighbour: outlines of labelled regions."""
    edge = np.zeros(labels.shape, dtype=bool)
    edge[:, :-1] |= labels[:, :-1] != labels[:, 1:]
    edge[:-1, :] |= labels[:-1, :] != labels[1:, :]
    return edge


def label_colors(labels: np.ndarray, seed: int = 7) -> np.ndarray:
    """A distinct, stable RGB colour per label number (0 stays black): uint8 (H, W, 3) for a label map."""
    top = int(labels.max(initial=0)) + 1
    palette = np.random.default_rng(seed).integers(40, 256, size=(top, 3), dtype=np.uint8)
    palette[0] = 0
    return palette[labels]
