"""The per-sample table of `probescope score --per-image OUT.csv`: one row per generated sample, in input order.

Columns: `index` (the sample's position in the input), `kl` (KL(p(y|x) || p(y)) in nats, its contribution to
log IS), `realism`, `nearest_reference` and `nearest_distance` (the nearest reference image, by its index in the
reference's own order, and its feature distance), the calibrated copy test (copy_test.py): `copy_p_value`, its
conformal p-value, `possible_copy` (0/1: p <= alpha) and `copied_reference` (the nearest reference image of a
flagged sample, -1 if none), then `nearest_reference_j` / `nearest_distance_j` for the j-th nearest, j = 2..k (see
realism.py). Without reference features (no reference, or a mu/sigma file) the columns after `kl` are empty.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path

import numpy as np

from probescope.core.atomic import write_text
from probescope.core.errors import InputError
from probescope.core.scoring.realism import SampleNeighbours

BASE_COLUMNS = ("index", "kl", "realism", "nearest_reference", "nearest_distance", "copy_p_value", "possible_copy",
                "copied_reference")


def columns(k: int) -> list[str]:
    """The header for neighbourhoods of size k."""
    return [*BASE_COLUMNS, *(f"{what}_{j}" for j in range(2, k + 1)
                             for what in ("nearest_reference", "nearest_distance"))]


def per_image_csv(kl: np.ndarray, neighbours: SampleNeighbours | None, k: int) -> str:
    """The table's text (floats written in full: repr)."""
    if neighbours is not None and len(neighbours.realism) != len(kl):
        raise InputError(f"{len(kl)} KL values but {len(neighbours.realism)} samples with neighbours")
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    header = columns(k if neighbours is None else neighbours.k)
    writer.writerow(header)
    for i, value in enumerate(np.asarray(kl, dtype=np.float64).tolist()):
        row: list = [i, value]
        if neighbours is None:
            row += [""] * (len(header) - 2)
        else:
            p = "" if neighbours.copy is None else float(neighbours.copy.p_value[i])
            row += [float(neighbours.realism[i]), int(neighbours.nearest[i, 0]), float(neighbours.distances[i, 0]),
                    p, int(neighbours.possible_copy[i]), int(neighbours.copied[i])]
            for j in range(1, neighbours.k):
                row += [int(neighbours.nearest[i, j]), float(neighbours.distances[i, j])]
        writer.writerow(row)
    return buf.getvalue()


def write_per_image(path: str | Path, kl: np.ndarray, neighbours: SampleNeighbours | None, k: int) -> None:
    """Write the table atomically (a failed run leaves any previous file as it was)."""
    write_text(path, per_image_csv(kl, neighbours, k))
