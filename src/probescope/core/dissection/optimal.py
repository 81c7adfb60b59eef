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

from probescope.core.dissection.formula import OPERATORS, OR, Formula
from probescope.core.dissection.search import SLACK, Scored, rank_key
from probescope.core.dissection.unit_scorer import UnitScorer, ratio

_BATCH = 256  # queued nodes bounded together


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
    top = max(range(len(concepts)), key=lambda k: (ious[k], -concepts[k]))
    best = (Formula.atom(concepts[top]), float(ious[top]))
    mc = scorer.mask_counts[concepts]
    oc = scorer.dataset.store.label_totals[concepts] - mc
    units = scorer.unit_sizes(None, concepts) * np.ones(len(concepts), np.int64)
    or_bound = _OrBound(mc, oc, int(units.min()))
    largest = np.sort(mc)[::-1]
    threshold = max(best[1], floor) * (1 - SLACK)
    queue: list[tuple] = []  # (-bound, order, parent or None, operator, atom, n(M AND f), n(f))
    order = itertools.count()  # first queued first among equal bounds

    def push(parent: Formula | None, ops: np.ndarray, cols: np.ndarray, inter: np.ndarray, size: np.ndarray,
             unit: np.ndarray, length: int) -> None:
        """Queue the formulas of `length` atoms (parent grown by ops[k], concepts[cols[k]]) whose bound reaches the
        threshold; the formulas are built when they leave the queue."""
        remaining = max_length - length
        if remaining <= 0:
            return
        if remaining == 1:
            bound = np.maximum(ratio(inter, unit), or_bound(inter, size - inter, unit))
        else:
            bound = np.minimum(1.0, ratio(inter + largest[:remaining].sum(), unit))
        for k in np.flatnonzero(bound >= threshold):
            heapq.heappush(queue, (-float(bound[k]), next(order), parent, int(ops[k]), int(concepts[cols[k]]),
                                   int(inter[k]), int(size[k])))

    def pop() -> tuple[Formula, int, int]:
        _, _, parent, op, atom, inter, size = heapq.heappop(queue)
        return (Formula.atom(atom) if parent is None else parent.extend(OPERATORS[op], atom)), inter, size

    everything = np.arange(len(concepts))  # every atom is canonical
    push(None, everything, everything, mc, mc + oc, units, 1)
    evaluated, expanded = len(concepts), 0
    if len(queue):
        scorer.pair_counts()
    while queue and -queue[0][0] >= threshold:
        batch = []
        while queue and -queue[0][0] >= threshold and len(batch) < _BATCH:
            batch.append(pop())
        for f, inter, size in _bounded(scorer, batch, max_length, concepts, threshold):
            if max_length - f.length == 1 and f.length > 1 and \
                    _valid_max(scorer.bound(f, concepts, (inter, size)), [f], concepts) < threshold:
                continue
            children = scorer.expand(f, concepts)
            valid = ~np.isin(concepts, f.atoms)
            expanded += 1
            evaluated += 3 * int(valid.sum())
            valid = valid & _canonical(f, concepts)
            found = _best_child(f, np.where(valid, children.iou, -1.0), concepts, best[1])
            if found is not None and rank_key(*found) < rank_key(*best):
                best = found
                threshold = max(threshold, best[1] * (1 - SLACK))
            ops, cols = np.nonzero(valid)
            unit = np.broadcast_to(scorer.unit_sizes(f, concepts), (len(concepts),))[cols]
            push(f, ops, cols, children.inter[ops, cols], children.size[ops, cols], unit, f.length + 1)
    return Optimum(Scored(best[0], best[1], scorer.da(best[0])), evaluated, expanded)


def _canonical(f: Formula, concepts: np.ndarray) -> np.ndarray:
    """(3, k) which children f OR c, f AND c, f AND NOT c are the first-ranked of the formulas that equal them by
    reordering their leading run of ORs (a union: atoms ascending) or of ANDs and AND NOTs (a conjunction: the
    smallest positive atom first, then ascending). The others rank after an equal formula of the search space,
    and so do all formulas grown from them: they are never the answer and are not queued."""
    out = np.ones((3, len(concepts)), bool)
    runs_or = all(op == OR for op in f.ops)
    runs_and = all(op != OR for op in f.ops)
    last = f.atoms[-1]
    if runs_or:
        out[0] = concepts > last
    if runs_and:
        out[1] = concepts > max(last, f.atoms[0])  # a positive atom: after the first one too
        out[2] = concepts > last if f.length > 1 else True
    return out


def _bounded(scorer: UnitScorer, batch: list[tuple[Formula, int, int]], max_length: int, concepts: np.ndarray,
             threshold: float) -> list[tuple[Formula, int, int]]:
    """The batch's nodes, less those one operation from max_length whose children's bounds from pairwise counts
    alone (`UnitScorer.bounds` without the exact inside of the mask) stay below the threshold; computed for all the
    nodes with the same operators at once."""
    keep = [node[0].length == 1 or max_length - node[0].length > 1 for node in batch]
    groups: dict[tuple[str, ...], list[int]] = {}
    for k, node in enumerate(batch):
        if not keep[k]:
            groups.setdefault(node[0].ops, []).append(k)
    for members in groups.values():
        formulas = [batch[k][0] for k in members]
        inter = np.array([batch[k][1] for k in members])
        size = np.array([batch[k][2] for k in members])
        bound = _valid_max(scorer.bounds(formulas, inter, size, concepts, exact_inside=False), formulas, concepts)
        for k, b in zip(members, np.atleast_1d(bound)):
            keep[k] = b >= threshold
    return [node for node, kept in zip(batch, keep) if kept]


def _valid_max(bounds: np.ndarray, formulas: list[Formula], concepts: np.ndarray) -> np.ndarray:
    """Per formula, the largest bound (3, n, k) or (3, k) over children by atoms it does not hold yet."""
    bounds = bounds.reshape(3, len(formulas), len(concepts))
    own = np.zeros((len(formulas), len(concepts)), bool)
    for j in range(formulas[0].length):
        own |= concepts[None, :] == np.array([f.atoms[j] for f in formulas])[:, None]
    return np.where(own[None], -np.inf, bounds).max(axis=(0, 2))


def _best_child(f: Formula, iou: np.ndarray, concepts: np.ndarray, floor: float) -> tuple[Formula, float] | None:
    """The best-ranked child (highest IoU, then Formula.sort_key) among the scored ones, when it reaches `floor`."""
    top = iou.max()
    if top < max(floor, 0.0):
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
