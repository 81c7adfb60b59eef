"""Stimulus pictures for the Similarity workspace's views, decoded and shrunk in the I/O pool (core reads the
catalog's images); stimuli without a catalog are grey tiles with their id."""

from __future__ import annotations

import numpy as np
from PySide6.QtGui import QImage

from probescope.core.similarity.sources import CatalogImages
from probescope.jobs.protocol import TaskContext
from probescope.jobs.similarity.trials import stimulus_name
from probescope.widgets.images import to_qimage


def stimulus_images(judgments, stimuli: list[int], size: int, ctx: TaskContext) -> list[tuple[QImage, str]]:
    """(QImage, caption) of each stimulus, at most `size` pixels wide and high."""
    images = None if judgments.catalog is None else CatalogImages(judgments.catalog)
    out = []
    for stimulus in stimuli:
        ctx.check()
        name = stimulus_name(judgments, stimulus)
        rgb = np.full((size, size, 3), 128, np.uint8) if images is None else images.thumbnail(stimulus, size)
        out.append((to_qimage(rgb), name))
    return out
