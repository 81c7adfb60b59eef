"""The data-copying test of Meehan, Chaudhuri & Dasgupta (AISTATS 2020): does a generator put its samples closer to
its training images than fresh real images are?

Three feature sets: T (the generator's training images), P_n (held-out real images, never trained on) and Q_m (the
generated samples). The space is cut into cells; in cell pi, L_pi(X) are the distances of the points of X in pi to
their nearest training image in pi, and

    Z_U(pi) = (U - n m / 2) / sqrt(n m (n + m + 1) / 12),   U = sum over q in Q_pi, p in P_pi of 1[L(q) > L(p)]

(the Mann-Whitney U statistic of the generated distances against the held-out ones, ties counting 1/2, n and m the
cell's held-out and generated counts). Under the null hypothesis (generated and held-out points are as far from the
training set) Z_U is about N(0, 1); Z_U << 0 is data-copying, Z_U >> 0 underfitting. The statistic

    C_T = sum over pi in Pi_tau of P_n(pi) Z_U(pi) / sum over pi in Pi_tau of P_n(pi),   Pi_tau = {pi : Q_m(pi) >= tau}

averages the cells that hold at least a share tau of the generated samples (the paper uses tau = 20 / m: 20
samples), weighted by their share of held-out images. The authors' code subtracts a further 0.5 from the mean of U
(a continuity correction) and keeps cells with Q_m(pi) > tau; this module follows the paper's formulas.

Cells (our construction; the paper leaves the partition free and uses k-means on T in its experiments): k-means on
the training features (k-means++ seeding from `seed`, Lloyd's iterations by scipy.cluster.vq.kmeans2), each point in
the cell of its nearest centre; a centre left with no training image is dropped (its cell could not be measured),
and held-out and generated points go to the nearest remaining centre. Cells without held-out images weigh 0.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from probescope.core.errors import InputError, Note
from probescope.core.scoring.copy_test import same_images
from probescope.core.scoring.frechet import as_features, feature_sets
from probescope.core.scoring.precision_recall import distance_blocks
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report

DEFAULT_CELLS = 10
MIN_CELL_SAMPLES = 20  # tau = MIN_CELL_SAMPLES / m, the paper's choice
MAX_CELLS = 1000


@dataclass(frozen=True)
class DataCopying:
    """C_T and what it is made of, per cell (cells in k-means order)."""

    statistic: float  # C_T; NaN when no cell holds tau of the generated samples and some held-out images
    tau: float
    cell_z: np.ndarray  # Z_U per cell, NaN for cells outside Pi_tau or without held-out images
    test_share: np.ndarray  # P_n(pi)
    generated_share: np.ndarray  # Q_m(pi)
    train_counts: np.ndarray  # training images per cell
    in_training: int = 0  # held-out images that are training images (distance 0): not held out at all

    @property
    def cells(self) -> int:
        return len(self.cell_z)

    @property
    def cells_used(self) -> int:
        return int(np.isfinite(self.cell_z).sum())

    def to_dict(self) -> dict:
        return {"data_copying_ct": None if math.isnan(self.statistic) else self.statistic,
                "data_copying_cells": self.cells, "data_copying_cells_used": self.cells_used,
                "data_copying_tau": self.tau, "data_copying_held_out_in_training": self.in_training}


def nearest_distance(points: np.ndarray, train: np.ndarray) -> np.ndarray:
    """Each point's Euclidean distance to its nearest training point, (N,) float64."""
    out = np.empty(len(points))
    for start, dist in distance_blocks(points, train):
        out[start:start + len(dist)] = dist.min(axis=1)
    return out


def nearest_centre(points: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """The index of each point's nearest centre (the first on ties)."""
    out = np.empty(len(points), np.int64)
    for start, dist in distance_blocks(points, centres):
        out[start:start + len(dist)] = dist.argmin(axis=1)
    return out


def mann_whitney_z(generated: np.ndarray, held_out: np.ndarray) -> float:
    """Z_U of generated distances against held-out distances: U counts pairs with generated > held-out (ties 1/2),
    from ranks in O((n + m) log(n + m))."""
    m, n = len(generated), len(held_out)
    from scipy.stats import rankdata  # (scipy.stats: 0.65 s to import; the window and --help import this module)

    ranks = rankdata(np.concatenate([generated, held_out]))  # average ranks: a tie counts 1/2 each way
    u = ranks[:m].sum() - m * (m + 1) / 2.0
    return float((u - n * m / 2.0) / math.sqrt(n * m * (n + m + 1) / 12.0))


def training_cells(train: np.ndarray, cells: int = DEFAULT_CELLS, seed: int = 0) -> np.ndarray:
    """Centres of the partition: k-means on the training features, centres without a training image dropped."""
    train = as_features(train, "training features")
    if not 1 <= cells <= min(MAX_CELLS, len(train)):
        raise InputError(f"the data-copying test needs 1 to {min(MAX_CELLS, len(train))} cells (at most one per "
                         f"training image), got {cells}")
    data = np.asarray(train, dtype=np.float64)
    with warnings.catch_warnings():  # an empty cluster is dropped below; scipy's warning would only alarm
        warnings.simplefilter("ignore", UserWarning)
        from scipy.cluster.vq import kmeans2  # (scipy: the window and --help import this module)

        centres, _ = kmeans2(data, cells, minit="++", seed=np.random.default_rng(seed), missing="warn")
    owners = np.bincount(nearest_centre(data, centres), minlength=len(centres))
    return centres[owners > 0]


def data_copying(train: np.ndarray, held_out: np.ndarray, generated: np.ndarray, cells: int = DEFAULT_CELLS,
                 tau: float | None = None, seed: int = 0, *, progress: ProgressCallback | None = None,
                 cancel: CancelCheck | None = None) -> DataCopying:
    """C_T of `generated` against the training set `train` and held-out real images `held_out` (features with
    the same dimensions). `tau` defaults to 20 / m."""
    train, held_out, generated = feature_sets(training=train, held_out=held_out, generated=generated)
    if tau is None and len(generated) < MIN_CELL_SAMPLES:
        raise InputError(f"the data-copying test needs at least {MIN_CELL_SAMPLES} generated samples (a cell counts "
                         f"when it holds {MIN_CELL_SAMPLES}), got {len(generated)}")
    tau = MIN_CELL_SAMPLES / len(generated) if tau is None else float(tau)
    if not 0.0 <= tau <= 1.0:
        raise InputError(f"tau (the share of generated samples a cell needs) must lie in [0, 1], got {tau}")
    report(progress, 0.0, "data-copying test: cells")
    centres = training_cells(train, cells, seed)
    labels = [nearest_centre(x, centres) for x in (train, held_out, generated)]
    k = len(centres)
    counts = [np.bincount(lb, minlength=k) for lb in labels]
    test_share, generated_share = counts[1] / len(held_out), counts[2] / len(generated)
    z = np.full(k, np.nan)
    for c in range(k):
        check_cancel(cancel)
        report(progress, c / k, f"data-copying test: cell {c + 1}/{k}")
        if counts[1][c] == 0 or counts[2][c] == 0 or generated_share[c] < tau:
            continue
        cell_train = train[labels[0] == c]
        z[c] = mann_whitney_z(nearest_distance(generated[labels[2] == c], cell_train),
                              nearest_distance(held_out[labels[1] == c], cell_train))
    same = same_images(nearest_distance(held_out, train), train)  # held-out images found among the training ones
    if same:
        warnings.warn(Note(f"data-copying test: {same} of {len(held_out)} held-out images are also in the training "
                           "set (distance 0): the held-out set must be images the generator never saw"), stacklevel=2)
    used = np.isfinite(z)
    weight = test_share[used].sum()
    statistic = float(test_share[used] @ z[used] / weight) if weight > 0 else math.nan
    report(progress, 1.0, "data-copying test done")
    return DataCopying(statistic, tau, z, test_share, generated_share, counts[0], same)
