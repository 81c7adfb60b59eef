"""Beam search for compositional explanations, and the explanation choices built on its sequence of beams.

The beam is always ranked by IoU, so the IoU search, the length sweep, `da-select` and `da-stop` all walk the same
sequence of beams and differ only in which beam formula they pick and when they stop; the sequence is computed once
per unit, as far as the most demanding choice needs it.

Rules (fixed, so that every implementation finds the same formulas):
- Atoms are the concepts that pass the minimum-images filter and touch the unit's mask (IoU > 0). The initial beam
  holds the top `beam_size` of them by IoU; the candidate atoms are the top `beam_limit` (all when 0).
- A step grows every beam formula f by every candidate atom c not already in f into `(f OR c)`, `(f AND c)`,
  `(f AND NOT c)`, merges these with the beam and keeps the top `beam_size` by IoU.
- Ties (equal IoU) go to fewer atoms, then to lower label numbers in order of appearance, then to OR < AND < AND NOT
  (`Formula.sort_key`). For `da-select`, ties in DA go to the better-ranked (higher-IoU) beam formula.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from probescope.core.dissection.formula import OPERATORS, Formula


class Scorer(Protocol):
    concepts: np.ndarray

    def atom_ious(self) -> np.ndarray: ...

    def expand(self, f: Formula, candidates: np.ndarray) -> np.ndarray: ...

    def da(self, f: Formula) -> float: ...


@dataclass(frozen=True)
class Scored:
    formula: Formula
    iou: float
    da: float


def rank_key(formula: Formula, iou: float) -> tuple:
    return (-iou,) + formula.sort_key()


class BeamSearch:
    """The sequence of beams for one unit, computed step by step on demand (`beam(k)` holds formulas of up to
    k + 1 atoms)."""

    def __init__(self, scorer: Scorer, beam_size: int = 5, beam_limit: int = 50):
        self.scorer = scorer
        self.beam_size = beam_size
        ious = scorer.atom_ious()
        touching = np.flatnonzero(ious > 0)
        order = touching[np.lexsort((scorer.concepts[touching], -ious[touching]))]
        self.atom_ranking = [(int(scorer.concepts[k]), float(ious[k])) for k in order]
        limit = len(order) if beam_limit <= 0 else beam_limit
        self.candidates = np.sort(scorer.concepts[order[:limit]])
        first = [(Formula.atom(c), iou) for c, iou in self.atom_ranking[:beam_size]]
        self._beams: list[list[Scored]] = [self._score(first)] if first else []

    @property
    def empty(self) -> bool:
        return not self._beams

    @property
    def computed(self) -> list[list[Scored]]:
        return self._beams

    def beam(self, k: int) -> list[Scored]:
        while len(self._beams) <= k:
            self._beams.append(self._grow(self._beams[-1]))
        return self._beams[k]

    def _score(self, entries: list[tuple[Formula, float]]) -> list[Scored]:
        return [Scored(f, iou, self.scorer.da(f)) for f, iou in entries]

    def _grow(self, beam: list[Scored]) -> list[Scored]:
        pool: dict[Formula, float] = {s.formula: s.iou for s in beam}
        grown = []
        for s in beam:
            cands = self.candidates[~np.isin(self.candidates, s.formula.atoms)]
            if len(cands):
                grown.append((s.formula, cands, self.scorer.expand(s.formula, cands)))
        if grown:
            # Only candidates that can still make the top beam_size (ties included) become Formula objects. A grown
            # formula may repeat one of the <= beam_size beam formulas, hence the 2 * beam_size-th value as the cut.
            all_ious = np.concatenate([np.concatenate([ious.ravel() for _, _, ious in grown]),
                                       np.fromiter(pool.values(), float)])
            cut = np.sort(all_ious)[::-1][min(2 * self.beam_size, len(all_ious)) - 1]
            for f, cands, ious in grown:
                for op_index, k in zip(*np.nonzero(ious >= cut)):
                    g = f.extend(OPERATORS[op_index], int(cands[k]))
                    pool.setdefault(g, float(ious[op_index, k]))
        best = sorted(pool.items(), key=lambda item: rank_key(item[0], item[1]))[: self.beam_size]
        if [f for f, _ in best] == [s.formula for s in beam]:
            return beam
        known = {s.formula: s for s in beam}
        return [known.get(f) or Scored(f, iou, self.scorer.da(f)) for f, iou in best]


def iou_explanation(search: BeamSearch, max_length: int) -> Scored | None:
    """Compositional explanation: the best-IoU formula after growing to `max_length` atoms."""
    return None if search.empty else search.beam(max_length - 1)[0]


def length_sweep(search: BeamSearch, max_length: int) -> list[Scored]:
    """Best-IoU formula (and its DA) of the search capped at 1, 2, ..., max_length atoms."""
    return [] if search.empty else [search.beam(k)[0] for k in range(max_length)]


def da_select(search: BeamSearch, limit: int = 10) -> Scored | None:
    """Pick the highest-DA formula of each beam; go on while that DA improves (at most `limit` atoms)."""
    if search.empty:
        return None
    best = max(search.beam(0), key=lambda s: s.da)  # max keeps the first (best-ranked) on ties
    for k in range(1, limit):
        pick = max(search.beam(k), key=lambda s: s.da)
        if pick.da <= best.da:
            break
        best = pick
    return best


def da_stop(search: BeamSearch, limit: int = 10) -> Scored | None:
    """Plain IoU search without a length cap, stopped when the best-IoU formula's DA no longer rises; returns the
    formula of the last step that raised it (at most `limit` atoms)."""
    if search.empty:
        return None
    previous = search.beam(0)[0]
    for k in range(1, limit):
        current = search.beam(k)[0]
        if current.da <= previous.da:
            return previous
        previous = current
    return previous
