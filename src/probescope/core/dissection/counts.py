"""Counts instead of masks: what IoU and Detection Accuracy need, from label counts over small sets of regions.

Counting trick (reference notes, section 2): with n(X) the pixel count,
    n(f OR c) = n(f) + n(c) - n(f AND c),   n(f AND NOT c) = n(f) - n(f AND c),
and the same inside the unit mask M and per image. So growing a beam formula f by every candidate atom c needs only
n(f AND c) for all c (dataset side: cached per formula and shared by every unit whose beam holds f) and
n(M AND f AND c) (unit side: label counts over the regions the unit's mask touches). Detection Accuracy needs the
images where f is present (dataset side, per-image counts by the same trick) and those where f meets M (unit side).
The unit side is counted over the smaller side of M: where M holds most pixels (a dead unit's holds all of them), over
its complement, with n(M AND X) = n(X) - n(~M AND X) for every count, per image too. This module holds the dataset
side and the region sets; the unit side is probescope.core.dissection.unit_scorer.

Every formula holds on whole regions (labels.py), so a pixel set is a `RegionSet`: regions with weights (their
pixels in the set), and the mask of a formula over the dataset is exactly its sorted region numbers.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from probescope.core.dissection.formula import AND, AND_NOT, OR, Formula
from probescope.core.dissection.labels import LabelStore


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


class Lru:
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
        self._sets = Lru(cache_bytes // 2, lambda s: s.nbytes)
        record_bytes = 8 * store.n_labels  # with its co-occurrence row, filled later
        self._records = Lru(cache_bytes // 2, lambda r: r.images.nbytes + r.per_image.nbytes + record_bytes)
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


def _union(a: np.ndarray, b: np.ndarray, n: int) -> np.ndarray:
    """Sorted union of two sorted sets of region numbers below n: marked in a table when they are large (a hash of
    millions of numbers costs more than a pass over the table)."""
    if len(a) + len(b) < n // 64:
        return np.union1d(a, b)
    marked = np.zeros(n, bool)
    marked[a] = True
    marked[b] = True
    return np.flatnonzero(marked)
