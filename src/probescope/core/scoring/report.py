"""Everything the score command and the GUI show about one set of class scores, from two passes over the rows.

Pass 1 (input order) feeds the split protocol and a live estimator cut at the IS-vs-N checkpoints; pass 2
computes each image's KL against the marginal of all N images (needs that marginal, hence a second pass).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from probescope.core.scoring.distributions import UNITS, ClassScores, Rows, safe_log
from probescope.core.scoring.live import LiveInceptionScore
from probescope.core.scoring.splits import DEFAULT_SEED, DEFAULT_SPLITS, SplitAccumulator, SplitScore, check_splits

CURVE_POINTS = 40


@dataclass(frozen=True)
class ScoreReport:
    """Scores and diagnostics of N images. Entropies are stored in nats; `unit` is how to show them."""

    n: int
    n_classes: int
    split: SplitScore
    is_all: float  # one estimate over all N images, input order, no splits
    marginal_entropy: float
    conditional_entropy: float
    mutual_information: float  # = log is_all
    marginal: np.ndarray  # p(y), (n_classes,)
    argmax_counts: np.ndarray  # (n_classes,) images whose top prediction is each class
    contributions: np.ndarray  # (N,) KL(p(y|x_i) || p(y)) in nats, input order; mean = mutual_information
    curve_n: np.ndarray  # IS over the first curve_n[k] images (input order) ...
    curve_is: np.ndarray  # ... is curve_is[k]
    class_names: tuple[str, ...] | None = None
    unit: str = "nats"

    @property
    def classes_never_predicted(self) -> np.ndarray:
        """Classes no image has as its top prediction (mode dropping)."""
        return np.flatnonzero(self.argmax_counts == 0)

    def class_name(self, k: int) -> str:
        return self.class_names[k] if self.class_names is not None else str(k)

    def ranked_images(self, k: int = 5) -> tuple[np.ndarray, np.ndarray]:
        """Indices of the k most and the k least contributing images (largest / smallest KL first)."""
        order = np.argsort(-self.contributions, kind="stable")
        return order[:k], order[::-1][:k]

    def in_unit(self, nats: float) -> float:
        return nats * UNITS[self.unit]

    def to_dict(self, top_k: int = 5) -> dict:
        """JSON-ready summary: entropies in nats (and in bits as well when the report's unit is bits)."""
        most, least = self.ranked_images(top_k)
        out = {
            "n": self.n,
            "n_classes": self.n_classes,
            "splits": self.split.splits,
            "shuffle": self.split.shuffle,
            "seed": self.split.seed,
            "is_mean": self.split.mean,
            "is_std": self.split.std,
            "is_splits": list(self.split.scores),
            "is_all": self.is_all,
            "marginal_entropy": self.marginal_entropy,
            "conditional_entropy": self.conditional_entropy,
            "mutual_information": self.mutual_information,
            "unit": "nats",
            "classes_never_predicted": [int(k) for k in self.classes_never_predicted],
            "argmax_counts": [int(c) for c in self.argmax_counts],
            "most_contributing": [{"index": int(i), "kl": float(self.contributions[i])} for i in most],
            "least_contributing": [{"index": int(i), "kl": float(self.contributions[i])} for i in least],
            "is_vs_n": {"n": [int(v) for v in self.curve_n], "is": [float(v) for v in self.curve_is]},
            "protocol": self.split.protocol,
        }
        if self.class_names is not None:
            out["class_names"] = list(self.class_names)
            out["classes_never_predicted_names"] = [self.class_name(k) for k in self.classes_never_predicted]
        if self.unit == "bits":
            for key in ("marginal_entropy", "conditional_entropy", "mutual_information"):
                out[f"{key}_bits"] = self.in_unit(out[key])
        return out

    def summary(self, top_k: int = 5) -> str:
        """A readable multi-line summary for the terminal (rounded: the raw values are in `to_dict`)."""
        u = self.unit
        s = self.split
        lines = [
            f"Inception Score (split protocol): {shown(s.mean)} ± {shown(s.std)}   [{s.protocol}]",
            f"Inception Score (all {self.n} images, one marginal): {shown(self.is_all)}",
            f"H(p(y))            marginal entropy     {shown(self.in_unit(self.marginal_entropy))} {u}"
            f"   (max log n = {shown(self.in_unit(math.log(self.n_classes)))})",
            f"E_x H(p(y|x))      conditional entropy  {shown(self.in_unit(self.conditional_entropy))} {u}",
            f"I(X;Y) = log IS    mutual information   {shown(self.in_unit(self.mutual_information))} {u}",
        ]
        never = self.classes_never_predicted
        names = ", ".join(self.class_name(k) for k in never[:20]) + (" ..." if len(never) > 20 else "")
        listed = f": {names}" if len(never) else ""
        lines.append(f"classes never predicted: {len(never)} of {self.n_classes}{listed}")
        top = np.argsort(-self.argmax_counts, kind="stable")[: min(top_k, self.n_classes)]
        lines.append("most predicted: " + ", ".join(f"{self.class_name(k)} ({self.argmax_counts[k]})" for k in top))
        most, least = self.ranked_images(top_k)
        for label, images in (("most", most), ("least", least)):
            kls = ", ".join(f"#{i} ({shown(self.contributions[i], 3)})" for i in images)
            lines.append(f"{label} contributing images: {kls}")
        lines.append(
            "IS vs N: " + ", ".join(f"{n}:{shown(v, 3)}" for n, v in zip(self.curve_n[-6:], self.curve_is[-6:],
                                                                         strict=True))
        )
        return "\n".join(lines)


def shown(x: float, digits: int = 4) -> str:
    """`x` rounded for display: IS 0.9999999999999976 shows as 1.0000 and rounding noise below zero never as
    -0.0000 (JSON output keeps the raw values)."""
    return f"{round(float(x), digits) + 0.0:.{digits}f}"


def curve_checkpoints(n: int, points: int = CURVE_POINTS) -> np.ndarray:
    """Roughly log-spaced sample sizes 1 .. n at which IS-vs-N is recorded."""
    return np.unique(np.round(np.geomspace(1, n, num=min(points, n))).astype(np.int64))


def score_report(
    scores: ClassScores,
    splits: int = DEFAULT_SPLITS,
    shuffle: bool = True,
    seed: int = DEFAULT_SEED,
    *,
    unit: str = "nats",
    class_names: Sequence[str] | None = None,
    curve_points: int = CURVE_POINTS,
) -> ScoreReport:
    """Split-protocol IS, the all-images IS, entropies and diagnostics of `scores`."""
    check_splits(scores.n_images, splits)
    if class_names is not None and len(class_names) != scores.n_classes:
        class_names = None  # names that do not fit the classifier output are not shown
    acc = SplitAccumulator(scores.n_images, scores.n_classes, splits, shuffle, seed)
    live = LiveInceptionScore(scores.n_classes, keep_rows=False)
    checkpoints = curve_checkpoints(scores.n_images, curve_points)
    for start, rows in scores.blocks():
        stop = start + len(rows.neg_entropy)
        acc.add(start, rows)
        cuts = [start, *checkpoints[(checkpoints > start) & (checkpoints < stop)].tolist(), stop]
        for a, b in zip(cuts[:-1], cuts[1:], strict=True):
            live.add_rows(Rows(rows.p[a - start : b - start], rows.neg_entropy[a - start : b - start]))
    log_q = safe_log(live.marginal)
    contributions = np.empty(scores.n_images)
    for start, rows in scores.blocks():
        contributions[start : start + len(rows.neg_entropy)] = rows.neg_entropy - np.einsum("ij,j->i", rows.p, log_q)
    curve_n, curve_is = live.history
    keep = np.isin(curve_n, checkpoints)
    return ScoreReport(
        n=scores.n_images,
        n_classes=scores.n_classes,
        split=acc.result(),
        is_all=live.is_,
        marginal_entropy=live.marginal_entropy,
        conditional_entropy=live.conditional_entropy,
        mutual_information=live.mutual_information,
        marginal=live.marginal,
        argmax_counts=live.argmax_counts,
        contributions=contributions,
        curve_n=curve_n[keep],
        curve_is=curve_is[keep],
        class_names=tuple(class_names) if class_names is not None else None,
        unit=unit,
    )
