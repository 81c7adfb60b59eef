"""Counts instead of masks: what IoU and Detection Accuracy need, from label counts over small sets of regions.

Counting trick (reference notes, section 2): with n(X) the pixel count,
    n(f OR c) = n(f) + n(c) - n(f AND c),   n(f AND NOT c) = n(f) - n(f AND c),
and the same inside the unit mask M and per image. So growing a beam formula f by every candidate atom c needs only
n(f AND c) for all c (dataset side: cached per formula and shared by every unit whose beam holds f) and
n(M AND f AND c) (unit side: label counts over the regions the unit's mask touches). Detection Accuracy needs the
images where f is present (dataset side, per-image counts by the same trick) and those where f meets M (unit side).
The unit side is counted over the smaller side of M: where M holds most pixels (a dead unit's holds all of them), over
its complement, with n(M AND X) = n(X) - n(~M AND X) for every count, per image too.

Every formula holds on whole regions (labels.py), so a pixel set is a `RegionSet`: regions with weights (their
pixels in the set), and the mask of a formula over the dataset is exactly its sorted region numbers.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from probescope.core.dissection.formula import AND, AND_NOT, OR, Formula
from probescope.core.dissection.labels import LabelStore

_UNIT_CACHE_BYTES = 64 << 20  # per unit, for each of its two per-formula caches


class RegionSet:
    """Some regions of the dataset (sorted numbers) with their weights: the pixels of each region in the set (all of
    them for a formula's mask over the dataset, the active ones for a unit's mask)."""

    def __init__(self, store: LabelStore, regions: np.ndarray, weights: np.ndarray, memo: bool = False):
        self.store = store
        self.regions = regions
        self.weights = weights
        self.images = store.region_image[regions]
        self._labels: np.ndarray | None = None
        self._contains: dict[int, np.ndarray] | None = {} if memo else None  # per-atom tests, kept when reused

    @classmethod
    def whole(cls, store: LabelStore, regions: np.ndarray) -> RegionSet:
        """Regions with all their pixels."""
        return cls(store, regions, store.region_pixels[regions])

    @property
    def labels(self) -> np.ndarray:
        if self._labels is None:
            self._labels = self.store.region_labels[:, self.regions]
        return self._labels

    def __len__(self) -> int:
        return len(self.regions)

    @property
    def total(self) -> int:
        """Pixels in the set."""
        return int(self.weights.sum())

    @property
    def nbytes(self) -> int:
        """Its memory, counting the labels it reads when tested."""
        planes = self.store.region_labels
        labels = len(self) * len(planes) * planes.itemsize
        return self.regions.nbytes + self.weights.nbytes + self.images.nbytes + labels

    def contains(self, label: int) -> np.ndarray:
        """Per region: does it carry `label`."""
        hit = self._contains.get(label) if self._contains is not None else None
        if hit is None:
            hit = np.zeros(len(self.regions), bool)
            for k, has in enumerate(self.store.plane_has):
                if has[label]:
                    hit |= self.labels[k] == label
            whole = self.store.image_has(label)
            if whole is not None:
                hit |= whole[self.images]
            if self._contains is not None:
                self._contains[label] = hit
        return hit

    def evaluate(self, formula: Formula) -> np.ndarray:
        return formula.evaluate(self.contains)

    def subset(self, mask: np.ndarray) -> RegionSet:
        return RegionSet(self.store, self.regions[mask], self.weights[mask])

    def label_counts(self, mask: np.ndarray | None = None) -> np.ndarray:
        """Weighted n(S AND c) for every label c (int64, n_labels), S = this set or its `mask` subset."""
        if mask is None:
            return self.store.label_counts(self.regions, self.weights)
        return self.store.label_counts(self.regions[mask], self.weights[mask])

    def image_ids(self, mask: np.ndarray | None = None) -> np.ndarray:
        """Sorted distinct images holding at least one pixel of the set (or of its `mask` subset)."""
        images = self.images if mask is None else self.images[mask]
        seen = np.zeros(self.store.n_images, bool)
        seen[images] = True
        return np.flatnonzero(seen)


@dataclass
class FormulaRecord:
    """Dataset-wide facts about one formula: pixel count, pixels per image (sparse), co-occurrence with labels."""

    n: int
    images: np.ndarray  # sorted images where the formula is present
    per_image: np.ndarray  # its pixels in each of those images
    cooc: np.ndarray | None = None  # n(f AND c) for all labels c, computed when f is first grown


class _Lru:
    """Least-recently-used values of about `budget` bytes in all (`size(value)` each, counted when stored)."""

    def __init__(self, budget: int, size):
        self.budget = budget
        self.size = size
        self.held = 0
        self._items: OrderedDict = OrderedDict()

    def __len__(self) -> int:
        return len(self._items)

    def get(self, key):
        value = self._items.get(key)
        if value is not None:
            self._items.move_to_end(key)
        return value

    def put(self, key, value) -> None:
        self._items[key] = value
        self.held += self.size(value)
        while self.held > self.budget and len(self._items) > 1:
            _, old = self._items.popitem(last=False)
            self.held -= self.size(old)


class DatasetCounts:
    """Per-formula dataset-side counts, cached across units.

    Region sets of conjunctions `(g AND c)` are picked from the smaller of g's and c's region sets; OR and AND NOT
    records and co-occurrences follow from their parent's, the atom's and that conjunction's by the counting trick,
    and atoms take theirs from the label store's co-occurrence matrix and per-image histogram. Region sets and
    records live in LRUs of about `cache_bytes` together (an evicted one is recomputed when needed again).
    """

    def __init__(self, store: LabelStore, cache_bytes: int = 1 << 30):
        self.store = store
        self.cache_bytes = cache_bytes
        self._sets = _Lru(cache_bytes // 2, lambda s: s.nbytes)
        record_bytes = 8 * store.n_labels  # with its co-occurrence row, filled later
        self._records = _Lru(cache_bytes // 2, lambda r: r.images.nbytes + r.per_image.nbytes + record_bytes)
        self.computed = 0  # records computed (a measure of the dataset-side work)
        self._atom_cooc: np.ndarray | None = None
        self._hist = store.image_hist.tocsc()
        self._scope: CategoryScope | None = None

    @property
    def category_scope(self) -> CategoryScope:
        """The categories of the dataset's labels, for the per-category IoU scope."""
        if self._scope is None:
            self._scope = CategoryScope(self.store)
        return self._scope

    def region_set(self, f: Formula) -> RegionSet:
        """The regions where `f` holds, over the whole dataset (its mask, exactly)."""
        s = self._sets.get(f)
        if s is not None:
            return s
        if f.parent is None:
            s = RegionSet.whole(self.store, self.store.label_regions(f.atoms[0]))
        else:
            g, op, c = f.parent, f.ops[-1], f.atoms[-1]
            if op == AND and self.store.label_totals[c] < self.record(g).n:
                atom = self.region_set(Formula.atom(c))
                s = atom.subset(atom.evaluate(g))
            elif op == AND or op == AND_NOT:
                base = self.region_set(g)
                inside = base.contains(c)
                s = base.subset(inside if op == AND else ~inside)
            else:
                base, atom = self.region_set(g), self.region_set(Formula.atom(c))
                s = RegionSet.whole(self.store, _union(base.regions, atom.regions, self.store.n_regions))
        self._sets.put(f, s)
        return s

    def same_mask(self, f: Formula, g: Formula) -> bool:
        """Do f and g hold on exactly the same pixels of the dataset? A union (or an intersection) of the same atoms
        in another order does; other pairs are told apart by their pixels per image, then by their region sets. (A
        dead unit's beam holds unions of the largest concepts, whose region sets are most of the dataset's.)"""
        ops = set(f.ops) | set(g.ops)
        if f == g or ((ops <= {OR} or ops <= {AND}) and set(f.atoms) == set(g.atoms)):
            return True
        a, b = self.record(f), self.record(g)
        if not (np.array_equal(a.images, b.images) and np.array_equal(a.per_image, b.per_image)):
            return False
        return np.array_equal(self.region_set(f).regions, self.region_set(g).regions)

    def record(self, f: Formula) -> FormulaRecord:
        rec = self._records.get(f)
        if rec is not None:
            return rec
        if f.parent is None:
            a = f.atoms[0]
            h = self._hist
            lo, hi = h.indptr[a], h.indptr[a + 1]
            rec = FormulaRecord(int(self.store.label_totals[a]), h.indices[lo:hi].astype(np.int32),
                                h.data[lo:hi].astype(np.int32))
        elif f.ops[-1] == AND:
            s = self.region_set(f)
            per_image = np.bincount(s.images, s.weights, minlength=self.store.n_images)
            images = np.flatnonzero(per_image)
            rec = FormulaRecord(s.total, images.astype(np.int32), per_image[images].astype(np.int32))
        else:
            g, c = f.parent, f.atoms[-1]
            both = self.record(g.extend(AND, c))
            terms = [(1, self.record(g)), (-1, both)]
            if f.ops[-1] == OR:
                terms.append((1, self.record(Formula.atom(c))))
            rec = self._combine(terms)
        self._records.put(f, rec)
        self.computed += 1
        return rec

    def _combine(self, terms: list[tuple[int, FormulaRecord]]) -> FormulaRecord:
        per_image = np.zeros(self.store.n_images, np.int64)
        for sign, r in terms:
            per_image[r.images] += sign * r.per_image
        images = np.flatnonzero(per_image)
        return FormulaRecord(sum(sign * r.n for sign, r in terms), images.astype(np.int32),
                             per_image[images].astype(np.int32))

    @property
    def atom_cooc(self) -> np.ndarray:
        """n(a AND b) for all label pairs (the store's co-occurrence matrix, computed once per dataset)."""
        if self._atom_cooc is None:
            self._atom_cooc = self.store.cooccurrence()
        return self._atom_cooc

    def cooc(self, f: Formula) -> np.ndarray:
        """n(f AND c) for every label c."""
        rec = self.record(f)
        if rec.cooc is None:
            if f.parent is None:
                rec.cooc = self.atom_cooc[f.atoms[0]]
            elif f.ops[-1] == AND:
                rec.cooc = self.region_set(f).label_counts()
            else:
                g, c = f.parent, f.atoms[-1]
                rec.cooc = self.cooc(g) - self.cooc(g.extend(AND, c))
                if f.ops[-1] == OR:
                    rec.cooc = rec.cooc + self.cooc(Formula.atom(c))
        return rec.cooc


@dataclass
class Children:
    """The children `f OR c`, `f AND c`, `f AND NOT c` (rows, in OPERATORS order) of a formula f, for candidate
    atoms c (columns): pixel counts inside the unit's mask and over the dataset, IoU, and which children have f's own
    mask (c adds or removes nothing)."""

    inter: np.ndarray  # (3, k) n(M AND g)
    size: np.ndarray  # (3, k) n(g)
    iou: np.ndarray  # (3, k)
    same: np.ndarray  # (3, k) bool


class CategoryScope:
    """NetDissect-Lite's per-category unit size: a unit's pixels in the images where its mask meets a label of the
    category (pixel-level under the mask, or image-level anywhere in the image). Categories are bits; a formula's
    scope is the union of its concepts' categories."""

    def __init__(self, store: LabelStore):
        category = [store.categories.get(c, "") for c in range(1, store.n_labels)]
        names = sorted(set(category))
        self.label_bit = np.array([0] + [1 << names.index(name) for name in category], np.int64)
        il = store.image_labels.tocoo()
        self.image_bits = np.zeros(store.n_images, np.int64)
        np.bitwise_or.at(self.image_bits, il.row, self.label_bit[il.col])

    def bits(self, f: Formula) -> int:
        return int(np.bitwise_or.reduce(self.label_bit[list(f.atoms)]))


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
        self._holds = _Lru(_UNIT_CACHE_BYTES, lambda m: m.nbytes)  # per formula: which of the side's regions
        self._side_counts = _Lru(_UNIT_CACHE_BYTES, lambda c: c.nbytes)  # and n(side AND f AND c) for all c
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


def _union(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """Sorted union of two sorted sets of region numbers below n: marked in a table when they are large (a hash of
    millions of numbers costs more than a pass over the table)."""
    if len(a) + len(b) < n // 64:
        return np.union1d(a, b)
    marked = np.zeros(n, bool)
    marked[a] = True
    marked[b] = True
    return np.flatnonzero(marked)


def ratio(num, den) -> np.ndarray:
    """num / den elementwise (broadcast), 0 where den is 0."""
    out = np.zeros(np.broadcast_shapes(np.shape(num), np.shape(den)), np.float64)
    np.divide(num, den, out=out, where=np.asarray(den) > 0)
    return out
