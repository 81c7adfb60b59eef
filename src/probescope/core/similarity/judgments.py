"""What every judgments reader returns (`Judgments`: trials with 0-based ids, their catalog and the reader's notes) and
the checks every reader makes of the ids it read (probescope.core.similarity.readers reads the layouts).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from probescope.core.errors import InputError
from probescope.core.similarity.catalog import Catalog
from probescope.core.similarity.trials import PAD, Trials


@dataclass(frozen=True)
class Judgments:
    """Trials read from a file, their catalog, and what the reader noticed (index base, simulated data...)."""

    trials: Trials
    catalog: Catalog | None
    source: Path
    format: str
    notes: tuple[str, ...] = ()
    session_grade: dict[int, float] = field(default_factory=dict)  # grades the file itself gives, in [0, 1]
    test: Trials | None = None  # held-out trials the release ships separately (zip `test_seqs/`)

    @property
    def n_stimuli(self) -> int:
        if self.catalog is not None:
            return len(self.catalog)
        top = [int(t.references.max(initial=-1)) for t in (self.trials, self.test) if t is not None and len(t)]
        top += [int(t.query.max()) for t in (self.trials, self.test) if t is not None and len(t)]
        return max(top, default=-1) + 1

    @property
    def simulated(self) -> bool:
        return bool(self.catalog is not None and self.catalog.simulated)


def check_ids(trials: Trials, n: int, path: Path, where=lambda row: f"trial {row}") -> None:
    """Every id of every trial names one of the catalog's `n` stimuli; InputError naming the first trial that does
    not (`where(row)` says how the file calls it)."""
    ids = np.concatenate([trials.query[:, None], trials.references], axis=1)
    outside = ((ids < 0) & (ids != PAD)) | (ids >= n)
    outside[:, 0] |= ids[:, 0] < 0
    if outside.any():
        row, col = np.argwhere(outside)[0]
        raise InputError(f"{where(int(row))}: stimulus {ids[row, col]} (counting from 0) is out of range: the catalog "
                         f"has {n} stimuli", path)


def check_distinct_references(references: np.ndarray, path: Path, row_name) -> None:
    """A stimulus shown twice in one trial makes its triplet 'q: s > s', wrong whatever the model does: refused."""
    ordered = np.sort(references, axis=1)
    twice = (ordered[:, 1:] == ordered[:, :-1]) & (ordered[:, 1:] != PAD)
    if twice.any():
        row, col = np.argwhere(twice)[0]
        raise InputError(f"{row_name(row)}: stimulus {ordered[row, col + 1]} appears twice among the references",
                         path)
