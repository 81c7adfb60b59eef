"""The optimal compositional explanation of a unit: the left-deep formula of at most `max_length` distinct concepts
with the highest IoU over every concept (ties broken as in the beam search), found by branch and bound, with the
number of formulas it scored. The gap between its IoU and the beam search's answer says how much the beam missed.

A node is a formula f; expanding it scores all its children `f OR c`, `f AND c`, `f AND NOT c` exactly (counts.py).
Nodes wait in a queue ordered by an upper bound of the IoU of every formula that can still grow from them and are
expanded best first; the search stops when the best waiting bound falls below the best IoU found so far (the
incumbent, which starts at the beam search's answer when the caller gives it). The bounds are admissible (never
below a reachable IoU), so the answer is exact:
- queued child h, one operation from max_length: its AND and AND NOT children keep at most h's pixels inside the
  unit's mask M, so their IoU <= n(M AND h) / |M|; an OR child `h OR c` has IoU <= (n(M AND h) + n(M AND c)) /
  (|M| + max(outside(h), outside(c))), maximised over c from the atoms sorted by their pixels outside M;
- queued child two or more operations away: n(M AND h) plus the largest n(M AND c) of the atoms it could still add
  by OR, over |M|;
- before expanding a node one operation from max_length: the children's bounds from the pairwise counts of its
  atoms (UnitScorer.bound), first with the inside of the mask bounded too, then exact there, neither of which needs
  a pass over the dataset.
(|M| is the unit size of the node's category scope in the per-category IoU scope: a formula's scope only grows.)
Repeating an atom never helps: up to three atoms such a formula has the mask of one with fewer atoms, which ranks
first on ties; so the space is formulas of distinct atoms.
"""

from __future__ import annotations

import heapq
import itertools
from dataclasses import dataclass

import numpy as np

from probescope.core.dissection.counts import UnitScorer, ratio
from probescope.core.dissection.formula import OPERATORS, Formula
from probescope.core.dissection.search import SLACK, Scored, rank_key


@dataclass(frozen=True)
class Optimum:
    best: Scored | None
    evaluated: int  # formulas whose IoU was computed exactly
    expanded: int  # formulas whose children were scored


def search_space(n_concepts: int, max_length: int) -> int:
    """How many formulas of at most max_length distinct atoms there are (what brute force would score)."""
    total, paths = 0, 1
    for k in range(max_length):
        paths *= max(0, n_concepts - k) * (3 if k else 1)
        total += paths
    return total


def optimal_explanation(scorer: UnitScorer, max_length: int, floor: float = 0.0) -> Optimum:
    """The best formula of up to max_length distinct atoms. `floor` is an IoU some formula is known to reach (the
    beam search's answer): nodes whose bound is below it are never expanded."""
    concepts = scorer.concepts
    ious = scorer.atom_ious()
    if not (ious > 0).any():
        return Optimum(None, len(concepts), 0)
    atoms = [Formula.atom(c) for c in concepts]
    top = max(range(len(atoms)), key=lambda k: (ious[k], -concepts[k]))
    best = (atoms[top], float(ious[top]))
    mc = scorer.mask_counts[concepts]
    oc = scorer.dataset.store.label_totals[concepts] - mc
    units = scorer.unit_sizes(None, concepts) * np.ones(len(concepts), np.int64)
    or_bound = _OrBound(mc, oc, int(units.min()))
    largest = np.sort(mc)[::-1]
    threshold = max(best[1], floor) * (1 - SLACK)
    queue: list[tuple[float, int, Formula, int, int]] = []
    order = itertools.count()  # first queued first among equal bounds

    def push(formulas, inter: np.ndarray, size: np.ndarray, unit: np.ndarray, length: int) -> None:
        """Queue the formulas of `length` atoms whose bound reaches the threshold."""
        remaining = max_length - length
        if remaining <= 0:
            return
        if remaining == 1:
            bound = np.maximum(ratio(inter, unit), or_bound(inter, size - inter, unit))
        else:
            bound = np.minimum(1.0, ratio(inter + largest[:remaining].sum(), unit))
        for k in np.flatnonzero(bound >= threshold):
            heapq.heappush(queue, (-float(bound[k]), next(order), formulas(k), int(inter[k]), int(size[k])))

    push(lambda k: atoms[k], mc, mc + oc, units, 1)
    evaluated, expanded = len(concepts), 0
    if len(queue):
        scorer.pair_counts()
    while queue and -queue[0][0] >= threshold:
        _, _, f, inter, size = heapq.heappop(queue)
        valid = ~np.isin(concepts, f.atoms)
        if max_length - f.length == 1 and f.length > 1:
            if any(scorer.bound(f, concepts, (inter, size), exact)[:, valid].max() < threshold
                   for exact in (False, True)):
                continue
        children = scorer.expand(f, concepts)
        expanded += 1
        evaluated += 3 * int(valid.sum())
        iou = np.where(valid, children.iou, -1.0)
        found = _best_child(f, iou, concepts)
        if found is not None and rank_key(*found) < rank_key(*best):
            best = found
            threshold = max(threshold, best[1] * (1 - SLACK))
        ops, cols = np.nonzero(valid[None, :] & np.ones((3, 1), bool))
        unit = np.broadcast_to(scorer.unit_sizes(f, concepts), (len(concepts),))[cols]
        push(lambda k, f=f, ops=ops, cols=cols: f.extend(OPERATORS[ops[k]], int(concepts[cols[k]])),
             children.inter[ops, cols], children.size[ops, cols], unit, f.length + 1)
    return Optimum(Scored(best[0], best[1], scorer.da(best[0])), evaluated, expanded)


def _best_child(f: Formula, iou: np.ndarray, concepts: np.ndarray) -> tuple[Formula, float] | None:
    """The best-ranked child (highest IoU, then Formula.sort_key) among the scored ones."""
    top = iou.max()
    if top < 0:
        return None
    ops, cols = np.nonzero(iou == top)
    formulas = [f.extend(OPERATORS[o], int(concepts[c])) for o, c in zip(ops, cols)]
    return min(formulas, key=Formula.sort_key), float(top)


class _OrBound:
    """max over atoms c of (I + m_c) / (U + max(O, o_c)), for many (I, O, U) at once: with the atoms sorted by o_c,
    those with o_c <= O give at most (I + max m_c) / (U + O); the others (I + m_c) / (U + o_c) <= I / (U + O) +
    m_c / (U_floor + o_c), U_floor being the smallest unit size of any scope."""

    def __init__(self, m: np.ndarray, o: np.ndarray, u_floor: int):
        order = np.argsort(o, kind="stable")
        self.o = o[order]
        self.prefix = np.maximum.accumulate(m[order])
        self.suffix = np.maximum.accumulate(ratio(m[order], u_floor + o[order])[::-1])[::-1]

    def __call__(self, inter: np.ndarray, outside: np.ndarray, unit: np.ndarray) -> np.ndarray:
        j = np.searchsorted(self.o, outside, side="right")
        n = len(self.o)
        low = np.where(j > 0, ratio(inter + self.prefix[np.maximum(j - 1, 0)], unit + outside), 0.0)
        high = np.where(j < n, ratio(inter, unit + outside) + self.suffix[np.minimum(j, n - 1)], 0.0)
        return np.maximum(low, high)
