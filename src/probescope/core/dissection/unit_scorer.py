"""One unit's side of the counting trick (probescope.core.dissection.counts holds the dataset's): IoU and Detection
Accuracy of formulas for one unit, from the label counts over the regions of one side of its mask, and the bounds the
beam search prunes with.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from probescope.core.dissection.counts import CategoryScope, DatasetCounts, Lru, RegionSet
from probescope.core.dissection.formula import AND, OR, Formula

_UNIT_CACHE_BYTES = 64 << 20  # per unit, for each of its two per-formula caches


@dataclass
class Children:
    """The children `f OR c`, `f AND c`, `f AND NOT c` (rows, in OPERATORS order) of a formula f, for candidate
    atoms c (columns): pixel counts inside the unit's mask and over the dataset, IoU, and which children have f's own
    mask (c adds or removes nothing)."""

    inter: np.ndarray  # (3, k) n(M AND g)
    size: np.ndarray  # (3, k) n(g)
    iou: np.ndarray  # (3, k)
    same: np.ndarray  # (3, k) bool


class UnitScorer:
    """IoU and Detection Accuracy of formulas for one unit, from the shared dataset counts and the regions of one side
    of the unit's mask M: M itself, or its complement when M holds more than half of the dataset's pixels (a dead
    unit's M is every pixel). Counts inside M follow from the complement's exactly, n(M AND X) = n(X) - n(~M AND X),
    and per image likewise, so the answers are the same on either side and a unit costs what its smaller side does.
    `scope` (a CategoryScope) switches to NetDissect-Lite's per-category unit size; None = the whole dataset's.
    `complement` forces a side (None: the smaller)."""

    def __init__(self, dataset: DatasetCounts, inside: np.ndarray, concepts: np.ndarray,
                 scope: CategoryScope | None = None, complement: bool | None = None):
        store = dataset.store
        self.dataset = dataset
        self.concepts = concepts
        self.n_mask = int(inside.sum())  # `inside`: each region's pixels in M (unitmasks.unit_mask_regions)
        self.complement = 2 * self.n_mask > store.n_pixels if complement is None else complement
        side = store.region_pixels - inside if self.complement else inside
        regions = np.flatnonzero(side)
        self.side = RegionSet(store, regions, side[regions], memo=True)  # regions weighted by their pixels on the side
        side_counts = self.side.label_counts()
        self.mask_counts = store.label_totals - side_counts if self.complement else side_counts  # n(M AND c)
        self._holds = Lru(_UNIT_CACHE_BYTES, lambda m: m.nbytes)  # per formula: which of the side's regions
        self._side_counts = Lru(_UNIT_CACHE_BYTES, lambda c: c.nbytes)  # and n(side AND f AND c) for all c
        self._pairs: np.ndarray | None = None
        self.scope = scope
        if scope is not None:  # per image: the unit's pixels and the categories under them
            held = np.flatnonzero(inside)
            mask = RegionSet(store, held, inside[held])
            region_bits = np.bitwise_or.reduce(scope.label_bit[mask.labels], axis=0) if len(mask.labels) \
                else np.zeros(len(mask), np.int64)
            images, at = np.unique(mask.images, return_inverse=True)
            self._image_bits = scope.image_bits[images].copy()
            np.bitwise_or.at(self._image_bits, at, region_bits)
            self._image_pixels = np.bincount(at, mask.weights, minlength=len(images))
            self._sizes: dict[int, int] = {}

    def unit_size(self, bits: int) -> int:
        """The unit's pixels counted for a scope of categories (all of them in dataset scope)."""
        if self.scope is None:
            return self.n_mask
        size = self._sizes.get(bits)
        if size is None:
            size = int(np.rint(self._image_pixels[(self._image_bits & bits) != 0].sum()))
            self._sizes[bits] = size
        return size

    def unit_sizes(self, f: Formula | None, candidates: np.ndarray) -> np.ndarray | int:
        """Unit size for `f` grown by each candidate (for each atom when f is None)."""
        if self.scope is None:
            return self.n_mask
        base = 0 if f is None else self.scope.bits(f)
        bits, at = np.unique(base | self.scope.label_bit[candidates], return_inverse=True)
        return np.array([self.unit_size(int(b)) for b in bits], np.int64)[at]

    def atom_ious(self) -> np.ndarray:
        """IoU of every concept (in `concepts` order)."""
        inter = self.mask_counts[self.concepts]
        size = self.dataset.store.label_totals[self.concepts]
        return ratio(inter, self.unit_sizes(None, self.concepts) + size - inter)

    def _holds_on_side(self, f: Formula) -> np.ndarray:
        m = self._holds.get(f)
        if m is None:
            m = self.side.evaluate(f)
            self._holds.put(f, m)
        return m

    def side_counts(self, f: Formula) -> np.ndarray:
        """n(side AND f AND c) for every label c: a pass over the side's regions where f holds."""
        counts = self._side_counts.get(f)
        if counts is None:
            counts = self.side.label_counts(self._holds_on_side(f))
            self._side_counts.put(f, counts)
        return counts

    def inside_counts(self, f: Formula) -> np.ndarray:
        """n(M AND f AND c) for every label c."""
        return self.dataset.cooc(f) - self.side_counts(f) if self.complement else self.side_counts(f)

    def counts(self, f: Formula) -> tuple[int, int]:
        """(n(M AND f), n(f))."""
        on_side, size = int(self.side.weights[self._holds_on_side(f)].sum()), self.dataset.record(f).n
        return (size - on_side if self.complement else on_side), size

    def iou(self, f: Formula) -> float:
        inter, size = self.counts(f)
        unit = self.unit_size(self.scope.bits(f)) if self.scope is not None else self.n_mask
        return float(ratio(inter, unit + size - inter))

    def expand(self, f: Formula, candidates: np.ndarray) -> Children:
        """The children of f by every candidate atom, exactly."""
        n_mf, n_f = self.counts(f)
        mfc = self.inside_counts(f)[candidates]
        mc = self.mask_counts[candidates]
        fc = self.dataset.cooc(f)[candidates]
        nc = self.dataset.store.label_totals[candidates]
        inter = np.stack([n_mf + mc - mfc, mfc, n_mf - mfc])
        size = np.stack([n_f + nc - fc, fc, n_f - fc])
        iou = ratio(inter, self.unit_sizes(f, candidates) + size - inter)
        return Children(inter, size, iou, np.stack([fc == nc, fc == n_f, fc == 0]))

    def bound(self, f: Formula, candidates: np.ndarray, counts: tuple[int, int] | None = None,
              exact_inside: bool = True) -> np.ndarray:
        """Upper bounds (3, k) of the IoUs of f's children by the candidates (see `bounds`); `counts` are f's
        (n(M AND f), n(f)) when known."""
        inter, size = self.counts(f) if counts is None else counts
        return self.bounds([f], np.array([inter]), np.array([size]), candidates, exact_inside)[:, 0]

    def bounds(self, formulas: list[Formula], inter: np.ndarray, size: np.ndarray, candidates: np.ndarray,
               exact_inside: bool = True) -> np.ndarray:
        """Upper bounds (3, n, k) of the IoUs of the children of n formulas sharing their operators, with counts
        (n(M AND f), n(f)), by k candidates: n(f AND c) outside the unit's mask is bounded from the pairwise counts
        of f's atoms with c (`overlap`); inside the mask it is exact (`inside_counts`: a pass over the side's
        regions per formula, and when the side is the complement, f's dataset-wide counts too), or bounded the same
        way when not `exact_inside`. The bounds are the same whichever side the unit keeps."""
        atoms = np.array([f.atoms for f in formulas])
        inter, o_f = inter[:, None], (size - inter)[:, None]
        mc = self.mask_counts[candidates]
        o_c = self.dataset.store.label_totals[candidates] - mc
        rows = [self.atom_rows(atoms[:, j]) for j in range(atoms.shape[1])]
        ops = formulas[0].ops
        if exact_inside:
            m_lo = m_hi = np.stack([self.inside_counts(f)[candidates] for f in formulas])
        else:
            m_lo, m_hi = overlap(ops, [r[0][:, candidates] for r in rows], mc, self.n_mask, inter)
        o_lo, o_hi = overlap(ops, [r[1][:, candidates] for r in rows], o_c, self.dataset.store.n_pixels - self.n_mask,
                             o_f)
        inside = np.stack([inter + mc - m_lo, m_hi, inter - m_lo])
        outside = np.stack([o_f + o_c - o_hi, o_lo, o_f - o_hi])
        unit = self.n_mask if self.scope is None else np.stack([self.unit_sizes(f, candidates) for f in formulas])
        return ratio(inside, unit + outside)

    def pair_counts(self) -> np.ndarray:
        """n(side AND a AND b) for all label pairs (computed once; then `atom_rows` reads it)."""
        if self._pairs is None:
            self._pairs = self.dataset.store.cooccurrence(self.side.regions, self.side.weights)
        return self._pairs

    def atom_rows(self, atoms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For each atom a: n(M AND a AND c) and n(a AND c) outside M, for every label c (two (n, labels))."""
        if self._pairs is None:
            side = np.stack([self.side_counts(Formula.atom(a)) for a in atoms])
        else:
            side = self._pairs[atoms]
        other = self.dataset.atom_cooc[atoms] - side
        return (other, side) if self.complement else (side, other)

    def same_mask(self, f: Formula, g: Formula) -> bool:
        return self.dataset.same_mask(f, g)

    def da(self, f: Formula) -> float:
        """Detection Accuracy: images where f meets the mask / images where f is present."""
        record = self.dataset.record(f)
        present = len(record.images)
        holds = self._holds_on_side(f)
        if not self.complement:
            hit = len(self.side.image_ids(holds))
        else:  # f meets M in an image where it has more pixels than on the complement there
            outside = np.bincount(self.side.images[holds], self.side.weights[holds],
                                  minlength=self.dataset.store.n_images)
            hit = int(np.count_nonzero(record.per_image > outside[record.images]))
        return hit / present if present else 0.0

    def fired_images(self) -> np.ndarray:
        """Sorted images where the mask holds at least one pixel."""
        if not self.complement:
            return self.side.image_ids()
        store = self.dataset.store
        outside = np.bincount(self.side.images, self.side.weights, minlength=store.n_images)
        return np.flatnonzero(np.diff(store.offsets) > outside)


def overlap(ops: tuple[str, ...], rows: list[np.ndarray], universe: np.ndarray, total: int,
            exact: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bounds (lo, hi) of |f AND c| within a universe of `total` pixels (those inside the unit's mask, or those
    outside it) for left-deep formulas f with operators `ops` and candidates c, from |x AND c| of f's atoms x in
    order (`rows`), |c| (`universe`) and |f| (`exact`): inclusion-exclusion propagated along the formula, inside c's
    pixels."""
    lo = hi = rows[0]
    for op, p in zip(ops, rows[1:]):
        if op == OR:
            lo, hi = np.maximum(lo, p), np.minimum(hi + p, universe)
        elif op == AND:
            lo, hi = np.maximum(0, lo + p - universe), np.minimum(hi, p)
        else:
            lo, hi = np.maximum(0, lo - p), np.minimum(hi, universe - p)
    return np.maximum(lo, exact + universe - total), np.minimum(hi, exact)


def ratio(num, den) -> np.ndarray:
    """num / den elementwise (broadcast), 0 where den is 0."""
    out = np.zeros(np.broadcast_shapes(np.shape(num), np.shape(den)), np.float64)
    np.divide(num, den, out=out, where=np.asarray(den) > 0)
    return out
