"""The gallery's pictures: thumbnails of the visible cells and the selected image's large view, read or rendered again
in the I/O pool on demand (only the visible rows), so 50,000 samples never sit in memory as images.

Images come back from where they were drawn: the demo sampler with the knobs that drew each run of images, a
random-access source (a .npz, a folder) by index; a stream that can be read only once keeps its thumbnails.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QObject
from PySide6.QtGui import QImage

from probescope.app.compute.workers import WorkerPool
from probescope.app.gallery.thumbnails import image_task, thumbnail_task
from probescope.core.demo.sampler import DemoSampler
from probescope.jobs.protocol import IO
from probescope.jobs.scoring.stream import random_access


class SampleImages(QObject):
    """Where image k of the scored samples can be read again, and the tasks that read them.

    The tasks share the key group `group`: `forget()` drops every pending read with the scores they belonged to."""

    def __init__(self, pool: WorkerPool, group: str, parent: QObject | None = None):
        super().__init__(parent)
        self.pool, self.group = pool, group
        self.keep_thumbnails = False  # a one-pass stream: thumbnails are kept as they arrive
        self.segments: list[tuple[int, DemoSampler]] = []  # demo: which sampler drew images from each start on
        self._reader: Callable[[int], np.ndarray] | None = None

    def forget(self) -> None:
        """The scores were reset: no image belongs to them any more."""
        self.segments = []
        self.pool.cancel_group(self.group)

    def use(self, source) -> None:
        """Read images of `source` from now on."""
        self._reader = random_access(source)
        self.keep_thumbnails = not isinstance(source, DemoSampler) and self._reader is None

    def drawn(self, start: int, sampler: DemoSampler) -> None:
        """The demo sampler `sampler` drew the images from `start` on."""
        self.segments.append((start, sampler))

    def reader(self, k: int) -> Callable[[], np.ndarray] | None:
        """A zero-argument reader of image k, or None when it cannot be read again."""
        if self.segments:
            starts = [s for s, _ in self.segments]
            sampler = self.segments[bisect.bisect_right(starts, k) - 1][1]
            return lambda: sampler.sample(k)[0]
        if self._reader is not None:
            reader = self._reader
            return lambda: reader(k)
        return None

    def load_thumbnails(self, wanted: list[int], show: Callable[[dict[int, QImage]], None]) -> None:
        """Thumbnails of the images `wanted`, delivered to `show` as they are decoded."""
        jobs = [(k, read) for k in dict.fromkeys(wanted) if (read := self.reader(k)) is not None]
        if jobs and not self.pool.is_shut_down:  # (a timer may fire while the window closes)
            self.pool.submit(lambda ctx: thumbnail_task(jobs, ctx), name="thumbnails", key=f"{self.group}:thumbs",
                             executor=IO, on_partial=show)

    def load_image(self, k: int, show: Callable[[QImage], None], view: str = "detail") -> bool:
        """Image k at full size for `view` (the detail panel, the large view), delivered to `show`; False when it
        cannot be read again."""
        read = self.reader(k)
        if read is None:
            return False
        if not self.pool.is_shut_down:
            self.pool.submit(lambda ctx: image_task(read, ctx), name="detail image", key=f"{self.group}:{view}",
                             executor=IO, on_result=show)
        return True
