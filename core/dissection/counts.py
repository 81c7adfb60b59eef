"""Counts instead of masks: what IoU and Detection Accuracy need, from label counts over small pixel sets.

Counting trick (reference notes, section 2): with n(X) the pixel count,
    n(f OR c) = n(f) + n(c) - n(f AND c),   n(f AND NOT c) = n(f) - n(f AND c),
and the same inside the unit mask M and per image. So growing a beam formula f by every candidate atom c needs only
n(f AND c) for all c (dataset side: cached per formula and shared by every unit whose beam holds f) and
n(M AND f AND c) (unit side: label counts over the unit's own few active pixels). Detection Accuracy needs the
images where f is present (dataset side, per-image counts by the same trick) and those where f meets M (unit side).

A `PixelSet` carries the packed labels and image index of each of its pixels, so subsets are slices that never touch
the full dataset again.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np

from probescope.core.dissection.formula import AND, AND_NOT, OR, Formula
from probescope.core.dissection.labels import LabelStore


class PixelSet:
    """Some pixels of the dataset, as their labels per plane (planes, m) and image indices (m,).

    A subset keeps only its images and a selection of its parent; its labels are copied when first needed, since
    many sets only serve for pixel and image counts.
    """

    def __init__(self, store: LabelStore, labels: np.ndarray | None, images: np.ndarray, memo: bool = False,
                 parent: tuple[PixelSet, np.ndarray] | None = None):
        self.store = store
        self._labels = labels
        self._parent = parent
        self.images = images
        self._contains: dict[int, np.ndarray] | None = {} if memo else None  # per-atom tests, kept when reused

    @classmethod
    def at(cls, store: LabelStore, pixels: np.ndarray, memo: bool = False) -> PixelSet:
        images = store.image_of(pixels)
        return cls(store, store.gather(pixels, images), images.astype(np.int32), memo)

    @property
    def labels(self) -> np.ndarray:
        if self._labels is None:
            base, mask = self._parent
            self._labels = base.labels[:, mask]
            self._parent = None
        return self._labels

    def __len__(self) -> int:
        return len(self.images)

    @property
    def nbytes(self) -> int:
        """Its own memory (an unmaterialised subset also keeps its parent alive: see `parent`)."""
        held = self._labels.nbytes if self._labels is not None else self._parent[1].nbytes
        return held + self.images.nbytes

    @property
    def parent(self) -> PixelSet | None:
        """The set an unmaterialised subset still refers to."""
        return None if self._parent is None else self._parent[0]

    def contains(self, label: int) -> np.ndarray:
        """Per pixel: does it carry `label`."""
        hit = self._contains.get(label) if self._contains is not None else None
        if hit is None:
            hit = np.zeros(len(self.images), bool)
            labels = None
            for k, has in enumerate(self.store.plane_has):
                if has[label]:
                    labels = self.labels if labels is None else labels
                    hit |= labels[k] == label
            whole = self.store.image_has(label)
            if whole is not None:
                hit |= whole[self.images]
            if self._contains is not None:
                self._contains[label] = hit
        return hit

    def evaluate(self, formula: Formula) -> np.ndarray:
        return formula.evaluate(self.contains)

    def subset(self, mask: np.ndarray) -> PixelSet:
        return PixelSet(self.store, None, self.images[mask], parent=(self, mask))

    def union_disjoint(self, other: PixelSet) -> PixelSet:
        return PixelSet(self.store, np.concatenate([self.labels, other.labels], axis=1),
                        np.concatenate([self.images, other.images]))

    def label_counts(self, mask: np.ndarray | None = None) -> np.ndarray:
        """n(S AND c) for every label c (int64, n_labels), S = this set or its `mask` subset."""
        labels, images = (self.labels, self.images) if mask is None else (self.labels[:, mask], self.images[mask])
        return self.store.label_counts(labels, images)

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


class DatasetCounts:
    """Per-formula dataset-side counts, cached across units.

    Records of conjunctions `(g AND c)` come from their pixels, enumerated from the smaller of g's and c's pixel
    sets; OR and AND NOT records follow from their parent's, the atom's and that conjunction's by the counting trick,
    and atoms take theirs from the label store's co-occurrence matrix and per-image histogram. So the pixels of a
    colour covering a third of the dataset are only enumerated when the other side of a conjunction is larger still.
    Pixel sets live in an LRU of about `cache_bytes`.
    """

    def __init__(self, store: LabelStore, cache_bytes: int = 1 << 30):
        self.store = store
        self.cache_bytes = cache_bytes
        self._sets: OrderedDict[Formula, PixelSet] = OrderedDict()
        self._added_bytes = 0
        self._added = 0
        self._records: dict[Formula, FormulaRecord] = {}
        self._atom_cooc: np.ndarray | None = None
        self._hist = store.image_hist.tocsc()

    @property
    def cached_formulas(self) -> int:
        """Distinct formulas whose dataset-wide counts are known (a measure of the work shared across units)."""
        return len(self._records)

    def pixel_set(self, f: Formula) -> PixelSet:
        s = self._sets.get(f)
        if s is not None:
            self._sets.move_to_end(f)
            return s
        if f.parent is None:
            s = PixelSet.at(self.store, self.store.atom_pixels(f.atoms[0]))
        else:
            g, op, c = f.parent, f.ops[-1], f.atoms[-1]
            if op == AND and self.store.label_totals[c] < self.record(g).n:
                atom = self.pixel_set(Formula.atom(c))
                s = atom.subset(atom.evaluate(g))
            elif op == AND or op == AND_NOT:
                base = self.pixel_set(g)
                inside = base.contains(c)
                s = base.subset(inside if op == AND else ~inside)
            else:
                base, atom = self.pixel_set(g), self.pixel_set(Formula.atom(c))
                s = base.union_disjoint(atom.subset(~atom.evaluate(g)))
        self._remember(f, s)
        return s

    def _remember(self, f: Formula, s: PixelSet) -> None:
        """Add to the LRU; recount what it holds after every 64 additions or an eighth of the budget in new sets
        (copies made later by subsets are caught by the recount), and evict the oldest sets while over budget."""
        self._sets[f] = s
        self._added_bytes += s.nbytes
        self._added += 1
        if self._added_bytes > self.cache_bytes // 8 or self._added % 64 == 0:
            self._added_bytes = 0
            held = self.held_bytes()
            while held > self.cache_bytes and len(self._sets) > 1:
                _, old = self._sets.popitem(last=False)
                held -= old.nbytes

    def held_bytes(self) -> int:
        """Memory the cached pixel sets keep alive, including evicted sets that cached subsets still refer to, and
        subsets whose labels were copied since they were cached."""
        seen: set[int] = set()
        total = 0
        for s in self._sets.values():
            while s is not None and id(s) not in seen:
                seen.add(id(s))
                total += s.nbytes
                s = s.parent
        return total

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
            s = self.pixel_set(f)
            per_image = np.bincount(s.images, minlength=self.store.n_images)
            images = np.flatnonzero(per_image)
            rec = FormulaRecord(len(s), images.astype(np.int32), per_image[images].astype(np.int32))
        else:
            g, c = f.parent, f.atoms[-1]
            both = self.record(g.extend(AND, c))
            terms = [(1, self.record(g)), (-1, both)]
            if f.ops[-1] == OR:
                terms.append((1, self.record(Formula.atom(c))))
            rec = self._combine(terms)
        self._records[f] = rec
        return rec

    def _combine(self, terms: list[tuple[int, FormulaRecord]]) -> FormulaRecord:
        per_image = np.zeros(self.store.n_images, np.int64)
        for sign, r in terms:
            per_image[r.images] += sign * r.per_image
        images = np.flatnonzero(per_image)
        return FormulaRecord(sum(sign * r.n for sign, r in terms), images.astype(np.int32),
                             per_image[images].astype(np.int32))

    def cooc(self, f: Formula) -> np.ndarray:
        """n(f AND c) for every label c."""
        rec = self.record(f)
        if rec.cooc is None:
            if f.parent is None:
                if self._atom_cooc is None:
                    self._atom_cooc = self.store.cooccurrence()
                rec.cooc = self._atom_cooc[f.atoms[0]]
            elif f.ops[-1] == AND:
                rec.cooc = self.pixel_set(f).label_counts()
            else:
                g, c = f.parent, f.atoms[-1]
                rec.cooc = self.cooc(g) - self.cooc(g.extend(AND, c))
                if f.ops[-1] == OR:
                    rec.cooc = rec.cooc + self.cooc(Formula.atom(c))
        return rec.cooc


class UnitScorer:
    """IoU and Detection Accuracy of formulas for one unit, from its active pixels and the shared dataset counts."""

    def __init__(self, dataset: DatasetCounts, unit_pixels: np.ndarray, concepts: np.ndarray):
        store = dataset.store
        self.dataset = dataset
        self.concepts = concepts
        self.mask = PixelSet.at(store, unit_pixels, memo=True)
        self.n_mask = len(unit_pixels)
        self.mask_counts = self.mask.label_counts()  # n(M AND c)
        self._inside: dict[Formula, np.ndarray] = {}

    def atom_ious(self) -> np.ndarray:
        """IoU of every concept (in `concepts` order)."""
        inter = self.mask_counts[self.concepts]
        size = self.dataset.store.label_totals[self.concepts]
        return _ratio(inter, self.n_mask + size - inter)

    def _inside_mask(self, f: Formula) -> np.ndarray:
        m = self._inside.get(f)
        if m is None:
            m = self.mask.evaluate(f)
            self._inside[f] = m
        return m

    def expand(self, f: Formula, candidates: np.ndarray) -> np.ndarray:
        """IoUs (3, len(candidates)) of `f OR c`, `f AND c`, `f AND NOT c` for each candidate atom c."""
        inside = self._inside_mask(f)
        n_mf = int(inside.sum())
        mfc = self.mask.label_counts(inside)[candidates]
        mc = self.mask_counts[candidates]
        n_f = self.dataset.record(f).n
        fc = self.dataset.cooc(f)[candidates]
        nc = self.dataset.store.label_totals[candidates]
        inter = np.stack([n_mf + mc - mfc, mfc, n_mf - mfc])
        size = np.stack([n_f + nc - fc, fc, n_f - fc])
        return _ratio(inter, self.n_mask + size - inter)

    def da(self, f: Formula) -> float:
        """Detection Accuracy: images where f meets the mask / images where f is present."""
        present = len(self.dataset.record(f).images)
        hit = len(self.mask.image_ids(self._inside_mask(f)))
        return hit / present if present else 0.0

    def fired_images(self) -> np.ndarray:
        return self.mask.image_ids()


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    out = np.zeros(np.shape(num), np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out
