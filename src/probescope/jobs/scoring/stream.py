"""The gallery's scoring as jobs: a sample set streamed through the classifier from a given image on (the same
`score_batches` as `probescope score`, in the window's small batches), the classifier loaded, the split protocol.

Every job takes plain, picklable values: the classifier as a `ClassifierChoice` (a spec, or the loaded model's
`ModelInfo`), the samples as a `DemoRun` (the demo sampler's knobs) or the spec of the opened samples, which the
job finds in its process's session (`samples_of`) as it finds the model (`model_of`). The window keeps only what
a job returns about them (`ClassifierInfo`) and the scores.

Each streamed batch brings its thumbnails along (uint8 arrays, made where the images were read). Sources with
random access (the demo sampler, arrays, folders) can be read again for an evicted thumbnail; a TorchScript
generator cannot, so its (smaller) thumbnails are kept for good.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace

import numpy as np

from probescope.core.data.images import read_rgb
from probescope.core.demo.sampler import DemoSampler
from probescope.core.scoring.feature_spec import CLASSIFIER
from probescope.core.scoring.settings import WINDOW, ScoreSettings
from probescope.core.scoring.sources import ArraySource, BatchTask, ImageFolderSource, SampleSource
from probescope.jobs.inputs import ModelInfo, model_of
from probescope.jobs.protocol import Job, Partial, Progress, TaskContext
from probescope.jobs.scoring.held import HeldGenerator, samples_of
from probescope.jobs.scoring.workflow import score_batches

THUMB = 96  # thumbnail size in pixels (the longer side)
KEPT_THUMB = 48  # thumbnails kept in memory for sources without random access
MODEL = "model"  # the classifier choice of the loaded model

ImageReader = Callable[[int], np.ndarray]


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


def random_access(source: SampleSource) -> ImageReader | None:
    """Image k of an array or folder source on demand, or None when it can only be read in order (generators).
    (Demo streams re-render image k from the sampler that drew it.)"""
    if isinstance(source, ArraySource):
        return lambda k: np.asarray(source.images[k])
    if isinstance(source, ImageFolderSource):
        return lambda k: read_rgb(source.files[k])
    return None


class StreamSource(SampleSource):
    """A source read as a stream from image `start` on; each batch also leaves thumbnails of its images behind
    (made in the thread that reads the batch), so the gallery need not read the images a second time."""

    def __init__(self, start: int, thumb_size: int):
        self.start, self.thumb_size = start, thumb_size
        self._thumbs: dict[int, tuple[np.ndarray, ...]] = {}
        self._lock = threading.Lock()

    def _with_thumbnails(self, start: int, task: BatchTask) -> BatchTask:
        def run() -> list[np.ndarray]:
            images = task()
            thumbs = tuple(fit_thumbnail(im, self.thumb_size) for im in images)
            with self._lock:
                self._thumbs[start] = thumbs
            return images

        return run

    def thumbnails_of(self, start: int) -> tuple[np.ndarray, ...]:
        """The thumbnails of the batch beginning at `start` (asked once per batch)."""
        with self._lock:
            return self._thumbs.pop(start, ())


@dataclass(frozen=True)
class DemoRun:
    """A run of the demo sampler: N images drawn with one (diversity, fidelity) and noise seed, so image k can be
    rendered again for its thumbnail (`DemoSampler(...).sample(k)`)."""

    n: int
    diversity: int
    fidelity: float
    seed: int = 0

    @property
    def sampler(self) -> DemoSampler:
        return DemoSampler(self.n, self.diversity, self.fidelity, self.seed)


class DemoStream(StreamSource):
    """`run`'s images from `start` on."""

    def __init__(self, run: DemoRun, start: int = 0):
        super().__init__(start, THUMB)
        self.run, self.length = run, run.n
        self.name = f"demo sampler stream (seed {run.seed})"

    def batch_tasks(self, batch_size: int) -> Iterator[BatchTask]:
        sampler = self.run.sampler
        for a in range(self.start, self.length, batch_size):
            b = min(a + batch_size, self.length)
            yield self._with_thumbnails(a, lambda a=a, b=b: [sampler.sample(k)[0] for k in range(a, b)])

    def sampler_of(self, start: int) -> DemoSampler:
        """The sampler that drew the batch beginning at `start`."""
        return self.run.sampler


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


@dataclass(frozen=True)
class ClassifierChoice:
    """Which classifier scores: `spec` MODEL (the loaded `model`) or a classifier spec ('demo',
    'inception-tf:<file>', ...), loaded on the device of the loaded model (where the window computes); `features`
    the network whose features the distances use (core.scoring.features: 'classifier', its own)."""

    spec: str
    model: ModelInfo
    features: str = CLASSIFIER

    @property
    def device(self) -> str:
        return self.model.device


@dataclass(frozen=True)
class ClassifierInfo:
    """A loaded classifier as the window knows it; jobs find the classifier itself with `classifier_of`."""

    choice: ClassifierChoice
    name: str
    note: str
    comparable: bool
    class_names: tuple[str, ...] | None
    has_features: bool
    key: str
    feature_label: str = "FID"  # the Fréchet distance's name on these features
    feature_note: str = ""  # which features the distances use, and how the images were prepared for them
    clip: bool = False  # unit-length CLIP embeddings: CMMD can be read

    @property
    def identity(self) -> object:
        """What the classifier's features depend on (its cache key), or the choice when it has none."""
        return self.key or self.choice


def classifier_of(ctx: TaskContext, choice: ClassifierChoice):
    """The core.scoring Classifier `choice` names, made once per process session (for the loaded model: once per
    model object, which a reopened model replaces)."""
    from probescope.core.scoring.classifiers import classifier_of_model, load_classifier
    from probescope.core.scoring.features import attach_features

    settings = replace(WINDOW, features=choice.features)
    if choice.spec == MODEL:
        model = model_of(ctx, choice.model)
        return ctx.session.get("classifier", (choice, id(model)),
                               lambda: attach_features(classifier_of_model(model), settings, ctx.trust))

    def make():
        classifier = load_classifier(choice.spec, choice.device, ctx.trust)
        classifier.module.eval()
        return attach_features(classifier, settings, ctx.trust)

    return ctx.session.get("classifier", choice, make)


def load_classifier(ctx: TaskContext, choice: ClassifierChoice) -> Iterator[Progress]:
    """Load the classifier `choice` names (compute: it owns torch and the device); returns its ClassifierInfo."""
    yield Progress(None, f"loading classifier {choice.spec}")
    classifier = classifier_of(ctx, choice)
    network = classifier.network
    return ClassifierInfo(choice, classifier.name, classifier.note, classifier.comparable,
                          None if classifier.class_names is None else tuple(classifier.class_names),
                          classifier.gives_features, classifier.key,
                          feature_label=network.label if network is not None else "FID",
                          feature_note=classifier.feature_note, clip=network is not None and network.unit_norm)


def stream_samples(ctx: TaskContext, samples: DemoRun | str, classifier: ClassifierChoice, start: int,
                   keep_thumbnails: bool = False, settings: ScoreSettings = WINDOW) -> Iterator[Partial | Progress]:
    """Score `samples` (a demo run, or the spec of the opened samples) from image `start` on: each batch a
    `Partial(ScoredBatch)` with its thumbnails. Returns the number of images scored in all.

    On the CPU batches are read inline (see `score_batches`); on a GPU the next batch is read while the network
    runs."""
    model = classifier_of(ctx, classifier)
    if isinstance(samples, DemoRun):
        source: StreamSource = DemoStream(samples, start)
    else:
        source = ResumedSource(samples_of(ctx, samples), start, keep_thumbnails)
    prefetch = not str(model.device).startswith("cpu")
    return (yield from score_batches(ctx, source, model, settings, start=start, prefetch=prefetch))


def stream_job(samples: DemoRun | str | HeldGenerator, classifier: ClassifierChoice, start: int,
               keep_thumbnails: bool) -> Job:
    return Job(stream_samples, dict(samples=samples, classifier=classifier, start=start,
                                    keep_thumbnails=keep_thumbnails))


def split_score(ctx: TaskContext, rows: np.ndarray, settings: ScoreSettings):
    """The split protocol (`settings`' splits and seed, shuffled) of probability rows kept so far."""
    from probescope.core.scoring.distributions import ClassScores
    from probescope.core.scoring.splits import split_inception_score

    ctx.check()
    return split_inception_score(ClassScores(rows, "probs"), settings.splits, settings.shuffle, settings.seed)
