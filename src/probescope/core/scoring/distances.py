"""FID, KID, precision/recall, class coverage and the infinite-N limits of one generated set, as the score command
reports them beside the Inception Score (the gallery shows the same numbers live through LiveScores)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from probescope.core.scoring import extrapolate
from probescope.core.scoring.coverage import ClassCoverage, class_coverage
from probescope.core.scoring.distributions import ClassScores
from probescope.core.scoring.frechet import gaussian_stats
from probescope.core.scoring.kid import KernelDistance, kernel_inception_distance
from probescope.core.scoring.precision_recall import PrecisionRecall, precision_recall
from probescope.core.scoring.reference import ReferenceSet
from probescope.core.scoring.report import shown
from probescope.core.scoring.settings import DistanceSettings

COVERAGE_LISTED = 10  # classes named per status in the text summary


@dataclass(frozen=True)
class DistanceReport:
    n: int
    feature_note: str
    reference: str
    fid: float | None = None
    kid: KernelDistance | None = None
    prc: PrecisionRecall | None = None
    fid_inf: extrapolate.InfiniteNFit | None = None
    is_inf: extrapolate.InfiniteNFit | None = None
    coverage: ClassCoverage | None = None
    label: str = "FID"  # the Fréchet distance's name on these features: FID, FD_DINOv2, FD_CLIP, FD

    def to_dict(self) -> dict:
        out: dict[str, object] = {}
        if self.fid is not None:
            out.update(fid=self.fid, features=self.feature_note, reference=self.reference)
            if self.label != "FID":
                out["fd_name"] = self.label
        if self.kid is not None:
            out.update(kid_mean=self.kid.mean, kid_std=self.kid.std, kid_subsets=self.kid.subsets,
                       kid_subset_size=self.kid.subset_size, kid_protocol=self.kid.protocol)
        if self.prc is not None:
            out.update(precision=self.prc.precision, recall=self.prc.recall, f_score=self.prc.f_score,
                       prc_k=self.prc.k)
        if self.fid_inf is not None:
            out.update(fid_inf=self.fid_inf.intercept, fid_inf_fit=self.fid_inf.to_dict())
        if self.is_inf is not None:
            out.update(is_inf=self.is_inf.intercept, is_inf_fit=self.is_inf.to_dict())
        if self.coverage is not None:
            out.update(coverage=self.coverage.rows(), coverage_total_variation=self.coverage.total_variation)
        return out

    def summary(self) -> str:
        lines = []
        if self.fid is not None:
            lines += [f"features: {self.feature_note}", f"reference: {self.reference}",
                      f"{self.label}: {shown(self.fid)}   (N={self.n}; biased upward at small N: compare at equal N)"]
        if self.kid is not None:
            lines.append(f"KID: {shown(self.kid.mean, 6)} ± {shown(self.kid.std, 6)}   [{self.kid.protocol}]")
        if self.prc is not None:
            p = self.prc
            lines.append(f"precision {shown(p.precision)}, recall {shown(p.recall)}, F {shown(p.f_score)}   "
                         f"(k={p.k} nearest neighbours)")
        for fit in (self.fid_inf, self.is_inf):
            if fit is not None:
                metric = self.label if fit.metric == "FID" else fit.metric
                lines.append(f"{metric}_inf: {shown(fit.intercept)}   (slope {shown(fit.slope, 2)}; "
                             f"{fit.protocol})")
        if self.coverage is not None:
            lines.append(_coverage_line(self.coverage))
        return "\n".join(lines)


def _coverage_line(coverage: ClassCoverage) -> str:
    status = coverage.status
    parts = []
    for label in ("missing", "under", "over", "extra"):
        ks = [k for k in coverage.order("ratio", descending=label in ("over", "extra")) if status[k] == label]
        if ks:
            names = ", ".join(coverage.class_name(k) for k in ks[:COVERAGE_LISTED]) + (" ..." if len(ks) > 10 else "")
            parts.append(f"{label} {len(ks)}: {names}")
    listed = "; ".join(parts) if parts else "every class produced as often as in the reference"
    return f"coverage (top predictions vs the reference, total variation {shown(coverage.total_variation)}): {listed}"


def distance_report(
    features: np.ndarray | None,
    scores: ClassScores,
    reference: ReferenceSet | None,
    settings: DistanceSettings,
    class_names: Sequence[str] | None = None,
    label: str = "FID",
) -> DistanceReport:
    """The scores `settings` ask for: FID and coverage whenever there is a reference (coverage needs its
    predictions), IS_inf from the class scores when `settings.infinite`. `features` may be None without a
    reference."""
    n = scores.n_images
    report: dict[str, object] = {}
    if reference is not None:
        report["fid"] = reference.frechet.distance(gaussian_stats(features))
        if settings.kid:
            real = reference.require_features("KID")
            report["kid"] = kernel_inception_distance(features, real, settings.kid_subsets, settings.kid_subset_size,
                                                      settings.seed)
        if settings.prc:
            real = reference.require_features("precision and recall")
            report["prc"] = precision_recall(features, real, settings.prc_k,
                                             real_radii=reference.radii(settings.prc_k))
        if settings.infinite:
            report["fid_inf"] = extrapolate.fid_infinity(features, reference.frechet, settings.inf_points,
                                                         settings.inf_smallest, settings.seed)
        if reference.class_counts is not None:
            generated = np.bincount(scores.array.argmax(axis=1), minlength=scores.n_classes)
            report["coverage"] = class_coverage(reference.class_counts, generated, class_names)
    if settings.infinite:
        report["is_inf"] = extrapolate.is_infinity(scores, settings.inf_points, settings.inf_smallest, settings.seed)
    return DistanceReport(n, reference.feature_note if reference else "", reference.describe() if reference else "",
                          **report, label=label)
