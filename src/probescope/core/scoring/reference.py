"""Reference sets: the real images FID, KID, precision/recall and coverage compare generated samples against.

A reference comes from a folder of images, a uint8 .npy/.npz array, a Broden dataset's images ('demo': the demo
world's, so the gallery has one offline), or a pytorch-fid statistics file (mu/sigma: FID only). Images go through
the classifier once; what the scores need (features, their mean and covariance, top-prediction counts) is cached
in the user cache folder under the classifier's identity and a hash of the images' content in order (KID's subsets
are drawn by index, so the order counts), and found again whatever the folder is called.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

import numpy as np

from probescope.core.atomic import atomic_open, save_npy
from probescope.core.cache import cache_dir
from probescope.core.data.broden import BrodenDataset
from probescope.core.demo.dataset import ensure_demo_dataset
from probescope.core.errors import InputError
from probescope.core.files import NUMPY_FILE_ERRORS
from probescope.core.scoring.frechet import FrechetReference, GaussianStats, RunningGaussian, read_npz
from probescope.core.scoring.growing import GrowingRows
from probescope.core.scoring.precision_recall import knn_radii_of
from probescope.core.scoring.settings import DEFAULT_BATCH_SIZE, DEFAULT_WORKERS
from probescope.core.scoring.sources import (
    DEFAULT_EXTENSIONS,
    ArraySource,
    BatchTask,
    ImageFolderSource,
    SampleSource,
    open_source,
)
from probescope.core.tasks import CancelCheck, ProgressCallback

if TYPE_CHECKING:
    from probescope.core.scoring.classifiers import Classifier

CACHE_VERSION = 1
DEMO = "demo"
T = TypeVar("T")


class BrodenImageSource(SampleSource):
    """The images of a Broden-format dataset, in index order (the probing dataset as real data)."""

    def __init__(self, root: str | Path | BrodenDataset, index: str = "index.csv"):
        self.dataset = root if isinstance(root, BrodenDataset) else BrodenDataset.open(root, index)
        self.length = self.dataset.n_images
        self.name = f"{self.dataset.root} (Broden dataset images)"

    def batch_tasks(self, batch_size: int) -> Iterator[BatchTask]:
        if batch_size < 1:
            raise InputError(f"batch size must be at least 1, got {batch_size}")
        for start in range(0, self.length, batch_size):
            stop = min(start + batch_size, self.length)
            yield lambda a=start, b=stop: [self.dataset.load_image(i) for i in range(a, b)]

    @property
    def files(self) -> list[Path]:
        return [self.dataset.image_path(i) for i in range(self.length)]


def reference_source(
    spec: str | Path,
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS,
    progress: ProgressCallback | None = None,
    cancel: CancelCheck | None = None,
) -> SampleSource | Path:
    """The images behind a reference spec, or the path of a mu/sigma statistics file.

    'demo' is the demo world's Broden dataset (written to the cache folder first if missing); a folder holding
    index.csv is read as a Broden dataset; any other folder by `extensions`; a .npz with arrays 'mu' and 'sigma'
    is a statistics file; other .npy/.npz files are uint8 image arrays.
    """
    if str(spec) == DEMO:
        return BrodenImageSource(ensure_demo_dataset(progress=progress, cancel=cancel))
    path = Path(spec)
    if path.is_dir() and os.path.lexists(path / "index.csv"):  # a broken index.csv is named by the dataset reader
        return BrodenImageSource(path)
    if path.is_file() and path.suffix.lower() == ".npz" and _is_statistics_file(path):
        return path
    return open_source(path, extensions)


def _is_statistics_file(path: Path) -> bool:
    return {"mu", "sigma"} <= set(read_npz(path, ("mu", "sigma")))


def content_hash(source: SampleSource) -> str:
    """SHA-256 of the images' bytes in order: file contents for folders and Broden datasets, the array itself."""
    digest = hashlib.sha256()
    if isinstance(source, ArraySource):
        digest.update(repr(source.images.shape).encode())
        for start in range(0, source.length, 1024):
            digest.update(np.ascontiguousarray(source.images[start : start + 1024]).tobytes())
    elif isinstance(source, (ImageFolderSource, BrodenImageSource)):
        for path in source.files:
            try:
                digest.update(hashlib.sha256(path.read_bytes()).digest())
            except OSError as exc:
                raise InputError(f"cannot read ({exc.strerror or exc})", path) from None
    else:
        raise InputError(f"{source.name}: a reference set must be a folder, an image array or a Broden dataset")
    return digest.hexdigest()


@dataclass
class ReferenceSet:
    """What the scores need from the real images; `features` and `class_counts` are None for a mu/sigma file."""

    name: str
    stats: GaussianStats
    features: np.ndarray | None = None  # (n, d) float32
    class_counts: np.ndarray | None = None  # (n_classes,) top predictions
    feature_note: str = ""
    cache_path: Path | None = None  # where the cached arrays live (radii are cached beside them)
    source: Path | None = None  # the statistics file, image folder or array file it was made from (named in errors)
    _frechet: FrechetReference | None = field(default=None, repr=False)
    _radii: dict[int, np.ndarray] = field(default_factory=dict, repr=False)
    _derived: dict[tuple, object] = field(default_factory=dict, repr=False)

    @property
    def n(self) -> int | None:
        return self.stats.n

    @property
    def frechet(self) -> FrechetReference:
        """The reference fit with its covariance factored (computed once)."""
        if self._frechet is None:
            self._frechet = FrechetReference(self.stats, self.source)
        return self._frechet

    def require_features(self, what: str) -> np.ndarray:
        if self.features is None:
            raise InputError(f"{what} needs the reference images' features; {self.name} holds only mu and sigma")
        return self.features

    def derived(self, key: tuple, compute: Callable[[], T]) -> T:
        """A value computed from these features once per `key` and kept in memory with them (the copy test's
        calibration, asked for again at every block of samples the window streams)."""
        if key not in self._derived:
            self._derived[key] = compute()
        return self._derived[key]  # type: ignore[return-value]

    def radii(self, k: int) -> np.ndarray:
        """Each reference sample's k-NN radius (precision), cached in memory and beside the cached arrays."""
        return self.radii_of((k,))[k]

    def radii_of(self, ks: tuple[int, ...], *, progress: ProgressCallback | None = None,
                 cancel: CancelCheck | None = None) -> dict[int, np.ndarray]:
        """`radii` for several k, those not cached yet from one pass over the reference's distances."""
        paths = {k: None if self.cache_path is None else self.cache_path.with_name(f"{self.cache_path.stem}-k{k}.npy")
                 for k in ks}
        n = len(self.require_features("precision"))
        for k in ks:
            if k not in self._radii:
                radii = _read_cached(paths[k], lambda p: np.load(p, allow_pickle=False))
                if radii is not None and radii.shape == (n,):
                    self._radii[k] = radii
        missing = tuple(k for k in ks if k not in self._radii)
        if missing:
            found = knn_radii_of(self.require_features("precision"), missing, progress=progress, cancel=cancel)
            for k, radii in found.items():
                self._radii[k] = radii
                if paths[k] is not None:
                    save_npy(paths[k], radii)
        return {k: self._radii[k] for k in ks}

    def describe(self) -> str:
        size = f"{self.n} images" if self.n is not None else "statistics only"
        return f"{self.name} ({size})"


def _read_cached(path: Path | None, read: Callable[[Path], T]) -> T | None:
    """A cache entry, or None when there is none or it cannot be read (it is then rebuilt)."""
    if path is None or not path.is_file():
        return None
    try:
        return read(path)
    except NUMPY_FILE_ERRORS:  # (a damaged entry: rebuilt)
        return None


def reference_cache_path(classifier: Classifier, source: SampleSource) -> Path | None:
    """The cache file of this classifier's view of these images (None for classifiers without an identity)."""
    if not classifier.key:
        return None

    key = f"v{CACHE_VERSION}|{classifier.key}|{classifier.feature_note}|{content_hash(source)}"
    return cache_dir() / "references" / f"{hashlib.sha256(key.encode()).hexdigest()[:32]}.npz"


def embed_reference(
    source: SampleSource,
    classifier: Classifier,
    batch_size: int = 64,
    *,
    workers: int = 2,
    progress: ProgressCallback | None = None,
    cancel: CancelCheck | None = None,
) -> ReferenceSet:
    """Run the images through the classifier: features, their fit and the top-prediction counts (not cached)."""
    # (torch: the window's process imports this module, never torch)
    from probescope.core.scoring.pipeline import embed_batches

    running = RunningGaussian()
    features, counts = GrowingRows(source.length), None  # the features once in memory, not batches and a copy
    for batch_features, logits in embed_batches(source, classifier, batch_size, workers=workers, progress=progress,
                                                cancel=cancel):
        running.add(batch_features)
        features.append(batch_features)
        top = np.bincount(logits.argmax(axis=1), minlength=logits.shape[1])
        counts = top if counts is None else counts + top
    if running.n < 2:
        raise InputError(f"{source.name}: a reference set needs at least 2 images, got {running.n}")
    return ReferenceSet(source.name, running.stats(), features.values, counts, classifier.feature_note)


def load_reference(
    spec: str | Path | SampleSource,
    classifier: Classifier | None,
    *,
    extensions: tuple[str, ...] = DEFAULT_EXTENSIONS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    workers: int = DEFAULT_WORKERS,
    progress: ProgressCallback | None = None,
    cancel: CancelCheck | None = None,
) -> ReferenceSet:
    """The reference set of a spec (see reference_source) or of a source's images as `classifier` sees it, from
    the cache when there."""
    found = spec if isinstance(spec, SampleSource) else reference_source(spec, extensions, progress, cancel)
    if isinstance(found, Path):
        return ReferenceSet(f"{found} (mu/sigma statistics)", GaussianStats.load(found),
                            feature_note="unknown: statistics file (its features must be the classifier's)",
                            source=found)
    if classifier is None:
        raise InputError(f"{found.name}: a classifier is needed to turn reference images into features")
    origin = _origin(found)
    path = reference_cache_path(classifier, found)
    cached = _read_cached(path, _read_reference)
    if cached is not None:
        return ReferenceSet(found.name, *cached, feature_note=classifier.feature_note, cache_path=path,
                            source=origin)
    built = embed_reference(found, classifier, batch_size, workers=workers, progress=progress, cancel=cancel)
    built.source = origin
    if path is not None:
        _write_reference(path, built)
        built.cache_path = path
    return built


def _origin(source: SampleSource) -> Path | None:
    """The folder or file a reference's images come from."""
    if isinstance(source, BrodenImageSource):
        return source.dataset.root
    if isinstance(source, ImageFolderSource):
        return source.root
    return Path(source.name) if isinstance(source, ArraySource) and source.name != "array" else None


def _write_reference(path: Path, ref: ReferenceSet) -> None:
    with atomic_open(path, "wb") as fh:
        np.savez(fh, features=ref.features, mu=ref.stats.mu, sigma=ref.stats.sigma, class_counts=ref.class_counts)


def _read_reference(path: Path) -> tuple[GaussianStats, np.ndarray, np.ndarray]:
    with np.load(path, allow_pickle=False) as archive:
        features = archive["features"]
        stats = GaussianStats(archive["mu"], archive["sigma"], len(features))
        return stats, features, archive["class_counts"]
