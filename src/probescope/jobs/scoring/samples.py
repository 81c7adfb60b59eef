"""The gallery's per-image scores, held in the GUI thread: the live estimator plus what sorting and filtering need.

Batches of logits (or probability rows) arrive from the stream; each costs O(batch x classes). The estimator keeps
the rows, so each image's KL against the *current* marginal (which moves with every batch) is computed on request
and cached until the next batch. Predicted class, confidence and entropy never change once an image is scored, so
they are kept in growing arrays for cheap sorting of 50,000 images.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probescope.core.atomic import atomic_open
from probescope.core.scoring.distributions import Rows, rows_from_logits, rows_from_probabilities, safe_log
from probescope.core.scoring.live import LiveInceptionScore

TOP_K = 3  # classes drawn under each thumbnail

# Sort keys: what the user sees, and whether "largest first" is the natural direction.
SORT_KEYS: dict[str, str] = {
    "index": "sample",
    "kl": "KL contribution",
    "entropy": "H(p(y|x))",
    "class": "predicted class",
    "confidence": "confidence",
    "realism": "realism",  # against the reference (realism.py); samples not measured yet come last
}
MEASURED_KEYS = ("realism", "possible_copy")  # per-sample numbers against real data, handed in as `measured`
FILTER_KEYS = ("kl", "entropy", "confidence")
NO_INFORMATION = 1e-12  # log IS (nats) below this is rounding: IS = 1, and shares of log IS are undefined

KL_BADGE_LIMIT = 2_000_000  # images x classes up to which every cell's KL badge follows the live marginal


@dataclass(frozen=True)
class Decomposition:
    """The seed's decomposition at one moment: H(p(y)) - mean H(p(y|x)) = I(X;Y) = log IS (nats)."""

    n: int
    is_: float
    marginal_entropy: float
    conditional_entropy: float
    mutual_information: float
    marginal: np.ndarray
    argmax_counts: np.ndarray

    @property
    def never_predicted(self) -> np.ndarray:
        return np.flatnonzero(self.argmax_counts == 0)


class _Growing:
    """A 1-D or 2-D array that grows by whole batches with amortised O(1) appends."""

    def __init__(self, dtype, width: int | None = None):
        self._dtype, self._width = dtype, width
        self._data = np.empty((0,) if width is None else (0, width), dtype=dtype)
        self._n = 0

    def append(self, values: np.ndarray) -> None:
        m = len(values)
        if self._n + m > len(self._data):
            grown = np.empty((max(self._n + m, 2 * len(self._data), 256), *self._data.shape[1:]), self._dtype)
            grown[: self._n] = self._data[: self._n]
            self._data = grown
        self._data[self._n : self._n + m] = values
        self._n += m

    @property
    def values(self) -> np.ndarray:
        return self._data[: self._n]


class GalleryScores:
    """Everything the gallery knows about the scored images, in the order they were scored."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self.live = LiveInceptionScore()
        self._pred = _Growing(np.int32)
        self._conf = _Growing(np.float64)
        self._entropy = _Growing(np.float64)
        self._top = _Growing(np.int32, TOP_K)
        self._top_p = _Growing(np.float32, TOP_K)
        self._kl: np.ndarray | None = None
        self.measured: dict[str, np.ndarray] = {}  # MEASURED_KEYS -> values of the first samples (SampleRealism)

    # -- updates ----------------------------------------------------------------------------------------------------
    def add_logits(self, logits: np.ndarray) -> None:
        self.add_rows(rows_from_logits(np.atleast_2d(logits), offset=self.n))

    def add_probabilities(self, probs: np.ndarray) -> None:
        self.add_rows(rows_from_probabilities(np.atleast_2d(probs), offset=self.n))

    def add_rows(self, rows: Rows) -> None:
        if len(rows.neg_entropy) == 0:
            return
        self.live.add_rows(rows)
        p = rows.p
        k = min(TOP_K, p.shape[1])
        top = np.argsort(-p, axis=1, kind="stable")[:, :k]
        if k < TOP_K:  # fewer classes than bars: pad with class -1 at probability 0
            top = np.pad(top, ((0, 0), (0, TOP_K - k)), constant_values=-1)
        top_p = np.where(top >= 0, np.take_along_axis(p, np.maximum(top, 0), axis=1), 0.0)
        self._pred.append(top[:, 0])
        self._conf.append(top_p[:, 0])
        self._entropy.append(-rows.neg_entropy)
        self._top.append(top)
        self._top_p.append(top_p)
        self._kl = None

    # -- reading ----------------------------------------------------------------------------------------------------
    @property
    def n(self) -> int:
        return self.live.n

    @property
    def n_classes(self) -> int | None:
        return self.live.n_classes

    def decomposition(self) -> Decomposition | None:
        if self.n == 0:
            return None
        live = self.live
        return Decomposition(self.n, live.is_, live.marginal_entropy, live.conditional_entropy,
                             live.mutual_information, live.marginal, live.argmax_counts)

    def kl(self) -> np.ndarray:
        """KL(p(y|x_i) || current p(y)) in nats for every image; their mean is log IS."""
        if self._kl is None:
            self._kl = self.live.contributions() if self.n else np.empty(0)
        return self._kl

    def kl_of(self, i: int) -> float:
        """Image i's KL against the current marginal in O(classes), without computing every image's."""
        if self._kl is not None:
            return float(self._kl[i])
        p = self.probabilities(i)
        return float(-self.entropy[i] - p @ safe_log(self.live.marginal))

    def share_of_log_is(self, i: int) -> float:
        """Image i's part of log IS: KL_i / sum_j KL_j = KL_i / (N log IS) (NaN when IS = 1)."""
        total = self.n * self.live.mutual_information
        return self.kl_of(i) / total if total > NO_INFORMATION * self.n else math.nan

    @property
    def predicted(self) -> np.ndarray:
        return self._pred.values

    @property
    def confidence(self) -> np.ndarray:
        return self._conf.values

    @property
    def entropy(self) -> np.ndarray:
        """H(p(y|x_i)) in nats."""
        return self._entropy.values

    @property
    def top_classes(self) -> np.ndarray:
        """(N, TOP_K) most probable classes per image (-1 pads when there are fewer classes)."""
        return self._top.values

    @property
    def top_probs(self) -> np.ndarray:
        return self._top_p.values

    def probabilities(self, i: int) -> np.ndarray:
        """The full p(y|x_i)."""
        return self.live.probabilities()[i]

    def values(self, key: str) -> np.ndarray:
        """The per-image quantity behind a sort or filter key."""
        if key == "index":
            return np.arange(self.n)
        if key == "kl":
            return self.kl()
        if key == "entropy":
            return self.entropy
        if key == "class":
            return self.predicted
        if key == "confidence":
            return self.confidence
        if key in MEASURED_KEYS:  # NaN for the samples not measured (yet)
            known = self.measured.get(key, np.empty(0))[: self.n]
            return np.concatenate([known, np.full(self.n - len(known), np.nan)])
        raise ValueError(f"unknown key {key!r} (one of {', '.join(SORT_KEYS)})")

    def order(self, key: str = "index", descending: bool = False, class_filter: int | None = None,
              value_filter: tuple[str, float, float] | None = None, copies_only: bool = False) -> np.ndarray:
        """Image indices to show: those of `class_filter` (predicted class) with `value_filter`'s quantity in
        [low, high] (and flagged as possible copies with `copies_only`), sorted by `key` (stable, so ties keep
        sample order)."""
        keep = self.values("possible_copy") == 1.0 if copies_only else np.ones(self.n, dtype=bool)
        if class_filter is not None:
            keep &= self.predicted == class_filter
        if value_filter is not None:
            name, low, high = value_filter
            v = self.values(name)
            keep &= (v >= low) & (v <= high)
        idx = np.flatnonzero(keep)
        if key == "index":
            return idx[::-1] if descending else idx
        v = self.values(key)[idx]
        return idx[np.argsort(-v if descending else v, kind="stable")]

    def badges(self, key: str, value_filter: tuple | None) -> tuple[np.ndarray | None, str]:
        """Each cell's badge and its name: KL against the current marginal, or the confidence past KL_BADGE_LIMIT
        (every image's KL costs O(N x classes) after each batch) unless the view sorts or filters by KL anyway."""
        if not self.n:
            return None, "p"
        if key == "realism":
            return self.values("realism"), "R"
        uses_kl = key == "kl" or (value_filter or ("",))[0] == "kl"
        if uses_kl or self.n * (self.n_classes or 0) <= KL_BADGE_LIMIT:
            return self.kl(), "KL"
        return self.confidence, "p"

    def notes(self, i: int) -> str:
        """What the large view says under image i."""
        return (f"image {i} of {self.n:,}; H(p(y|x)) = {float(self.entropy[i]):.3f} nats; KL against the "
                f"marginal {self.kl_of(i):.3f} nats")

    def write_csv(self, path: str | Path, class_names: Sequence[str] | None = None) -> Path:
        """Per-image scores as CSV (atomic): class, confidence, entropy, KL and share of log IS."""
        path = Path(path)
        kl = self.kl()
        total = float(kl.sum())
        with atomic_open(path, "w", encoding="utf-8", newline="") as fh:
            out = csv.writer(fh)
            out.writerow(["index", "predicted_class", "predicted_name", "confidence", "entropy_nats", "kl_nats",
                          "share_of_log_is"])
            for i in range(self.n):
                c = int(self.predicted[i])
                name = class_names[c] if class_names is not None and c < len(class_names) else str(c)
                share = kl[i] / total if total > NO_INFORMATION * self.n else math.nan
                out.writerow([i, c, name, f"{self.confidence[i]:.6g}", f"{self.entropy[i]:.6g}", f"{kl[i]:.6g}",
                              f"{share:.6g}"])
        return path
