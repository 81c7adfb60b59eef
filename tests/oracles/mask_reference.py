"""Straightforward mask-based dissection, the way the reference code did it: every candidate formula is evaluated as
a full-dataset boolean mask. Slow by design; the tests and `benchmarks/dissect_bench.py` check the engine against it.

It shares nothing with the engine but the Formula class and the documented ranking rule (search.rank_key).
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from probescope.core.dissection.formula import AND, AND_NOT, OR, Formula
from probescope.core.dissection.labels import LabelSource
from probescope.core.dissection.search import rank_key


@dataclass
class ReferenceUnit:
    threshold: float
    mask_pixels: int
    beams: list[list[tuple[Formula, float, float]]]  # (formula, iou, da), best first
    explanations: dict[str, tuple[Formula, float, float] | None]
    sweep: list[tuple[Formula, float, float]]


class MaskReference:
    """Concept masks as flat booleans over all pixels of all images (row-major, image after image)."""

    def __init__(self, source: LabelSource, min_samples: int = 5, cache_masks: int = 64):
        n = source.n_images
        self.shapes = [tuple(source.seg_shape(i)) for i in range(n)]
        sizes = [h * w for h, w in self.shapes]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        total = int(self.offsets[-1])
        per_image = [([m.reshape(-1) for _, m in source.pixel_layers(i)], [c for _, c in source.image_labels(i)])
                     for i in range(n)]
        depth = max(1, max(len(layers) for layers, _ in per_image))
        wide = max(1, max(len(whole) for _, whole in per_image))
        self.layers = np.zeros((depth, total), np.int32)
        self.whole = np.zeros((wide, total), np.int32)
        present: dict[int, int] = {}
        for i, (layers, whole) in enumerate(per_image):
            lo, hi = self.offsets[i], self.offsets[i + 1]
            for k, m in enumerate(layers):
                self.layers[k, lo:hi] = m
            for k, c in enumerate(whole):
                self.whole[k, lo:hi] = c
            for c in set(np.unique(np.concatenate(layers)).tolist() if layers else []) | set(whole):
                if c > 0:
                    present[c] = present.get(c, 0) + 1
        self.concepts = sorted(c for c, k in present.items() if k >= max(1, min_samples))
        self._cache: OrderedDict[int, np.ndarray] = OrderedDict()
        self._cache_size = cache_masks
        self._met_for: tuple[np.ndarray | None, tuple] = (None, ([], {}))

    def concept_mask(self, c: int) -> np.ndarray:
        m = self._cache.get(c)
        if m is None:
            m = (self.layers == c).any(axis=0) | (self.whole == c).any(axis=0)
            self._cache[c] = m
            if len(self._cache) > self._cache_size:
                self._cache.popitem(last=False)
        return m

    def formula_mask(self, f: Formula) -> np.ndarray:
        return f.evaluate(self.concept_mask)

    def unit_mask(self, maps: np.ndarray, quantile: float) -> tuple[float, np.ndarray]:
        """(threshold, flat mask) for one unit's activations (images, h, w): every image upsampled."""
        threshold = float(np.quantile(maps.astype(np.float64).ravel(), 1 - quantile))
        out = np.zeros(int(self.offsets[-1]), bool)
        for i, shape in enumerate(self.shapes):
            up = F.interpolate(torch.from_numpy(np.ascontiguousarray(maps[i:i + 1, None], np.float32)), size=shape,
                               mode="bilinear", align_corners=False)
            out[self.offsets[i]:self.offsets[i + 1]] = (up.double() >= threshold).numpy().reshape(-1)
        return threshold, out

    def iou(self, mask: np.ndarray, g: np.ndarray, unit: int | None = None) -> float:
        """|M & G| / |M | G|; `unit` replaces |M| in the union (the category scope's unit size)."""
        inter = int((mask & g).sum())
        union = (int(mask.sum()) if unit is None else unit) + int(g.sum()) - inter
        return inter / union if union else 0.0

    def da(self, mask: np.ndarray, g: np.ndarray) -> float:
        starts = self.offsets[:-1]
        present = np.add.reduceat(g.astype(np.int64), starts) > 0
        hit = np.add.reduceat((mask & g).astype(np.int64), starts) > 0
        return int((present & hit).sum()) / int(present.sum()) if present.any() else 0.0

    def scope_size(self, mask: np.ndarray, categories: dict[int, str], f: Formula) -> int:
        """NetDissect-Lite's unit size for f's categories: the mask's pixels in the images where the mask meets a
        label of one of them, or where the image has an image-level label of one of them."""
        wanted = frozenset(categories[c] for c in f.atoms)
        sizes = self._met(mask)[1]
        if wanted not in sizes:
            sizes[wanted] = sum(pixels for pixels, here in self._met(mask)[0]
                                if {categories.get(c) for c in here} & wanted)
        return sizes[wanted]

    def _met(self, mask: np.ndarray) -> tuple[list[tuple[int, set[int]]], dict]:
        """Per image: the mask's pixels there and the labels under it (plus the image-level ones); and the unit
        sizes computed so far for this mask."""
        if self._met_for[0] is not mask:
            met = []
            for i in range(len(self.shapes)):
                lo, hi = self.offsets[i], self.offsets[i + 1]
                m = mask[lo:hi]
                here = set(np.unique(self.layers[:, lo:hi][:, m]).tolist()) | set(self.whole[:, lo].tolist())
                met.append((int(m.sum()), here - {0}))
            self._met_for = (mask, (met, {}))
        return self._met_for[1]

    def search(self, mask: np.ndarray, beam_size: int, beam_limit: int, steps: int, dedupe: str = "none",
               categories: dict[int, str] | None = None) -> list[list]:
        """Beams after 0..steps growth steps, each [(formula, iou, da)] best first, as the original code builds them:
        every beam formula grown by every candidate (its own atoms included) and pooled with the beam as a list (a
        formula grown again is pooled again). `dedupe="mask"` then skips a pool member whose mask equals a
        better-ranked one's; `categories` (label -> category) switches to the per-category IoU scope."""
        def score(f: Formula) -> float:
            unit = None if categories is None else self.scope_size(mask, categories, f)
            return self.iou(mask, self.formula_mask(f), unit)

        ious = {c: score(Formula.atom(c)) for c in self.concepts}
        ranked = sorted(((c, v) for c, v in ious.items() if v > 0), key=lambda cv: (-cv[1], cv[0]))
        if not ranked:
            return []
        candidates = self.concepts if beam_limit <= 0 else [c for c, _ in ranked[:beam_limit]]
        beam = [(Formula.atom(c), v) for c, v in ranked[:beam_size]]
        beams = [beam]
        for _ in range(steps):
            pool = list(beam)
            for f, _ in beam:
                for c in candidates:
                    for op in (OR, AND, AND_NOT):
                        pool.append((f.extend(op, c), score(f.extend(op, c))))
            pool.sort(key=lambda item: rank_key(*item))  # stable: the beam before its regrown copies
            beam = []
            for f, v in pool:
                if dedupe == "none" or not any((self.formula_mask(f) == self.formula_mask(g)).all() for g, _ in beam):
                    beam.append((f, v))
                if len(beam) == beam_size:
                    break
            beams.append(beam)
        return [[(f, v, self.da(mask, self.formula_mask(f))) for f, v in b] for b in beams]

    def dissect_unit(self, maps: np.ndarray, quantile: float = 0.005, beam_size: int = 5, beam_limit: int = 50,
                     max_length: int = 3, sweep_length: int = 0, da_limit: int = 10,
                     searches: tuple[str, ...] = ("iou",), dedupe: str = "none",
                     categories: dict[int, str] | None = None) -> ReferenceUnit:
        threshold, mask = self.unit_mask(maps, quantile)
        steps = max(max_length, sweep_length, da_limit if set(searches) - {"iou"} else 1) - 1
        beams = self.search(mask, beam_size, beam_limit, steps, dedupe, categories)
        found: dict = {}
        if beams:
            found["iou"] = beams[max_length - 1][0]
            if "da-select" in searches:
                best = max(beams[0], key=lambda e: e[2])
                for k in range(1, da_limit):
                    pick = max(beams[k], key=lambda e: e[2])
                    if pick[2] <= best[2]:
                        break
                    best = pick
                found["da-select"] = best
            if "da-stop" in searches:
                prev = beams[0][0]
                for k in range(1, da_limit):
                    if beams[k][0][2] <= prev[2]:
                        break
                    prev = beams[k][0]
                found["da-stop"] = prev
        sweep = [beams[k][0] for k in range(sweep_length)] if beams else []
        return ReferenceUnit(threshold, int(mask.sum()), beams, found, sweep)
