"""Beam search for compositional explanations, and the explanation choices built on its sequence of beams.

The beam is always ranked by IoU, so the IoU search, the length sweep, `da-select` and `da-stop` all walk the same
sequence of beams and differ only in which beam formula they pick and when they stop; the sequence is computed once
per unit, as far as the most demanding choice needs it.

Rules (the original code's, Mu & Andreas 2020 and the Detection Accuracy paper's fork; fixed, so that every
implementation finds the same formulas):
- The atoms ranked by IoU are the concepts that pass the minimum-images filter and touch the unit's mask (IoU > 0);
  the initial beam holds the top `beam_size`. The candidate atoms are every concept that passes the filter when
  `beam_limit` is 0 (zero-overlap ones included: `f AND NOT c` can remove false positives), else the top
  `beam_limit` of the ranked atoms.
- A step grows every beam formula f by every candidate atom c (one already in f included, as the original code
  does) into `(f OR c)`, `(f AND c)`, `(f AND NOT c)`, pools these with the beam and keeps the top `beam_size` by
  IoU. With `dedupe="none"` the pool is the original code's: a formula grown again from a beam member still in the
  beam is pooled again, so a beam may hold it twice. With `dedupe="mask"` a formula whose mask over the dataset
  equals a better-ranked pool member's takes no slot.
- Ties (equal IoU) go to fewer atoms, then to lower label numbers in order of appearance, then to OR < AND < AND NOT
  (`Formula.sort_key`). For `da-select`, ties in DA go to the better-ranked (higher-IoU) beam formula.
- Pruning (exact): beam formulas are grown best first; one whose children all have an IoU upper bound (from counts
  that need no pass over the dataset, `UnitScorer.bound`) below the beam_size-th best IoU of the pool so far cannot
  place a child in the next beam, so its children are not scored.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np

from probescope.core.dissection.formula import OPERATORS, Formula
from probescope.core.dissection.settings import DissectionSettings
from probescope.core.dissection.unit_scorer import Children

SLACK = 1e-9  # bounds are compared with this relative margin, so float rounding can never prune a contender


class Scorer(Protocol):
    concepts: np.ndarray

    def atom_ious(self) -> np.ndarray: ...

    def expand(self, f: Formula, candidates: np.ndarray) -> Children: ...

    def bound(self, f: Formula, candidates: np.ndarray, counts: tuple[int, int] | None = None) -> np.ndarray: ...

    def counts(self, f: Formula) -> tuple[int, int]: ...

    def same_mask(self, f: Formula, g: Formula) -> bool: ...

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
    k + 1 atoms), as `settings` say (their beam size, beam limit and beam dedupe; the defaults are the settings').
    `prune=False` scores every child (the tests check that pruning changes nothing)."""

    def __init__(self, scorer: Scorer, settings: DissectionSettings, prune: bool = True):
        self.scorer = scorer
        self.beam_size = beam_size = settings.beam_size
        self.dedupe = settings.beam_dedupe
        beam_limit = settings.beam_limit
        self.prune = prune
        self.expanded = self.pruned = 0  # beam formulas whose children were scored / skipped by the bound
        ious = scorer.atom_ious()
        touching = np.flatnonzero(ious > 0)
        order = touching[np.lexsort((scorer.concepts[touching], -ious[touching]))]
        self.atom_ranking = [(int(scorer.concepts[k]), float(ious[k])) for k in order]
        self.candidates = scorer.concepts if beam_limit <= 0 else np.sort(scorer.concepts[order[:beam_limit]])
        first = [Scored(Formula.atom(c), iou, scorer.da(Formula.atom(c))) for c, iou in self.atom_ranking[:beam_size]]
        self._beams: list[list[Scored]] = [first] if first else []

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

    def _grow(self, beam: list[Scored]) -> list[Scored]:
        counts = np.array([self.scorer.counts(s.formula) for s in beam], np.int64).reshape(-1, 2)
        scores = [(np.array([s.iou for s in beam]), counts[:, 0], counts[:, 1])]
        grown = []
        for s, c in zip(beam, counts):
            if self.prune and self.scorer.bound(s.formula, self.candidates, (int(c[0]), int(c[1]))).max() \
                    < self._cut(scores) * (1 - SLACK):
                self.pruned += 1
                continue
            self.expanded += 1
            children = self.scorer.expand(s.formula, self.candidates)
            grown.append((s.formula, children))
            keep = _kept(children, self.dedupe)
            scores.append((children.iou[keep], children.inter[keep], children.size[keep]))
        pool = _Pool(beam, counts, grown, self.candidates, self.dedupe)
        best: list[tuple[Formula, float, tuple[int, int]]] = []
        for f, iou, key in pool.ranked():
            if self.dedupe == "none" or not any(key == k and self.scorer.same_mask(f, g) for g, _, k in best):
                best.append((f, iou, key))
                if len(best) == self.beam_size:
                    break
        if [f for f, _, _ in best] == [s.formula for s in beam]:
            return beam
        known = {s.formula: s for s in beam}
        return [known.get(f) or Scored(f, iou, self.scorer.da(f)) for f, iou, _ in best]

    def _cut(self, scores: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> float:
        """An IoU that beam_size pool members already reach, so a child scoring below it cannot enter the beam: the
        beam_size-th best IoU of the pool; with mask deduplication, counting only members with distinct
        (n(M AND g), n(g)), hence distinct masks, among the best few (fewer members only lower the cut)."""
        iou, inter, size = (np.concatenate(x) for x in zip(*scores))
        if len(iou) < self.beam_size:
            return -np.inf
        if self.dedupe == "mask":
            top = np.argpartition(-iou, 4 * self.beam_size)[:4 * self.beam_size] \
                if len(iou) > 4 * self.beam_size else np.arange(len(iou))
            iou, inter, size = iou[top], inter[top], size[top]
            order = np.lexsort((-iou, size, inter))
            first = np.ones(len(order), bool)
            first[1:] = (np.diff(inter[order]) != 0) | (np.diff(size[order]) != 0)
            iou = iou[order[first]]
            if len(iou) < self.beam_size:
                return -np.inf
        return float(np.partition(iou, len(iou) - self.beam_size)[len(iou) - self.beam_size])


class _Pool:
    """A step's pool, the beam and the scored children of its members, walked in rank order; formulas are built only
    for the members walked. With mask deduplication, children with their parent's mask are left out (`_kept`)."""

    def __init__(self, beam: list[Scored], counts: np.ndarray, grown: list[tuple[Formula, Children]],
                 candidates: np.ndarray, dedupe: str):
        width = max([len(s.formula.atoms) for s in beam] + [len(f.atoms) + 1 for f, _ in grown])
        ious, inters, sizes, keys, self._made = [], [counts[:, 0]], [counts[:, 1]], [], []
        for s in beam:
            ious.append(np.array([s.iou]))
            keys.append(_sort_keys(s.formula, None, None, width))
            self._made.append(lambda _k, f=s.formula: f)
        for f, ch in grown:
            ops, cols = np.nonzero(_kept(ch, dedupe))
            ious.append(ch.iou[ops, cols])
            inters.append(ch.inter[ops, cols])
            sizes.append(ch.size[ops, cols])
            keys.append(_sort_keys(f, ops, candidates[cols], width))
            self._made.append(lambda k, f=f, ops=ops, atoms=candidates[cols]:
                              f.extend(OPERATORS[ops[k]], int(atoms[k])))
        self._iou = np.concatenate(ious)
        self._inter, self._size = np.concatenate(inters), np.concatenate(sizes)
        self._source = np.concatenate([np.full(len(v), j) for j, v in enumerate(ious)])
        self._index = np.concatenate([np.arange(len(v)) for v in ious])
        self._keys = np.concatenate(keys)

    def ranked(self):
        """(formula, IoU, (n(M AND g), n(g))) best first: IoU descending, then Formula.sort_key (stable: the beam
        before its regrown copies)."""
        order = np.lexsort(tuple(self._keys[:, ::-1].T) + (-self._iou,))
        for j in order:
            yield (self._made[self._source[j]](self._index[j]), float(self._iou[j]),
                   (int(self._inter[j]), int(self._size[j])))


def _kept(children: Children, dedupe: str) -> np.ndarray:
    """The children a pool takes: all of them, or with mask deduplication those whose mask differs from their
    parent's (such a child ranks after its parent, which is in the pool, so deduplication would drop it anyway)."""
    return np.ones_like(children.same) if dedupe == "none" else ~children.same


def _sort_keys(f: Formula, ops: np.ndarray | None, atoms: np.ndarray | None, width: int) -> np.ndarray:
    """Formula.sort_key as integer rows (length, atoms padded with -1, operator ranks padded with -1) for f itself
    (`ops` None) or for its children `f ops[k] atoms[k]`."""
    n = 1 if ops is None else len(ops)
    out = np.full((n, 2 * width), -1, np.int64)
    length, op_ranks = len(f.atoms), f.sort_key()[2]
    out[:, 0] = length if ops is None else length + 1
    out[:, 1:1 + length] = f.atoms
    out[:, 1 + width:1 + width + len(op_ranks)] = op_ranks
    if ops is not None:
        out[:, 1 + length] = atoms
        out[:, 1 + width + len(op_ranks)] = ops
    return out


def iou_explanation(search: BeamSearch, max_length: int) -> Scored | None:
    """Compositional explanation: the best-IoU formula after growing to `max_length` atoms."""
    return None if search.empty else search.beam(max_length - 1)[0]


def length_sweep(search: BeamSearch, max_length: int) -> list[Scored]:
    """Best-IoU formula (and its DA) of the search capped at 1, 2, ..., max_length atoms."""
    return [] if search.empty else [search.beam(k)[0] for k in range(max_length)]


def da_select(search: BeamSearch, limit: int) -> Scored | None:
    """Pick the highest-DA formula of each beam; go on while that DA improves (at most `limit` atoms: the settings'
    `da_limit`)."""
    if search.empty:
        return None
    best = max(search.beam(0), key=lambda s: s.da)  # max keeps the first (best-ranked) on ties
    for k in range(1, limit):
        pick = max(search.beam(k), key=lambda s: s.da)
        if pick.da <= best.da:
            break
        best = pick
    return best


def da_stop(search: BeamSearch, limit: int) -> Scored | None:
    """Plain IoU search without a length cap, stopped when the best-IoU formula's DA no longer rises; returns the
    formula of the last step that raised it (at most `limit` atoms: the settings' `da_limit`)."""
    if search.empty:
        return None
    previous = search.beam(0)[0]
    for k in range(1, limit):
        current = search.beam(k)[0]
        if current.da <= previous.da:
            return previous
        previous = current
    return previous
