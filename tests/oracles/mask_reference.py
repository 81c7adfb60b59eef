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

    def iou(self, mask: np.ndarray, g: np.ndarray) -> float:
        union = int((mask | g).sum())
        return int((mask & g).sum()) / union if union else 0.0

    def da(self, mask: np.ndarray, g: np.ndarray) -> float:
        starts = self.offsets[:-1]
        present = np.add.reduceat(g.astype(np.int64), starts) > 0
        hit = np.add.reduceat((mask & g).astype(np.int64), starts) > 0
        return int((present & hit).sum()) / int(present.sum()) if present.any() else 0.0

    def search(self, mask: np.ndarray, beam_size: int, beam_limit: int, steps: int) -> list[list]:
        """Beams after 0..steps growth steps, each [(formula, iou, da)] best first."""
        ious = {c: self.iou(mask, self.concept_mask(c)) for c in self.concepts}
        ranked = sorted(((c, v) for c, v in ious.items() if v > 0), key=lambda cv: (-cv[1], cv[0]))
        if not ranked:
            return []
        candidates = [c for c, _ in (ranked[:beam_limit] if beam_limit > 0 else ranked)]
        beam = [(Formula.atom(c), v) for c, v in ranked[:beam_size]]
        beams = [beam]
        for _ in range(steps):
            pool = dict(beam)
            for f, _ in beam:
                fm = self.formula_mask(f)
                for c in candidates:
                    if c in f.atoms:
                        continue
                    cm = self.concept_mask(c)
                    for op, gm in ((OR, fm | cm), (AND, fm & cm), (AND_NOT, fm & ~cm)):
                        pool.setdefault(f.extend(op, c), self.iou(mask, gm))
            beam = sorted(pool.items(), key=lambda item: rank_key(*item))[:beam_size]
            beams.append(beam)
        return [[(f, v, self.da(mask, self.formula_mask(f))) for f, v in b] for b in beams]

    def dissect_unit(self, maps: np.ndarray, quantile: float = 0.005, beam_size: int = 5, beam_limit: int = 50,
                     max_length: int = 3, sweep_length: int = 0, da_limit: int = 10,
                     searches: tuple[str, ...] = ("iou",)) -> ReferenceUnit:
        threshold, mask = self.unit_mask(maps, quantile)
        steps = max(max_length, sweep_length, da_limit if set(searches) - {"iou"} else 1) - 1
        beams = self.search(mask, beam_size, beam_limit, steps)
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
