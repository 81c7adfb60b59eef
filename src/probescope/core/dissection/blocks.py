"""A layer's activations read unit block by unit block without swelling the process.

A memory-mapped .npy (images, units, h, w) keeps each image's units together, so a block of units is a strided read:
through the mapping, the kernel maps whole pages (whole large folios on recent kernels) around every image's few
bytes, and the process's resident memory grows by most of the file (2 GB for a ResNet-18 layer on ADE20K) although
it only reads a sliver. `read_units` reads the block with file reads instead; `release_pages` hands back what a pass
through the mapping mapped (the kernel keeps the pages in its page cache, outside the process).
"""

from __future__ import annotations

import mmap
from collections.abc import Sequence

import numpy as np


def read_units(activations: np.ndarray, units: Sequence[int]) -> np.ndarray:
    """float32 (images, len(units), h, w): the units' activations, by file reads from a read-only memmap of a file
    (not a view of one) when the units are consecutive, else by indexing."""
    units = list(units)
    source = activations if isinstance(activations, np.memmap) and isinstance(activations.base, mmap.mmap) else None
    consecutive = bool(units) and units == list(range(units[0], units[0] + len(units)))
    if source is None or source.mode != "r" or not source.flags.c_contiguous or not consecutive \
            or not source.filename:
        return np.asarray(activations[:, units], dtype=np.float32)
    n = source.shape[0]
    unit_bytes = int(np.prod(source.shape[2:], dtype=np.int64)) * source.itemsize
    row_bytes = source.shape[1] * unit_bytes
    out = np.empty((n, len(units)) + source.shape[2:], source.dtype)
    with open(source.filename, "rb") as fh:
        for i in range(n):
            fh.seek(source.offset + i * row_bytes + units[0] * unit_bytes)
            fh.readinto(memoryview(out[i]).cast("B"))
    return out.astype(np.float32, copy=False)


def release_pages(activations: np.ndarray) -> None:
    """Hand back the pages a pass through a read-only memory-mapped array has mapped into the process."""
    base = activations
    while isinstance(base, np.ndarray) and not (isinstance(base, np.memmap) and base.mode == "r"):
        base = base.base
    mapping = base.base if isinstance(base, np.memmap) else None
    if isinstance(mapping, mmap.mmap) and hasattr(mmap, "MADV_DONTNEED"):
        mapping.madvise(mmap.MADV_DONTNEED)
