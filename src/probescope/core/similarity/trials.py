"""Rank trials stored as arrays, and the enumeration of their outcomes.

A rank trial shows a query and `r` references; the participant picks `c` of them in order (8-rank-2: r = 8, c = 2).
Trials are columns of numpy arrays, never one Python object per trial, so every computation vectorises over trials.

Outcome index rule: an outcome is the ordered tuple of chosen reference *positions* (p_1, ..., p_c), and its index is
its rank among all `r!/(r-c)!` such tuples in lexicographic order (the order of `itertools.permutations(range(r), c)`).
Equivalently index = sum_k rank_k * P(r-1-k, c-1-k), where rank_k is p_k minus the number of earlier picks below p_k
and P(a, b) = a!/(a-b)!. For 8-rank-2: index = 7 * p_1 + p_2 - (p_2 > p_1), 56 outcomes.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass, fields

import numpy as np

from probescope.core.errors import InputError

PAD = -1  # padding for references and choices
MAX_ID = 2**31 - 1  # psiz stores ids as int32; a larger one names no stimulus of any catalog that fits in memory


def whole_ids(values: np.ndarray, low: int, path: object, where: Callable[[int], str],
              name: str = "stimulus id") -> np.ndarray:
    """`values` (a numeric array, one row per trial) as int64, each a whole number from `low` to MAX_ID; InputError
    naming `path` and the trial (`where(row)`) of the first that is not: a float id is never truncated (8.5 is no
    stimulus), a NaN never taken for padding, 1e30 never wrapped round."""
    array = np.asarray(values)
    numeric = np.issubdtype(array.dtype, np.integer) or np.issubdtype(array.dtype, np.floating)
    if array.dtype == bool or not numeric:
        raise InputError(f"{name}s must be stored as numbers, not {array.dtype}", path)
    rows = array.reshape(len(array), -1)
    with np.errstate(invalid="ignore"):
        bad = (rows < low) | (rows > MAX_ID)
        if np.issubdtype(rows.dtype, np.floating):
            bad |= ~np.isfinite(rows) | (rows != np.floor(rows))
    if bad.any():
        row, col = np.argwhere(bad)[0]
        value = rows[row, col].item()
        why = ("not a number" if value != value else "not finite" if abs(value) == float("inf")
               else "not a whole number" if value != int(value) else f"out of range ({low} to {MAX_ID})")
        raise InputError(f"{where(int(row))}: {name} {value!r} is {why}", path)
    return rows.astype(np.int64).reshape(array.shape)


@dataclass(frozen=True)
class Trials:
    """Rank trials, one row per trial.

    query: (m,) stimulus ids (0-based). references: (m, R) stimulus ids in presentation order, PAD after the last.
    choices: (m, C) positions into `references` of the 1st, 2nd, ... pick, PAD where no pick (unanswered or fewer).
    session, participant: (m,) integer ids (-1 unknown). rt_ms: (m,) response time in ms (nan unknown).
    weight: (m,) sample weight of each trial's log-likelihood.
    """

    query: np.ndarray
    references: np.ndarray
    choices: np.ndarray
    session: np.ndarray
    participant: np.ndarray
    rt_ms: np.ndarray
    weight: np.ndarray

    def __post_init__(self) -> None:
        m = len(self.query)
        for f in fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, np.ndarray) or len(value) != m:
                raise ValueError(f"Trials.{f.name} must be an array with {m} rows")
        if self.references.ndim != 2 or self.choices.ndim != 2:
            raise ValueError("Trials.references and Trials.choices must be 2-D")
        n_ref = self.n_reference
        if m and (self.choices >= n_ref[:, None]).any():
            raise ValueError("a choice points past the trial's last reference")

    @staticmethod
    def make(
        query: np.ndarray,
        references: np.ndarray,
        choices: np.ndarray,
        session: np.ndarray | None = None,
        participant: np.ndarray | None = None,
        rt_ms: np.ndarray | None = None,
        weight: np.ndarray | None = None,
    ) -> Trials:
        """Build trials with the standard dtypes, filling missing columns (unknown ids, nan times, weight 1)."""
        query = np.asarray(query, dtype=np.int64).reshape(-1)
        m = len(query)
        references = np.asarray(references, dtype=np.int64).reshape(m, -1)
        choices = np.asarray(choices, dtype=np.int64).reshape(m, -1)

        def column(values: np.ndarray | None, fill: float, dtype: type) -> np.ndarray:
            if values is None:
                return np.full(m, fill, dtype=dtype)
            return np.asarray(values, dtype=dtype).reshape(m)

        return Trials(
            query,
            references,
            choices,
            column(session, -1, np.int64),
            column(participant, -1, np.int64),
            column(rt_ms, np.nan, np.float64),
            column(weight, 1.0, np.float64),
        )

    def __len__(self) -> int:
        return len(self.query)

    @property
    def n_reference(self) -> np.ndarray:
        return (self.references != PAD).sum(axis=1)

    @property
    def n_select(self) -> np.ndarray:
        return (self.choices != PAD).sum(axis=1)

    def subset(self, index: np.ndarray) -> Trials:
        """The trials selected by a boolean mask or an index array."""
        return Trials(**{f.name: getattr(self, f.name)[index] for f in fields(self)})

    def with_weight(self, weight: np.ndarray) -> Trials:
        return Trials(**{**{f.name: getattr(self, f.name) for f in fields(self)}, "weight": weight})

    def chosen_first_order(self) -> np.ndarray:
        """(m, R) positions into `references`: the picks in order, then the others in presentation order, then
        padding."""
        m, r = self.references.shape
        key = np.broadcast_to(np.arange(r, dtype=np.int64) + r, (m, r)).copy()
        rows = np.nonzero(self.choices != PAD)
        key[rows[0], self.choices[rows]] = rows[1]
        key[self.references == PAD] = 3 * r
        return np.argsort(key, axis=1, kind="stable")

    def chosen_first(self) -> np.ndarray:
        """References reordered as psiz stores them (see `chosen_first_order`): (m, R) ids, PAD at the end.

        The Luce likelihood of the observed outcome is read off this layout directly.
        """
        return np.take_along_axis(self.references, self.chosen_first_order(), axis=1)

    def outcome_index(self) -> np.ndarray:
        """(m,) index of each trial's observed outcome under the module's rule (see module docstring)."""
        return outcome_index(self.choices, self.n_reference)


def n_outcomes(r: int, c: int) -> int:
    return math.perm(r, c)


def outcome_table(r: int, c: int) -> np.ndarray:
    """(r!/(r-c)!, c) the chosen positions of every outcome, row = outcome index."""
    return np.array(list(itertools.permutations(range(r), c)), dtype=np.int64).reshape(-1, c)


def outcome_index(choices: np.ndarray, n_reference: np.ndarray | int) -> np.ndarray:
    """Outcome index of each row of chosen positions (m, c) among trials with `n_reference` references.

    Rows must have all `c` picks; the same rule as `outcome_table` (lexicographic rank).
    """
    choices = np.asarray(choices, dtype=np.int64)
    m, c = choices.shape
    r = np.broadcast_to(np.asarray(n_reference, dtype=np.int64), (m,))
    index = np.zeros(m, dtype=np.int64)
    for k in range(c):
        rank = choices[:, k] - (choices[:, :k] < choices[:, k : k + 1]).sum(axis=1)
        block = np.array([math.perm(x, c - 1 - k) for x in range(int(r.max(initial=0)))], dtype=np.int64)
        index += rank * block[r - 1 - k]
    return index


def prefix_table(r: int, c: int) -> tuple[np.ndarray, np.ndarray]:
    """What the Luce denominators of all outcomes need, for one log-sum-exp pass.

    Returns (excluded, step_prefix): excluded (P, r) bool marks the references already picked by each distinct ordered
    prefix of length 0..c-1; step_prefix (K, c) gives for outcome o and step k the row of its prefix outcome[o, :k].
    """
    prefixes: list[tuple[int, ...]] = []
    for k in range(c):
        prefixes.extend(itertools.permutations(range(r), k))
    lookup = {p: i for i, p in enumerate(prefixes)}
    excluded = np.zeros((len(prefixes), r), dtype=bool)
    for i, p in enumerate(prefixes):
        excluded[i, list(p)] = True
    table = outcome_table(r, c)
    step_prefix = np.array([[lookup[tuple(o[:k])] for k in range(c)] for o in table], dtype=np.int64).reshape(-1, c)
    return excluded, step_prefix


def n_triplets(r: int, c: int) -> int:
    """Triplets implied by an r-rank-c trial: pick k beats every reference not picked before it (13 for 8-rank-2)."""
    return sum(r - 1 - k for k in range(c))


def triplets(trials: Trials) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The implied triplets (query, closer, farther, trial row) of all trials, each as a flat array.

    Pick k of a trial is judged closer to the query than every reference not picked before it:
    for 8-rank-2 `q:a>b>[c..h]` gives q:a>b, q:a>c..h (7) and q:b>c..h (6).
    """
    ordered = trials.chosen_first()
    m, r = ordered.shape
    n_sel = trials.n_select
    k, j = np.triu_indices(r, 1)  # pick position k (chosen-first layout) against every later position j
    valid = (k[None, :] < n_sel[:, None]) & (ordered[:, j] != PAD)
    rows, pair = np.nonzero(valid)
    return trials.query[rows], ordered[rows, k[pair]], ordered[rows, j[pair]], rows
