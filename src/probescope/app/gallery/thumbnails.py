"""The gallery's pictures as Qt images, made in the I/O pool: thumbnails of the visible cells read or rendered
again (a streamed batch brings its own, `jobs.scoring.stream`), and the selected image at full size."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import numpy as np
from PySide6.QtGui import QImage

from probescope.jobs.protocol import Partial, TaskContext
from probescope.jobs.scoring.stream import fit_thumbnail
from probescope.widgets.images import to_qimage


def thumbnail_task(jobs: list[tuple[int, Callable[[], np.ndarray]]], ctx: TaskContext,
                   chunk: int = 6) -> Iterator[Partial]:
    """Decode or render the images of `jobs` [(image index, reader)] as thumbnails, a few at a time (I/O pool)."""
    out: dict[int, QImage] = {}
    for k, read in jobs:
        ctx.check()
        out[k] = to_qimage(fit_thumbnail(read()))
        if len(out) >= chunk:
            yield Partial(out)
            out = {}
    if out:
        yield Partial(out)


def image_task(read: Callable[[], np.ndarray], ctx: TaskContext) -> QImage:
    """One image at full size for the detail panel (I/O pool)."""
    return to_qimage(read())
