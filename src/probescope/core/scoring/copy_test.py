"""A calibrated copy test: is a generated sample closer to its nearest reference image than real images are?

With d(x) = min_j |x - r_j| a point's Euclidean distance to its nearest reference image r_j, and h_1..h_n the same
distance for n held-out real images (drawn like the reference, but not in it), a generated sample g gets the
conformal p-value

    p(g) = (1 + #{j : h_j <= d(g)}) / (n + 1)

(held-out images as close as g count against flagging: ties are conservative). g is a possible copy iff p(g) <= alpha.
Under the null hypothesis (g is exchangeable with the held-out images: it was drawn like them, not copied from the
reference) P(flag) <= alpha exactly, whatever the features and the data, so on honest samples about a share alpha
is flagged, and markedly more says copying.

Threshold: with k = floor(alpha (n + 1)) (computed with the p-values' own rounding, so both forms agree), p(g) <= alpha
iff d(g) < h_(k), the k-th smallest held-out distance. k = 0 (fewer than ceil(1/alpha) - 1 held-out images) would
flag nothing whatever g is: refused. Interval: the flagged share's Clopper-Pearson (exact binomial) 95% interval.

This replaces the rule "g is closer to r_j than r_j's nearest other reference image" (realism.py's possible copy),
which has no calibration: it fires on about 38% of honest samples. Distances are precision/recall's
(`distance_blocks`: float64, blocks of rows, memory bounded).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import numpy as np

from probescope.core.errors import InputError
from probescope.core.scoring.frechet import feature_sets
from probescope.core.scoring.precision_recall import distance_blocks
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report

DEFAULT_ALPHA = 0.01
MAX_ALPHA = 0.5
DEFAULT_HELD_OUT_SHARE = 0.2
CONFIDENCE = 0.95
SAME_IMAGE = 1e-6  # a held-out image this close (times the reference's RMS norm) to a reference image is that image


@dataclass(frozen=True)
class CopyTest:
    """Per generated sample (rows in input order): nearest reference image, distance, p-value and flag."""

    alpha: float
    threshold: float  # h_(k): flagged iff distance < threshold
    distance: np.ndarray  # (N,) float64, to the nearest reference image
    nearest: np.ndarray  # (N,) int64, index into the reference passed
    p_value: np.ndarray  # (N,) float64
    flagged: np.ndarray  # (N,) bool
    held_out_distances: np.ndarray  # (n,) float64, sorted
    held_out: str  # where the held-out images came from
    features: str = ""
    in_reference: int = 0  # held-out images that are reference images (distance 0): not held out at all
    # the flagged share's Clopper-Pearson 95% interval: compare it with alpha, the share expected without copies
    # (computed where the test is made: scipy.stats takes half a second to import, never in a window's GUI thread)
    interval: tuple[float, float] = field(init=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "interval", clopper_pearson(self.flagged_count, self.samples))

    @property
    def samples(self) -> int:
        return len(self.flagged)

    @property
    def flagged_count(self) -> int:
        return int(self.flagged.sum())

    @property
    def flagged_share(self) -> float:
        return self.flagged_count / self.samples

    def to_dict(self) -> dict[str, object]:
        lo, hi = self.interval
        return {"copy_test_alpha": self.alpha, "copy_test_threshold": self.threshold,
                "copy_test_flagged": self.flagged_count, "copy_test_samples": self.samples,
                "copy_test_flagged_share": self.flagged_share, "copy_test_interval": [lo, hi],
                "copy_test_held_out": self.held_out, "copy_test_held_out_images": len(self.held_out_distances),
                "copy_test_features": self.features, "copy_test_held_out_in_reference": self.in_reference}

    def joined(self, more: CopyTest) -> CopyTest:
        """This test's samples followed by `more`'s (the same calibration)."""
        return replace(self, distance=np.concatenate([self.distance, more.distance]),
                       nearest=np.concatenate([self.nearest, more.nearest]),
                       p_value=np.concatenate([self.p_value, more.p_value]),
                       flagged=np.concatenate([self.flagged, more.flagged]))

    def summary(self) -> str:
        lo, hi = self.interval
        where = f" ({self.held_out})" if self.held_out else ""
        return (f"possible copies: {self.flagged_count} of {self.samples} samples ({percent(self.flagged_share)}%, "
                f"95% CI {percent(lo)}–{percent(hi)}%; expected {percent(self.alpha)}% at alpha {self.alpha:g} if "
                f"no sample copies): nearest-reference distance below the {percent(self.alpha)}% quantile of "
                f"{len(self.held_out_distances)} held-out real images'{where}"
                + in_reference_caveat(self.in_reference, len(self.held_out_distances), "reference"))


def min_held_out(alpha: float) -> int:
    """The fewest held-out images with which the test can flag anything at `alpha`: n with 1 / (n + 1) <= alpha."""
    _check_alpha(alpha)
    n = max(0, math.ceil(1.0 / alpha) - 1)
    while n > 0 and 1.0 / n <= alpha:  # 1 / alpha rounded up past an integer
        n -= 1
    while 1.0 / (n + 1) > alpha:
        n += 1
    return n


def clopper_pearson(successes: int, trials: int, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """The exact two-sided binomial interval of successes / trials (lower 0 at 0 successes, upper 1 at all): it
    never undercovers, which matters for the few flags expected at small alpha."""
    if not 0 <= successes <= trials or trials < 1:
        raise InputError(f"a binomial interval needs 0 <= successes <= trials and trials >= 1, got {successes} of "
                         f"{trials}")
    from scipy.stats import beta  # (scipy.stats: 0.65 s to import; the window and --help import this module)

    tail = (1.0 - confidence) / 2.0
    lo = 0.0 if successes == 0 else float(beta.ppf(tail, successes, trials - successes + 1))
    hi = 1.0 if successes == trials else float(beta.ppf(1.0 - tail, successes + 1, trials - successes))
    return lo, hi


def nearest_reference(points: np.ndarray, reference: np.ndarray, *, cancel: CancelCheck | None = None,
                      progress: ProgressCallback | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Each point's Euclidean distance to its nearest reference row, (N,) float64, and that row's index, (N,) int64
    (the first on ties)."""
    n = len(points)
    distance = np.empty(n)
    nearest = np.empty(n, np.int64)
    for start, dist in distance_blocks(points, reference):
        check_cancel(cancel)
        rows = slice(start, start + len(dist))
        nearest[rows] = dist.argmin(axis=1)
        distance[rows] = dist[np.arange(len(dist)), nearest[rows]]
        report(progress, (start + len(dist)) / n, f"nearest reference images: {start + len(dist)}/{n}")
    return distance, nearest


def set_aside(n: int, share: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A random split of n reference indices into (kept, held out), each sorted: held-out images for the test when
    no others are at hand (copies of those are then not looked for). round(share n) held out, 1 to n - 1."""
    if not 0.0 < share < 1.0:
        raise InputError(f"the held-out share of the reference must lie strictly between 0 and 1, got {share}")
    if n < 2:
        raise InputError(f"setting reference images aside needs at least 2 of them (one kept, one held out), got {n}")
    count = min(n - 1, max(1, int(round(share * n))))
    order = np.random.default_rng(seed).permutation(n)
    return np.sort(order[count:]), np.sort(order[:count])


@dataclass(frozen=True)
class Calibration:
    """The held-out side of the test: the held-out images' sorted nearest-reference distances, and which reference
    rows were searched (None: all; a set-aside part of the reference searches only the rest)."""

    alpha: float
    held_out_distances: np.ndarray  # (n,) float64, sorted
    held_out: str  # where the held-out images came from
    searched: np.ndarray | None = None  # reference rows the nearest image is looked for among
    in_reference: int = 0  # held-out images that are reference images (distance 0)

    @property
    def threshold(self) -> float:
        """h_(k): a sample is flagged iff its distance is below it."""
        ranks = (1.0 + np.arange(len(self.held_out_distances) + 1)) / (len(self.held_out_distances) + 1)
        k = int((ranks <= self.alpha).sum())  # floor(alpha (n + 1)) as the p-values round; >= 1 by min_held_out
        return float(self.held_out_distances[k - 1])

    def p_values(self, distance: np.ndarray) -> np.ndarray:
        """The conformal p-value of each nearest-reference distance."""
        n = len(self.held_out_distances)
        ranks = (1.0 + np.arange(n + 1)) / (n + 1)  # the possible p-values, increasing
        return ranks[np.searchsorted(self.held_out_distances, distance, side="right")]

    def test(self, distance: np.ndarray, nearest: np.ndarray, features: str = "") -> CopyTest:
        """The CopyTest of samples at these nearest-reference distances (nearest: reference indices)."""
        p = self.p_values(distance)
        return CopyTest(float(self.alpha), self.threshold, distance, nearest, p, p <= self.alpha,
                        self.held_out_distances, self.held_out, features, self.in_reference)


def calibrate(reference: np.ndarray, held_out: np.ndarray, *, alpha: float = DEFAULT_ALPHA, held_out_note: str = "",
              searched: np.ndarray | None = None, cancel: CancelCheck | None = None,
              progress: ProgressCallback | None = None) -> Calibration:
    """The held-out images' distances to their nearest reference image (among rows `searched`, all by default)."""
    _check_alpha(alpha)
    reference, held_out = feature_sets(reference=reference, held_out=held_out)
    n = len(held_out)
    needed = min_held_out(alpha)
    if n < needed:
        raise InputError(f"at alpha={alpha:g} the copy test needs at least {needed} held-out images and got {n}")
    rows = reference if searched is None else reference[searched]
    h, _ = nearest_reference(held_out, rows, cancel=cancel, progress=progress)
    h.sort()
    same = same_images(h, rows)
    return Calibration(float(alpha), h, held_out_note, searched, same)


def set_aside_calibration(reference: np.ndarray, *, alpha: float = DEFAULT_ALPHA,
                          share: float = DEFAULT_HELD_OUT_SHARE, seed: int = 0, cancel: CancelCheck | None = None,
                          progress: ProgressCallback | None = None) -> Calibration:
    """A calibration from a random part of the reference itself (`set_aside`), when no held-out images are given:
    samples are then compared with the rest only, and copies of the images set aside are not looked for."""
    kept, held = set_aside(len(reference), share, seed)
    note = (f"{len(held)} of {len(reference)} reference images set aside at random (seed {seed}) as held-out "
            "images; copies of those are not looked for")
    return calibrate(reference, reference[held], alpha=alpha, held_out_note=note, searched=kept, cancel=cancel,
                     progress=progress)


def copy_test(generated: np.ndarray, reference: np.ndarray, held_out: np.ndarray, *, alpha: float = DEFAULT_ALPHA,
              held_out_note: str = "", features: str = "", cancel: CancelCheck | None = None,
              progress: ProgressCallback | None = None) -> CopyTest:
    """The copy test of `generated` against `reference`, calibrated on `held_out` real images (features with the
    same dimensions). `held_out_note` says where the held-out images came from (kept in the result, for reports)."""
    _check_alpha(alpha)
    generated, reference, held_out = feature_sets(generated=generated, reference=reference, held_out=held_out)
    n = len(held_out)
    total = n + len(generated)
    calibration = calibrate(reference, held_out, alpha=alpha, held_out_note=held_out_note, cancel=cancel,
                            progress=_part(progress, 0, n, total, "held-out"))
    d, nearest = nearest_reference(generated, reference, cancel=cancel,
                                   progress=_part(progress, n, len(generated), total, "generated"))
    report(progress, 1.0, "copy test done")
    return calibration.test(d, nearest, features)


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha <= MAX_ALPHA:  # NaN fails too
        raise InputError(f"the copy test's alpha (the share of honest samples it may flag) must lie in "
                         f"(0, {MAX_ALPHA:g}], got {alpha}")


def _part(progress: ProgressCallback | None, first: int, count: int, total: int,
          what: str) -> Callable[[float, str], None] | None:
    """`progress` for one pass over `count` of `total` rows, starting after `first`."""
    if progress is None:
        return None
    return lambda fraction, message: report(progress, (first + fraction * count) / total,
                                            f"copy test, {what} images: {message}")


def same_images(distances: np.ndarray, rows: np.ndarray) -> int:
    """How many of these nearest distances are 0 up to the rounding of distances between vectors of the rows' RMS
    norm: images that are also among `rows` (held-out images that are not held out)."""
    scale = float(np.sqrt(np.square(rows, dtype=np.float64).sum(axis=1).mean()))
    return int((np.asarray(distances) <= SAME_IMAGE * scale).sum())


def in_reference_caveat(same: int, n: int, what: str) -> str:
    """The caveat a result carries when `same` of its `n` held-out images are also in the `what` set."""
    if not same:
        return ""
    return (f"; CAUTION: {same} of the {n} held-out images are also in the {what} (distance 0): they are not held "
            "out, so the test flags fewer samples than it should")


def percent(share: float) -> str:
    """100 share with two significant digits (whole numbers from 10%): 0.75, 2.2, 12, 100."""
    value = 100.0 * share
    return f"{value:.0f}" if value >= 10 else f"{value:.2g}"
