"""The jobs behind the Gallery's per-sample realism and the data-copying test: each generated sample's realism
score, nearest reference images and copy flag (core/scoring/realism.py), and the set-level C_T statistic against
held-out real images (core/scoring/copying.py).

`neighbours_job` and `copying_job` are `Job` functions (arrays, a ReferenceSet and numbers in, a result out, all
picklable), so they run in the window's worker pool now and in the compute kernel later. Neither needs torch.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

import numpy as np

from probescope.core.scoring.copying import DEFAULT_CELLS, MIN_CELL_SAMPLES, DataCopying, data_copying
from probescope.core.scoring.realism import SampleNeighbours, sample_neighbours
from probescope.core.scoring.reference import ReferenceSet
from probescope.core.scoring.settings import WINDOW, ScoreSettings
from probescope.jobs.protocol import TaskContext
from probescope.jobs.scoring.stream import ClassifierChoice, classifier_of


def neighbours_job(ctx: TaskContext, *, generated: np.ndarray, reference: ReferenceSet, k: int,
                   held_out: ReferenceSet | None = None, before: SampleNeighbours | None = None,
                   settings: ScoreSettings = WINDOW) -> SampleNeighbours:
    """Realism, the k nearest reference images and the copy test of each of `generated` (features), after the
    samples of `before` (the result so far, joined here so the window's GUI thread only shows it), with the
    reference's k-NN radii read from (or added to) its cache; the copy test is calibrated on `held_out` (with
    features) or on a part of the reference set aside (`settings`' share, seed and alpha)."""
    from probescope.jobs.scoring.workflow import copy_calibration

    ctx.progress(0.0, "reference radii")
    radii = reference.radii_of((k,), progress=ctx.progress, cancel=ctx.cancelled)
    usable = held_out if held_out is not None and held_out.features is not None else None
    calibration, _why = copy_calibration(ctx, reference, usable, settings)
    result = sample_neighbours(generated, reference.require_features("realism"), k, real_radii=radii[k],
                               calibration=calibration, features=reference.feature_note, progress=ctx.progress,
                               cancel=ctx.cancelled)
    return result if before is None else before.joined(result)


def copying_cells(samples: int, train: int) -> int:
    """Cells of the data-copying test for `samples` generated samples: the command line's 10, fewer when the
    samples are too few for cells of twice the 20 samples a cell needs to count (on average), and at most one per
    training image. (With 10 cells, 40 samples would leave every cell below 20: C_T undefined.)"""
    return max(1, min(DEFAULT_CELLS, samples // (2 * MIN_CELL_SAMPLES), train))


def copying_job(ctx: TaskContext, *, train: np.ndarray, held_out: np.ndarray, generated: np.ndarray,
                seed: int = 0) -> DataCopying:
    """C_T of the generated features against the reference (the generator's training images) and held-out ones,
    over `copying_cells` k-means cells of the reference."""
    return data_copying(train, held_out, generated, copying_cells(len(generated), len(train)), seed=seed,
                        progress=ctx.progress, cancel=ctx.cancelled)


ImageReader = Callable[[int], np.ndarray]


@lru_cache(maxsize=2)
def held_out_job(ctx: TaskContext, *, spec: str, classifier: ClassifierChoice) -> ReferenceSet:
    """Held-out real images `spec` as `classifier` sees them (cached like any reference set), for the data-copying
    test. Compute: it may run the classifier over them."""
    from probescope.core.scoring.reference import load_reference

    return load_reference(spec, classifier_of(ctx, classifier), progress=ctx.progress, cancel=ctx.cancelled)


def reference_reader(spec: str, content: str) -> ImageReader:
    """Image j of a reference given by path (a Broden dataset folder, a folder of images, an image array), in the
    reference's own order: the order its features were computed in. `content` names the images' content (the
    reference's cache file, made from their hash), so a folder whose images changed is opened again."""
    from probescope.core.data.images import read_rgb
    from probescope.core.scoring.reference import BrodenImageSource, reference_source
    from probescope.core.scoring.sources import ArraySource, ImageFolderSource

    source = reference_source(spec)
    if isinstance(source, BrodenImageSource):
        return source.dataset.load_image
    if isinstance(source, ArraySource):
        return lambda j: np.asarray(source.images[j])
    if isinstance(source, ImageFolderSource):
        return lambda j: read_rgb(source.files[j])
    raise ValueError(f"{spec}: a reference without images to show")
