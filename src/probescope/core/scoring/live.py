"""A running Inception Score over all images seen so far, updated one batch at a time.

With q = (1/N) sum_i p_i the current marginal,
    KL_i = sum_y p_iy log p_iy - sum_y p_iy log q_y,
    mean_i KL_i = mean_i sum_y p_iy log p_iy + H(q)   (since mean_i sum_y p_iy log q_y = sum_y q_y log q_y),
so the estimator keeps only sum_i p_i (n numbers) and sum_i sum_y p_iy log p_iy (one number): an update costs
O(batch x n) and reading IS costs O(n). Each image's own KL depends on the current marginal, so it is computed on
request from the kept rows (O(N x n)).

This is one estimate over all N images (the marginal from all of them): a different number from the split
protocol's mean over splits (protocol.split_inception_score); front ends show both, labelled.
"""

from __future__ import annotations

import copy
import math

import numpy as np

from probescope.core.errors import InputError
from probescope.core.scoring.distributions import (
    DEFAULT_SUM_TOLERANCE,
    UNITS,
    Rows,
    entropy,
    rows_from_logits,
    rows_from_probabilities,
    safe_log,
)


class LiveInceptionScore:
    """Running IS, entropies (in `unit`: 'nats' or 'bits'), argmax counts and the IS-vs-N history.

    keep_rows=False drops the per-image rows (then `contributions()` is unavailable) for very large N.
    """

    def __init__(
        self,
        n_classes: int | None = None,
        *,
        unit: str = "nats",
        keep_rows: bool = True,
        tolerance: float = DEFAULT_SUM_TOLERANCE,
    ):
        if unit not in UNITS:
            raise ValueError(f"unit must be one of {sorted(UNITS)}, not {unit!r}")
        self.unit = unit
        self.keep_rows = keep_rows
        self.tolerance = tolerance
        self._n_classes = n_classes
        self.reset()

    def reset(self) -> None:
        self._n = 0
        self._sum_p = None if self._n_classes is None else np.zeros(self._n_classes)
        self._sum_neg_entropy = 0.0
        self._argmax_counts = None if self._n_classes is None else np.zeros(self._n_classes, dtype=np.int64)
        self._rows = np.empty((0, self._n_classes or 0))
        self._neg_entropy = np.empty(0)
        self._history_n: list[int] = []
        self._history_is: list[float] = []

    # -- updates -------------------------------------------------------------------------------------------

    def add(self, probs_batch: np.ndarray) -> None:
        """Add a batch of probability rows (validated as in the batch computation)."""
        self.add_rows(rows_from_probabilities(np.atleast_2d(probs_batch), offset=self._n, tolerance=self.tolerance))

    def add_logits(self, logits_batch: np.ndarray) -> None:
        """Add a batch of logits (float64 log-softmax)."""
        self.add_rows(rows_from_logits(np.atleast_2d(logits_batch), offset=self._n))

    def add_rows(self, rows: Rows) -> None:
        m, n_classes = rows.p.shape
        if m == 0:
            return
        if self._sum_p is None:
            self._n_classes = n_classes
            self.reset()
        elif n_classes != self._n_classes:
            raise InputError(f"batch has {n_classes} classes, the estimator has {self._n_classes}")
        self._sum_p += rows.p.sum(axis=0)
        self._sum_neg_entropy += float(rows.neg_entropy.sum())
        self._argmax_counts += np.bincount(rows.p.argmax(axis=1), minlength=n_classes)
        if self.keep_rows:
            self._append_rows(rows)
        self._n += m
        self._history_n.append(self._n)
        self._history_is.append(self.is_)

    def _append_rows(self, rows: Rows) -> None:
        m = len(rows.neg_entropy)
        if self._n + m > len(self._neg_entropy):  # grow geometrically: amortised O(batch x n) per update
            capacity = max(self._n + m, 2 * len(self._neg_entropy), 256)
            grown = np.empty((capacity, self._n_classes))
            grown[: self._n] = self._rows[: self._n]
            self._rows = grown
            neg = np.empty(capacity)
            neg[: self._n] = self._neg_entropy[: self._n]
            self._neg_entropy = neg
        self._rows[self._n : self._n + m] = rows.p
        self._neg_entropy[self._n : self._n + m] = rows.neg_entropy

    def copy(self) -> LiveInceptionScore:
        """An independent copy in O(classes + batches), for a snapshot taken in the GUI thread (a deep copy walked
        the IS-vs-N history's Python numbers one by one: 71 ms at 12,000 batches). The kept rows are shared: appends
        write only past the rows the copy counts."""
        twin = copy.copy(self)
        if self._sum_p is not None:
            twin._sum_p, twin._argmax_counts = self._sum_p.copy(), self._argmax_counts.copy()
        twin._history_n, twin._history_is = list(self._history_n), list(self._history_is)
        return twin

    # -- state ---------------------------------------------------------------------------------------------

    @property
    def n(self) -> int:
        return self._n

    @property
    def n_classes(self) -> int | None:
        return self._n_classes

    def _require_images(self) -> None:
        if self._n == 0:
            raise InputError("no images scored yet")

    @property
    def marginal(self) -> np.ndarray:
        """The current p(y) = mean of the rows seen."""
        self._require_images()
        return self._sum_p / self._n

    @property
    def marginal_entropy(self) -> float:
        """H(p(y)) in the estimator's unit."""
        return entropy(self.marginal) * UNITS[self.unit]

    @property
    def conditional_entropy(self) -> float:
        """Mean over images of H(p(y|x)) in the estimator's unit."""
        self._require_images()
        return -self._sum_neg_entropy / self._n * UNITS[self.unit]

    @property
    def mutual_information(self) -> float:
        """H(p(y)) - mean H(p(y|x)) = mean KL = log IS, in the estimator's unit (never below 0)."""
        self._require_images()
        return self._mi_nats() * UNITS[self.unit]

    def _mi_nats(self) -> float:
        # Mathematically >= 0; rounding can make identical rows give -1e-17.
        return max(entropy(self.marginal) + self._sum_neg_entropy / self._n, 0.0)

    @property
    def is_(self) -> float:
        """exp(mean KL): the same number whatever the unit (2**bits == e**nats)."""
        self._require_images()
        return math.exp(self._mi_nats())

    @property
    def argmax_counts(self) -> np.ndarray:
        """How many images each class is the top prediction for."""
        self._require_images()
        return self._argmax_counts.copy()

    @property
    def classes_never_predicted(self) -> np.ndarray:
        """Indices of classes that are no image's top prediction: the modes a generator dropped."""
        return np.flatnonzero(self.argmax_counts == 0)

    @property
    def history(self) -> tuple[np.ndarray, np.ndarray]:
        """(N after each update, IS after each update): the estimate as a function of the sample size."""
        return np.array(self._history_n, dtype=np.int64), np.array(self._history_is)

    def contributions(self) -> np.ndarray:
        """Each image's KL(p(y|x_i) || current p(y)) in the estimator's unit; their mean is log IS."""
        self._require_images()
        if not self.keep_rows:
            raise InputError("per-image contributions need keep_rows=True")
        kl = self._neg_entropy[: self._n] - np.einsum("ij,j->i", self._rows[: self._n], safe_log(self.marginal))
        return kl * UNITS[self.unit]

    def probabilities(self) -> np.ndarray:
        """The kept rows p(y|x_i), in the order they were added (a read-only view)."""
        self._require_images()
        if not self.keep_rows:
            raise InputError("the rows were not kept (keep_rows=False)")
        view = self._rows[: self._n]
        view.flags.writeable = False
        return view
