"""The gallery's scores against real data (FID, KID, precision/recall, coverage) as jobs: which reference set,
loading it, and reading every score from a frozen copy of the live statistics.

The GUI thread owns the `LiveScores` and adds each streamed batch's features and logits to it (O(batch x d^2)).
Reading the scores costs more (FID an eigenvalue problem of the reference's rank, precision/recall all pairwise
distances), so the gallery takes a `snapshot()` and reads it here, in the I/O pool; a new reading is asked for only
when the previous one has come back, so the redraw rate follows what the machine can do.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from probescope.core.errors import InputError
from probescope.core.scoring.live_scores import LiveScores, Readout
from probescope.core.scoring.reference import ReferenceSet
from probescope.jobs.protocol import Progress, TaskContext
from probescope.jobs.scoring.stream import ClassifierChoice

DATASET = "dataset"  # the loaded probing dataset's images (the demo world's by default: FID offline)
NONE = "none"
REBUILD_CHUNK = 256  # kept samples re-added per step when the reference changes mid-run


@dataclass(frozen=True)
class ReferenceChoice:
    """What the user chose as real data: DATASET, NONE, or the path of a folder / .npy / .npz (images or mu/sigma)."""

    spec: str = DATASET

    @property
    def label(self) -> str:
        if self.spec == DATASET:
            return "the loaded probing dataset's images"
        if self.spec == NONE:
            return "no reference (IS only)"
        return self.spec


def load_reference_scores(ctx: TaskContext, choice: ReferenceChoice, dataset, classifier: ClassifierChoice,
                          kept: tuple[np.ndarray, np.ndarray] | None) -> Iterator[Progress]:
    """The reference set as `classifier` sees it (cached per classifier and image content), its covariance factored,
    and a `LiveScores` against it holding the `kept` (features, logits) scored so far. Compute: it runs the
    classifier over the reference images when they are not cached yet. `dataset` is the loaded probing dataset
    (a BrodenDataset: its folder and index), whose images are the reference with the choice DATASET."""
    from probescope.core.scoring.reference import BrodenImageSource, load_reference
    from probescope.jobs.scoring.stream import classifier_of

    model = classifier_of(ctx, classifier)
    class_names = model.class_names

    reference: ReferenceSet | None = None
    if choice.spec == DATASET:
        if dataset is None:
            raise InputError("no probing dataset is loaded: open one, or choose a folder of real images")
        spec = BrodenImageSource(dataset)
    else:
        spec = choice.spec
    if choice.spec != NONE:
        yield Progress(None, f"reference set: {choice.label}")
        reference = load_reference(spec, model, progress=ctx.progress, cancel=ctx.cancelled)
        reference.frechet  # noqa: B018  (factor the reference covariance here, not in the GUI thread)
    live = LiveScores(reference, class_names=class_names, clip=model.network is not None and model.network.unit_norm)
    if kept is not None and len(kept[0]):
        features, logits = kept
        for start in range(0, len(features), REBUILD_CHUNK):
            ctx.check()
            live.add(features[start : start + REBUILD_CHUNK], logits[start : start + REBUILD_CHUNK])
            yield Progress(start / len(features), f"scoring {len(features):,} kept samples against the reference")
    return reference, live


def read_scores(ctx: TaskContext, frozen: LiveScores, fits: bool, prc: bool) -> Readout:
    """Every score of a snapshot (I/O pool); see `LiveScores.readout` for what `fits` and `prc` add."""
    ctx.check()
    return frozen.readout(distances=frozen.reference is not None, fits=fits, prc=prc)
