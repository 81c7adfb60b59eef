"""The settings of scoring a sample set, in one place: every default, range and help text of the protocol and of
the run (splits, seed, batch size, resize, KID subsets, precision/recall's k, density/coverage's k, the infinite-N
fits, the data-copying cells). `probescope score`'s options and the gallery read them from `ScoreSettings`; the
engines' own defaults (torch-fidelity's and the papers') are the defaults here, so no number is typed twice.

Each field's `help` is the text of its option (the field name with dashes: `--kid-subsets`); its `bound` is what
the number can mean (probescope.core.bounds). `batch_size` and `workers` change speed, never a score.
"""

from __future__ import annotations

from dataclasses import dataclass, field, fields, replace

from probescope.core.bounds import (
    BATCH,
    FIT_POINTS,
    HELD_OUT_SHARE,
    IMAGE_SIDE,
    KID_SUBSET_SIZE,
    KID_SUBSETS,
    NEIGHBOURS,
    SEED,
    SIGNIFICANCE,
    SPLITS,
    WORKERS,
    Bound,
)
from probescope.core.errors import InputError
from probescope.core.scoring import extrapolate
from probescope.core.scoring.copy_test import DEFAULT_ALPHA, DEFAULT_HELD_OUT_SHARE
from probescope.core.scoring.copying import DEFAULT_CELLS, MAX_CELLS
from probescope.core.scoring.density_coverage import DEFAULT_K as DEFAULT_DC_K
from probescope.core.scoring.feature_spec import CLASSIFIER, PRECISIONS, RESIZES, SPEC_HELP
from probescope.core.scoring.kid import DEFAULT_SUBSET_SIZE, DEFAULT_SUBSETS
from probescope.core.scoring.precision_recall import DEFAULT_K
from probescope.core.scoring.splits import DEFAULT_SEED, DEFAULT_SPLITS

DEFAULT_BATCH_SIZE = 64
DEFAULT_WORKERS = 2


@dataclass(frozen=True)
class DistanceSettings:
    """Which scores to compute and their protocols (torch-fidelity's and Chong & Forsyth's defaults)."""

    kid: bool = False
    prc: bool = False
    infinite: bool = False
    kid_subsets: int = DEFAULT_SUBSETS
    kid_subset_size: int = DEFAULT_SUBSET_SIZE
    prc_k: int = DEFAULT_K
    inf_points: int = extrapolate.DEFAULT_POINTS
    inf_smallest: int = extrapolate.DEFAULT_SMALLEST
    seed: int = DEFAULT_SEED


def _help(text: str, bound: Bound | None = None, choices: tuple[str, ...] = ()) -> dict[str, object]:
    """A field's metadata: its option's help (argparse's %(default)s is the field's default) and its Bound or its
    choices."""
    out: dict[str, object] = {"help": text}
    if bound is not None:
        out["bound"] = bound
    if choices:
        out["choices"] = choices
    return out


@dataclass(frozen=True)
class ScoreSettings:
    """How a sample set is scored: the split protocol (torch-fidelity's: 10 splits, RandomState(2020)), the batches,
    and the protocols of the scores against real images."""

    splits: int = field(default=DEFAULT_SPLITS, metadata=_help("number of splits (default %(default)s)", SPLITS))
    seed: int = field(default=DEFAULT_SEED, metadata=_help(
        "shuffle seed of the split protocol (default %(default)s)", SEED))
    shuffle: bool = field(default=True, metadata=_help("cut splits in input order"))  # the option is --no-shuffle
    resize: int | None = field(default=None, metadata=_help(
        "stretch every image to NxN before a model classifier (antialiased bilinear); default: the classifier's own "
        "rule (the Inception classifiers resize to 299 themselves, as torch-fidelity; other models see native "
        "sizes, one size at a time)", IMAGE_SIDE))
    batch_size: int = field(default=DEFAULT_BATCH_SIZE, metadata=_help(
        "images per classifier batch (default %(default)s; the scores do not depend on it)", BATCH))
    workers: int = field(default=DEFAULT_WORKERS, metadata=_help("decode/prefetch threads (default %(default)s)",
                                                                 WORKERS))
    kid_subsets: int = field(default=DEFAULT_SUBSETS, metadata=_help("KID subsets (default %(default)s)",
                                                                     KID_SUBSETS))
    kid_subset_size: int = field(default=DEFAULT_SUBSET_SIZE, metadata=_help(
        "samples per KID subset (default %(default)s)", KID_SUBSET_SIZE))
    prc_k: int = field(default=DEFAULT_K, metadata=_help(
        "nearest neighbours of precision/recall (default %(default)s)", NEIGHBOURS))
    dc_k: int = field(default=DEFAULT_DC_K, metadata=_help(
        "nearest real neighbours of density and coverage (default %(default)s, Naeem et al.'s)", NEIGHBOURS))
    inf_points: int = field(default=extrapolate.DEFAULT_POINTS, metadata=_help(
        "subset sizes of the infinite-N fits (default %(default)s)", FIT_POINTS))
    inf_smallest: int = field(default=extrapolate.DEFAULT_SMALLEST, metadata=_help(
        "smallest subset of the infinite-N fits (default %(default)s; at most N/2 is used)", KID_SUBSET_SIZE))
    copy_cells: int = field(default=DEFAULT_CELLS, metadata=_help(
        f"k-means cells of the data-copying test, 1-{MAX_CELLS} (default %(default)s)", Bound(1, MAX_CELLS)))
    features: str = field(default=CLASSIFIER, metadata=_help(SPEC_HELP + " (default %(default)s)"))
    feature_resize: str = field(default=RESIZES[0], metadata=_help(
        "how DINOv2 features see the images: torch-fidelity (TF1 bilinear to 224, its DINOv2 extractor's, the "
        "default) or dgm-eval (PIL bicubic to 224)", choices=RESIZES))
    precision: str = field(default=PRECISIONS[0], metadata=_help(
        "arithmetic of the feature network: auto (bf16 autocast on a GPU, float32 on the CPU; the default), fp32, "
        "bf16 or fp16 (GPU only)", choices=PRECISIONS))
    copy_alpha: float = field(default=DEFAULT_ALPHA, metadata=_help(
        "level of the copy test: a sample is a possible copy when its distance to its nearest reference image is "
        "below the alpha-quantile of held-out real images' (default %(default)s)", SIGNIFICANCE))
    held_out_share: float = field(default=DEFAULT_HELD_OUT_SHARE, metadata=_help(
        "share of the reference set aside as held-out images for the copy test when no --held-out is given "
        "(default %(default)s)", HELD_OUT_SHARE))

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if "bound" in f.metadata and value is not None:
                f.metadata["bound"].check(value, f.name)
            if "choices" in f.metadata and value not in f.metadata["choices"]:
                raise InputError(f"{f.name.replace('_', '-')} must be one of {', '.join(f.metadata['choices'])}, "
                                 f"got {value!r}")

    def distances(self, *, kid: bool = False, prc: bool = False, infinite: bool = False) -> DistanceSettings:
        """The DistanceSettings of these protocols, with the scores asked for."""
        return DistanceSettings(kid=kid, prc=prc, infinite=infinite, kid_subsets=self.kid_subsets,
                                kid_subset_size=self.kid_subset_size, prc_k=self.prc_k, inf_points=self.inf_points,
                                inf_smallest=self.inf_smallest, seed=self.seed)


# The window's run: the same protocol, in batches of 4 so the live numbers move at least 10 times a second with the
# demo classifier (the scores do not depend on the batch size), read in the compute thread (see jobs/scoring.py).
WINDOW = replace(ScoreSettings(), batch_size=4, workers=1)
