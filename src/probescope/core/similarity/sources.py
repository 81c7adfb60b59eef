"""Where the commands and the GUI get judgments and features from: a file path or `demo`, a .npy or a model layer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
from PIL import Image

from probescope.core.data.images import read_rgb
from probescope.core.demo.judgments import ensure_demo_judgments
from probescope.core.errors import InputError
from probescope.core.files import NUMPY_FILE_ERRORS
from probescope.core.similarity.catalog import Catalog
from probescope.core.similarity.readers import Judgments, load_judgments, read_psiz_hdf5
from probescope.core.similarity.settings import POOLS
from probescope.core.similarity.trials import Trials
from probescope.core.tasks import CancelCheck, ProgressCallback
from probescope.core.trust import NO_TRUST, Trust

if TYPE_CHECKING:
    from probescope.core.data.preprocess import Preprocess
    from probescope.core.models.layout import Layout
    from probescope.core.models.loading import LoadedModel

DEMO = "demo"
FINITE_CHECK_ROWS = 4096  # rows checked at a time (a memmap is never read whole at once)


@dataclass(frozen=True)
class JudgmentSource:
    """Judgments plus what comes with some sources: a coarse-grained trial set and (simulations only) the truth."""

    judgments: Judgments
    coarse: Trials | None = None
    coarse_name: str = ""  # what the coarse set is, for reports
    truth: np.ndarray | None = None  # true positions of simulated stimuli


def open_judgments(
    spec: str | Path, catalog: str | Path | None = None, image_root: str | Path | None = None,
    cache_dir: str | Path | None = None, index_base: int | None = None,
) -> JudgmentSource:
    """`demo` (the demo world's SIMULATED judgments, generated on first use) or a judgments file/folder."""
    if str(spec) != DEMO:
        j = load_judgments(spec, catalog, image_root, index_base)
        return JudgmentSource(j, j.test, "the release's test_seqs trials")

    paths = ensure_demo_judgments(cache_dir)
    j = load_judgments(paths.observations, paths.catalog, image_root)
    coarse = read_psiz_hdf5(paths.coarse, j.catalog).trials
    return JudgmentSource(j, coarse, "randomly assembled trials", np.load(paths.truth))


def load_features(path: str | Path, judgments: Judgments) -> np.ndarray:
    """F.npy with row i = stimulus i (2-D; higher-rank arrays are flattened per row), read as a memmap: one row per
    catalog stimulus, or (without a catalog) at least one per stimulus id the trials use; finite values only."""
    path = Path(path)
    try:
        features = np.load(path, mmap_mode="r", allow_pickle=False)
    except NUMPY_FILE_ERRORS as exc:
        raise InputError(f"cannot read features ({exc})", path) from None
    if not isinstance(features, np.ndarray):  # a .npz archive
        features.close()
        raise InputError("expected one .npy array (stimuli, features), found a .npz archive", path)
    if features.ndim < 2 or not np.issubdtype(features.dtype, np.number):
        raise InputError(f"features must be a numeric (stimuli, features) array, got {features.dtype} "
                         f"{features.shape}", path)
    n = judgments.n_stimuli
    if judgments.catalog is not None and len(features) != n:
        raise InputError(f"features have {len(features)} rows but the catalog has {n} stimuli", path)
    if len(features) < n:
        raise InputError(f"features have {len(features)} rows but the trials use stimulus ids up to {n - 1} (row i "
                         "holds stimulus i)", path)
    flat = features.reshape(len(features), -1)
    for start in range(0, len(flat), FINITE_CHECK_ROWS):
        finite = np.isfinite(flat[start:start + FINITE_CHECK_ROWS]).all(axis=1)
        if not finite.all():
            raise InputError(f"features of stimulus {start + int(np.argmin(finite))} are not finite (NaN or Inf)",
                             path)
    return flat


class CatalogImages:
    """The catalog's images as a lazy sequence of uint8 (H, W, 3) arrays, decoded on access."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog

    def __len__(self) -> int:
        return len(self.catalog)

    def files(self) -> CatalogImages:
        """These images as the activation cache identifies a probing dataset (`root`, `index_path`, `n_images`,
        `load_image`, `image_path`): by the catalog file's size and time and the image paths, not by hashing every
        decoded image (which read all 50,000 ImageNet-HSJ stimuli once more before each extraction, even a cached
        one). A catalog that is no file of its own stays identified by its pixels."""
        source = self.catalog.source
        return _CatalogFiles(self.catalog) if source is not None and Path(source).is_file() else self

    def __getitem__(self, i: int) -> np.ndarray:
        return read_rgb(self.catalog.image_path(i))

    def thumbnail(self, i: int, size: int) -> np.ndarray:
        """Image i shrunk to fit in size x size pixels (aspect kept), for views."""
        im = Image.fromarray(self[i])
        im.thumbnail((size, size))
        return np.asarray(im)


class _CatalogFiles(CatalogImages):
    @property
    def root(self) -> Path:
        return self.catalog.root

    @property
    def index_path(self) -> Path:
        return Path(self.catalog.source)

    @property
    def n_images(self) -> int:
        return len(self.catalog)

    def load_image(self, i: int) -> np.ndarray:
        return self[i]

    def image_path(self, i: int) -> Path:
        return self.catalog.image_path(i)


def model_features(
    catalog: Catalog, spec: str, layer: str, *, pool: str = "avg", device: str = "cpu",
    cache_dir: str | Path | None = None, progress: ProgressCallback | None = None, cancel: CancelCheck | None = None,
    trust: Trust = NO_TRUST, preprocess: Preprocess | None = None, input_size: int | tuple[int, int] | None = None,
    layout: Layout | None = None,
) -> np.ndarray:
    """(n, F) features of every catalog image from a model layer: global-average pooled ('avg': a ViT layer's patch
    tokens averaged), a token layer's class token ('cls') or flattened; with `preprocess` in place of the model's own
    (images of several sizes need one that resizes)."""
    # (torch: the window's process imports this module, never torch)
    from probescope.core.models.loading import load_model

    if pool not in POOLS:
        raise InputError(f"pooling must be one of {', '.join(POOLS)}, got '{pool}'")
    model = load_model(spec, trust=trust, device=device, preprocess=preprocess, input_size=input_size,
                       layouts=None if layout is None else {layer: layout})
    return loaded_model_features(model, catalog, layer, pool=pool, cache_dir=cache_dir, progress=progress,
                                 cancel=cancel)


def loaded_model_features(
    model: LoadedModel, catalog: Catalog, layer: str, *, pool: str = "avg", cache_dir: str | Path | None = None,
    progress: ProgressCallback | None = None, cancel: CancelCheck | None = None,
) -> np.ndarray:
    """`model_features` for a model that is already loaded (the GUI's): through the activation cache, which keeps
    only the pooled features when pooling (the maps of a conv layer for 50,000 stimuli would fill gigabytes)."""
    # (torch: the window's process imports this module, never torch)
    from probescope.core.data.activations import extract_activations

    acts = extract_activations(model, layer, CatalogImages(catalog).files(), cache_dir, progress=progress,
                               cancel=cancel,
                               pool=None if pool == "flatten" else pool)
    return np.asarray(acts.reshape(len(acts), -1), dtype=np.float32)
