"""Worker side of the gallery: stream images through the classifier, make thumbnails, load classifiers.

The GUI thread owns the scores (`GalleryScores`); the compute thread only turns images into logits and hands each
batch over as a `StreamBatch`. A paused or superseded stream simply stops delivering: the scores never hold a batch
the gallery did not receive, and resuming starts a new stream at the next unscored image.

Each streamed batch brings its thumbnails along (made where the images were read). They go into a bounded pixmap
cache: for 50,000 images not all of them stay, and sources with random access (the demo sampler, arrays, folders)
re-read evicted visible images in the I/O pool; a TorchScript generator cannot, so the gallery keeps its (smaller)
thumbnails for good.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
from PySide6.QtGui import QImage

from probescope.core.data.images import read_rgb
from probescope.core.demo.sampler import DemoSampler
from probescope.core.demo.world import SCENES
from probescope.core.scoring.sources import ArraySource, BatchTask, ImageFolderSource, SampleSource
from probescope.jobs.protocol import Partial, Progress, TaskContext
from probescope.widgets.images import to_qimage

STREAM_BATCH = 4  # small batches: the live numbers move at least 10 times a second with the demo classifier
THUMB = 96  # thumbnail size in pixels (the longer side)
KEPT_THUMB = 48  # thumbnails kept in memory for sources without random access

ImageReader = Callable[[int], np.ndarray]


@dataclass(frozen=True)
class StreamBatch:
    """Images start.. start+len(logits) of the stream: their logits, their features from the same forward pass
    (None for classifiers that give none), the demo settings that drew them (demo streams) and their thumbnails."""

    start: int
    logits: np.ndarray
    features: np.ndarray | None = None
    sampler: DemoSampler | None = None
    thumbnails: tuple[QImage, ...] = ()


def fit_thumbnail(image: np.ndarray, size: int = THUMB) -> np.ndarray:
    """`image` scaled so its longer side is `size` (bilinear, or box when shrinking a lot)."""
    from PIL import Image

    h, w = image.shape[:2]
    scale = size / max(h, w)
    if abs(scale - 1.0) < 1e-9:
        return image
    new = (max(1, round(w * scale)), max(1, round(h * scale)))
    resample = Image.Resampling.BOX if scale < 0.5 else Image.Resampling.BILINEAR
    return np.asarray(Image.fromarray(np.ascontiguousarray(image)).resize(new, resample))


class StreamSource(SampleSource):
    """A source read as a stream from image `start` on; each batch also leaves thumbnails of its images behind
    (made in the thread that reads the batch), so the gallery need not read the images a second time."""

    def __init__(self, start: int, thumb_size: int):
        self.start, self.thumb_size = start, thumb_size
        self._thumbs: dict[int, tuple[QImage, ...]] = {}
        self._lock = threading.Lock()

    def _with_thumbnails(self, start: int, task: BatchTask) -> BatchTask:
        def run() -> list[np.ndarray]:
            images = task()
            thumbs = tuple(to_qimage(fit_thumbnail(im, self.thumb_size)) for im in images)
            with self._lock:
                self._thumbs[start] = thumbs
            return images

        return run

    def thumbnails_of(self, start: int) -> tuple[QImage, ...]:
        """The thumbnails of the batch beginning at `start` (asked once per batch)."""
        with self._lock:
            return self._thumbs.pop(start, ())


class DemoStream(StreamSource):
    """The demo sampler as a stream from image `start` on, whose knobs may change between batches.

    `knobs` (diversity, fidelity) is set from the GUI thread and read when the next batch is drawn, so a change
    applies to what is drawn next. Image k is always `DemoSampler(..., knobs at the time, seed).sample(k)`, so
    it can be rendered again for its thumbnail when the cached one is gone.
    """

    def __init__(self, n: int, diversity: int = len(SCENES), fidelity: float = 1.0, seed: int = 0, start: int = 0):
        super().__init__(start, THUMB)
        self.length, self.seed = n, seed
        self.knobs = (diversity, fidelity)
        self.name = f"demo sampler stream (seed {seed})"
        self._drawn: dict[int, DemoSampler] = {}

    def batch_tasks(self, batch_size: int) -> Iterator[BatchTask]:
        for a in range(self.start, self.length, batch_size):
            b = min(a + batch_size, self.length)
            diversity, fidelity = self.knobs
            sampler = DemoSampler(self.length, diversity, fidelity, self.seed)
            with self._lock:
                self._drawn[a] = sampler
            yield self._with_thumbnails(a, lambda a=a, b=b, s=sampler: [s.sample(k)[0] for k in range(a, b)])

    def sampler_of(self, start: int) -> DemoSampler:
        """The sampler that drew the batch beginning at `start` (asked once per batch, in order)."""
        with self._lock:
            return self._drawn.pop(start)


class ResumedSource(StreamSource):
    """`inner` from image `start` on (a multiple of the batch size). Sources without random access (generators)
    get small thumbnails, as the gallery keeps those for good."""

    def __init__(self, inner: SampleSource, start: int, keep_thumbnails: bool):
        super().__init__(start, KEPT_THUMB if keep_thumbnails else THUMB)
        self.inner = inner
        self.length, self.name, self.lossy = inner.length, inner.name, inner.lossy

    def batch_tasks(self, batch_size: int) -> Iterator[BatchTask]:
        tasks = itertools.islice(self.inner.batch_tasks(batch_size), self.start // batch_size, None)
        for i, task in enumerate(tasks):
            yield self._with_thumbnails(self.start + i * batch_size, task)


def random_access(source: SampleSource) -> ImageReader | None:
    """Image k of an array or folder source on demand, or None when it can only be read in order (generators).
    (Demo streams re-render image k from the settings that drew it.)"""
    if isinstance(source, ArraySource):
        return lambda k: np.asarray(source.images[k])
    if isinstance(source, ImageFolderSource):
        return lambda k: read_rgb(source.files[k])
    return None


Outputs = tuple[np.ndarray | None, np.ndarray]  # (features or None, logits) of one batch


def _outputs_inline(source: SampleSource, classifier, batch_size: int, ctx: TaskContext) -> Iterator[Outputs]:
    """Read and classify one batch after the other in the calling thread.

    On the CPU this beats prefetching: a prefetch thread that renders or decodes in Python competes with the
    compute thread and the GUI thread for the GIL (measured on 2 busy cores: 95 ms GUI stalls with a prefetch
    thread, 3 ms without, and higher throughput as well).
    """
    for task in source.batch_tasks(batch_size):
        ctx.check()
        prepared = classifier.prepare(task())
        yield classifier.embed(prepared) if classifier.embedder is not None else (None, classifier.logits(prepared))


def _without_features(batches: Iterator[np.ndarray]) -> Iterator[Outputs]:
    with contextlib.closing(batches):  # closing this closes the pipeline (and its prefetch thread) too
        for logits in batches:
            yield None, logits


def stream_task(source: SampleSource, classifier, start: int, ctx: TaskContext,
                batch_size: int = STREAM_BATCH) -> Iterator[Partial | Progress]:
    """Classify `source` (a DemoStream or ResumedSource beginning at `start`) batch by batch, in the compute
    thread; each batch goes to the GUI as a `StreamBatch`, with the features beside the logits when the classifier
    gives them (one forward pass). Returns the number of images scored in total.

    On a GPU, reading the next batch overlaps the network (the engine's batch pipeline with a prefetch thread);
    on the CPU batches are read inline (see `_outputs_inline`).
    """
    from probescope.core.scoring.pipeline import classify_batches, embed_batches

    total = source.length
    if str(classifier.device).startswith("cpu"):
        batches = _outputs_inline(source, classifier, batch_size, ctx)
    elif classifier.embedder is not None:
        batches = embed_batches(source, classifier, batch_size, workers=1, cancel=ctx.cancelled)
    else:
        batches = _without_features(classify_batches(source, classifier, batch_size, workers=1, cancel=ctx.cancelled))
    with contextlib.closing(batches):  # a cancelled stream shuts a prefetch thread down at once
        for features, logits in batches:
            sampler = source.sampler_of(start) if isinstance(source, DemoStream) else None
            thumbs = source.thumbnails_of(start) if isinstance(source, StreamSource) else ()
            yield Partial(StreamBatch(start, logits, features, sampler, thumbs))
            start += len(logits)
            yield Progress(start / total if total else None, f"scored {start}{f' of {total}' if total else ''} "
                           "images")
    return start


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


def load_classifier_task(spec: str, device: str, ctx: TaskContext) -> Iterator[Progress]:
    """Load a classifier spec (compute thread: it owns torch and the device)."""
    from probescope.core.scoring.classifiers import load_classifier

    yield Progress(None, f"loading classifier {spec}")
    classifier = load_classifier(spec, device)
    classifier.module.eval()
    return classifier
