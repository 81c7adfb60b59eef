"""Every score of a stream of generated samples against a reference set, updated one batch at a time.

The gallery feeds each batch's features and logits (one forward pass) to `LiveScores.add` and redraws from its
readers. An update costs O(m d^2) for the running Gaussian fits (the features, and the features whitened by the
reference fit, so FID needs no covariance product), O(m (N + M) d) for the running KID over all pairs (N samples so
far, up to LIVE_KID_SAMPLES; M reference samples in its pool) and O(m n_classes) for IS. Readers are cached until
the next batch: fid O(r^3) (one symmetric eigenvalue problem, r <= d the reference's rank), kid and IS O(1) after
the update, precision_recall O((N^2 + N M) d), the infinite-N fits a few FID/IS evaluations on random subsets,
coverage O(n).

The live values are single estimates over everything seen so far: KID over all pairs (of the first
LIVE_KID_SAMPLES samples: past them each batch would cost the GUI thread O(m N d), 0.1 s a batch at N = 25,000)
rather than the subset protocol's mean, IS with one marginal rather than the split protocol; front ends label them
apart.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

import numpy as np

from probescope.core.errors import InputError
from probescope.core.scoring import extrapolate
from probescope.core.scoring.cmmd import cmmd
from probescope.core.scoring.coverage import ClassCoverage, class_coverage
from probescope.core.scoring.density_coverage import DEFAULT_K as DEFAULT_DC_K
from probescope.core.scoring.density_coverage import DensityCoverage, density_coverage
from probescope.core.scoring.distributions import ClassScores
from probescope.core.scoring.frechet import RunningGaussian, as_features
from probescope.core.scoring.growing import GrowingRows
from probescope.core.scoring.kid import RunningKernelDistance
from probescope.core.scoring.live import LiveInceptionScore
from probescope.core.scoring.precision_recall import DEFAULT_K, PrecisionRecall, precision_recall
from probescope.core.scoring.reference import ReferenceSet
from probescope.core.scoring.splits import DEFAULT_SEED

LIVE_KID_REFERENCE = 2000  # reference samples in the running KID's pool (a fixed random subset when there are more)
LIVE_KID_SAMPLES = 5000  # generated samples the running KID covers (the first ones: a stream's order is random)
T = TypeVar("T")


@dataclass(frozen=True)
class Readout:
    """The scores at one N for a front end: `values` by metric ('IS', 'FID', 'KID', 'precision', 'recall',
    'density', 'nn_coverage', 'CMMD'), and for each score not there, why (too few samples, no reference, a
    statistics-only reference, not asked for)."""

    n: int
    values: dict[str, float] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    fid_inf: extrapolate.InfiniteNFit | None = None
    is_inf: extrapolate.InfiniteNFit | None = None
    coverage: ClassCoverage | None = None


class LiveScores:
    """IS, FID, KID, precision/recall, density/coverage, CMMD, class coverage and the infinite-N fits of the
    samples added so far.

    `reference` None scores IS only; a reference read from a mu/sigma file scores FID but not KID, precision/recall
    or coverage (those need the reference images' features and predictions): their readers raise InputError. CMMD
    is read only with `clip` features (unit-length CLIP image embeddings), over the samples and reference images
    the running KID covers.
    """

    def __init__(
        self,
        reference: ReferenceSet | None = None,
        *,
        class_names: Sequence[str] | None = None,
        prc_k: int = DEFAULT_K,
        kid_reference_size: int = LIVE_KID_REFERENCE,
        kid_sample_size: int = LIVE_KID_SAMPLES,
        seed: int = DEFAULT_SEED,
        dc_k: int = DEFAULT_DC_K,
        clip: bool = False,
    ):
        self.reference = reference
        self.dc_k, self.clip = dc_k, clip
        self.class_names = tuple(class_names) if class_names is not None else None
        self.prc_k, self.seed, self.kid_sample_size = prc_k, seed, kid_sample_size
        self.inception = LiveInceptionScore(keep_rows=False)
        self.gaussian = RunningGaussian()  # of the features: mean, trace and the covariance to export
        self._whitened = RunningGaussian()  # of the features whitened by the reference fit: FID's eigenvalues
        self._features = GrowingRows()
        self._logits = GrowingRows()
        self._kid: RunningKernelDistance | None = None
        if reference is not None and reference.features is not None:
            pool = reference.features
            if len(pool) > kid_reference_size:
                keep = np.random.RandomState(seed).choice(len(pool), kid_reference_size, replace=False)
                pool = pool[np.sort(keep)]
            self._kid = RunningKernelDistance(pool)
        self._cache: dict[tuple, object] = {}
        self.history: dict[str, list[tuple[int, float]]] = {"IS": [], "FID": [], "KID": []}

    @property
    def n(self) -> int:
        return self.inception.n

    def add(self, features: np.ndarray, logits: np.ndarray) -> None:
        """Add one batch: features (m, d) and logits (m, n_classes) of the same m images."""
        features = as_features(features)
        logits = np.atleast_2d(logits)
        if len(features) != len(logits):
            raise InputError(f"batch has {len(features)} feature rows but {len(logits)} logit rows")
        if self.gaussian.dim not in (None, features.shape[1]):
            raise InputError(f"batch has {features.shape[1]} features per row, earlier batches {self.gaussian.dim}")
        if self.reference is not None:
            self.reference.frechet.check_dim(features.shape[1])
        self.inception.add_logits(logits)  # validates the logits first: a rejected batch changes nothing
        self.gaussian.add(features)
        if self.reference is not None:
            self._whitened.add(features, self.reference.frechet.whiten)  # (whitened where it is read)
        if self._kid is not None and self._kid.n < self.kid_sample_size:
            covered = self._kid.n
            self._kid.add(features[: self.kid_sample_size - covered], self._features.values[:covered])
        self._features.append(features)
        self._logits.append(logits)
        self._cache.clear()
        self.history["IS"].append((self.n, self.inception.is_))

    # -- readers (cached until the next batch) ----------------------------------------------------------------

    def _cached(self, key: tuple, compute: Callable[[], T], metric: str | None = None) -> T:
        if key not in self._cache:
            self._cache[key] = compute()
            if metric is not None:
                self.history[metric].append((self.n, float(self._cache[key])))
        return self._cache[key]  # type: ignore[return-value]

    def _require_reference(self, what: str) -> ReferenceSet:
        if self.reference is None:
            raise InputError(f"{what} needs a reference set of real images")
        return self.reference

    @property
    def is_(self) -> float:
        """IS over all samples so far, one marginal (not the split protocol)."""
        return self.inception.is_

    def fid(self) -> float:
        """FID of the samples so far against the reference fit (needs 2 samples)."""
        frechet = self._require_reference("FID").frechet
        return self._cached(("fid",), lambda: frechet.distance_from(
            self.gaussian.mean, self.gaussian.trace, self._whitened.cov), "FID")

    def kid(self) -> float:
        """Unbiased MMD^2 over all pairs of the samples so far (the first `kid_sample_size`) and the reference pool
        (not the subset protocol)."""
        self._require_reference("KID").require_features("KID")
        return self._cached(("kid",), lambda: self._kid.value, "KID")

    def precision_recall(self) -> PrecisionRecall:
        """Precision and recall (k-NN balls) of the samples so far against the reference features."""
        reference = self._require_reference("precision and recall")
        real = reference.require_features("precision and recall")
        return self._cached(("prc",), lambda: precision_recall(
            self._features.values, real, self.prc_k, real_radii=reference.radii(self.prc_k)))

    def density_coverage(self) -> DensityCoverage:
        """Density and coverage (Naeem et al. 2020, k = dc_k real neighbours) of the samples so far."""
        reference = self._require_reference("density and coverage")
        real = reference.require_features("density and coverage")
        return self._cached(("dc",), lambda: density_coverage(
            self._features.values, real, self.dc_k, real_radii=reference.radii(self.dc_k)))

    def cmmd(self) -> float:
        """CMMD (x1000 unbiased MMD^2, RBF sigma 10) of the samples the running KID covers against its reference
        pool; only on CLIP features."""
        self._require_reference("CMMD").require_features("CMMD")
        if not self.clip:
            raise InputError("CMMD is measured on CLIP image embeddings: choose an OpenCLIP network as the features")
        if self.kid_samples < 2:
            raise InputError("CMMD needs at least 2 samples")
        return self._cached(("cmmd",), lambda: cmmd(self._features.values[: self.kid_samples],
                                                      self._kid.reference).value)

    def fid_infinity(self, points: int = extrapolate.DEFAULT_POINTS,
                     smallest: int = extrapolate.DEFAULT_SMALLEST) -> extrapolate.InfiniteNFit:
        """FID_inf fit over random subsets of the samples so far (Chong & Forsyth)."""
        frechet = self._require_reference("FID").frechet
        return self._cached(("fid_inf", points, smallest), lambda: extrapolate.fid_infinity(
            self._features.values, frechet, points, smallest, self.seed))

    def is_infinity(self, points: int = extrapolate.DEFAULT_POINTS,
                    smallest: int = extrapolate.DEFAULT_SMALLEST) -> extrapolate.InfiniteNFit:
        """IS_inf fit over random subsets of the samples so far."""
        if self.n == 0:
            raise InputError("no images scored yet")
        return self._cached(("is_inf", points, smallest), lambda: extrapolate.is_infinity(
            ClassScores(self._logits.values, "logits"), points, smallest, self.seed))

    def coverage(self) -> ClassCoverage:
        """Which classes the samples so far under- or over-produce against the reference's predictions."""
        reference = self._require_reference("coverage")
        if reference.class_counts is None:
            raise InputError(f"coverage needs the reference images' predictions; {reference.name} holds only "
                             "mu and sigma")
        return self._cached(("coverage",), lambda: class_coverage(
            reference.class_counts, self.inception.argmax_counts, self.class_names))

    @property
    def kid_samples(self) -> int:
        """How many generated samples the running KID covers."""
        return 0 if self._kid is None else self._kid.n

    @property
    def kid_reference(self) -> np.ndarray:
        """The reference samples the running KID compares with (all, or a fixed random subset of a large set)."""
        self._require_reference("KID").require_features("KID")
        return self._kid.reference

    @property
    def features(self) -> np.ndarray:
        """The generated samples' features so far (read-only view)."""
        return self._features.values

    @property
    def logits(self) -> np.ndarray:
        """The generated samples' logits so far (read-only view)."""
        return self._logits.values

    def snapshot(self) -> LiveScores:
        """A frozen copy to read in another thread while this one goes on growing: O(classes) to take (the Gaussian
        fits are shared, as their updates make new arrays; the kept rows too, as appends never write over rows
        already there)."""
        frozen = copy.copy(self)
        frozen.inception = self.inception.copy()
        frozen.gaussian, frozen._whitened = copy.copy(self.gaussian), copy.copy(self._whitened)  # (see .add)
        frozen._features, frozen._logits = copy.copy(self._features), copy.copy(self._logits)
        frozen._kid = copy.copy(self._kid)
        frozen._cache = {}
        frozen.history = {metric: list(points) for metric, points in self.history.items()}
        return frozen

    def adopt(self, snapshot: LiveScores) -> None:
        """Take back the Gaussian sums `snapshot` (this one's) folded while it was read in a worker."""
        self.gaussian.adopt(snapshot.gaussian)
        self._whitened.adopt(snapshot._whitened)

    def readout(self, *, distances: bool = True, fits: bool = False, prc: bool = False) -> Readout:
        """Every score asked for that can be read now: IS always; with `distances` FID and KID (cheap: the running
        fits); with `fits` the infinite-N fits (IS's, and FID's with `distances`) and the class coverage (a few FID
        and IS evaluations on subsets); with `prc` precision and recall, density and coverage, and CMMD (on CLIP
        features) (O((N^2 + N M) d))."""
        wanted: list[tuple[str, Callable[[], object]]] = [("IS", lambda: self.is_)]
        if distances:
            wanted += [("FID", self.fid), ("KID", self.kid)]
        if fits:
            wanted += [("IS_inf", self.is_infinity)]
            wanted += [("FID_inf", self.fid_infinity), ("coverage", self.coverage)] if distances else []
        if prc:
            wanted += [("precision/recall", self.precision_recall), ("density/coverage", self.density_coverage),
                       ("CMMD", self.cmmd)]
        read, missing = {}, {}
        for metric, reader in wanted:
            try:
                if self.n == 0:
                    raise InputError("no images scored yet")
                read[metric] = reader()
            except InputError as exc:
                missing[metric] = str(exc)
        values = {metric: float(read[metric]) for metric in ("IS", "FID", "KID", "CMMD") if metric in read}
        prc = read.get("precision/recall")
        if prc is not None:
            values.update(precision=prc.precision, recall=prc.recall)
        dc = read.get("density/coverage")
        if dc is not None:
            values.update(density=dc.density, nn_coverage=dc.coverage)
        return Readout(self.n, values, missing, read.get("FID_inf"), read.get("IS_inf"), read.get("coverage"))
