"""Brute force for the layer's view of one image: every unit upsampled on its own, compared with its threshold in
float64, and every pixel decided by a loop over the units (A_u / T_u highest, the lower unit on ties, units with
T_u <= 0 last); ground truth from the label maps themselves (concept masks OR-ed over layers, image-level labels
covering the image)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from oracles.synthetic_broden import concept_mask


@dataclass
class ReferenceView:
    units: list[int]  # taking part, in unit order
    labels: dict[int, str]  # unit -> explanation text
    drawn: np.ndarray  # (sh, sw) object: explanation text drawn at each pixel, None where none
    winner: np.ndarray  # (sh, sw) int: unit drawn, -1
    covering: dict[tuple[int, int], list[int]]  # pixel -> covering units in drawing order
    activation: dict[tuple[int, int, int], float]  # (unit, y, x) -> upsampled activation
    iou: dict[str, float]  # explanation -> IoU of its units' union with its ground truth
    drawn_iou: dict[str, float]


def _explanation(unit, method):
    return unit.netdissect if method == "netdissect" else unit.explanations.get(method)


def segment(result, activations: np.ndarray, shape: tuple[int, int], method: str, min_iou: float,
            layers=None, image_labels=None) -> ReferenceView:
    ups, masks, labels, thresholds = {}, {}, {}, {}
    for u in sorted(result.units):
        r = result.units[u]
        e = _explanation(r, method)
        x = torch.from_numpy(np.ascontiguousarray(activations[u][None, None], np.float32))
        up = F.interpolate(x, size=shape, mode="bilinear", align_corners=False)[0, 0].double().numpy()
        mask = up >= r.threshold
        if mask.any() and e is not None and e.iou >= min_iou:
            ups[u], masks[u], labels[u], thresholds[u] = up, mask, e.label, r.threshold
    units = sorted(ups)
    drawn = np.full(shape, None, object)
    winner = np.full(shape, -1)
    covering = {}
    for y in range(shape[0]):
        for x in range(shape[1]):
            here = []
            for u in units:
                if masks[u][y, x]:
                    score = ups[u][y, x] / thresholds[u] if thresholds[u] > 0 else -1e30
                    here.append((-score, u))
            here.sort()
            covering[(y, x)] = [u for _, u in here]
            if here:
                winner[y, x] = here[0][1]
                drawn[y, x] = labels[here[0][1]]
    iou, drawn_iou = {}, {}
    if layers is not None:
        for label in sorted(set(labels.values())):
            formula = next(_explanation(result.units[u], method).formula for u in units if labels[u] == label)
            truth = formula.evaluate(lambda c: concept_mask(layers, image_labels, c, shape))
            union = np.zeros(shape, bool)
            for u in units:
                if labels[u] == label:
                    union |= masks[u]
            shown = drawn == label
            iou[label] = (union & truth).sum() / max(1, (union | truth).sum())
            drawn_iou[label] = (shown & truth).sum() / max(1, (shown | truth).sum())
    activation = {(u, y, x): float(ups[u][y, x]) for u in units for y in range(shape[0]) for x in range(shape[1])}
    return ReferenceView(units, labels, drawn, winner, covering, activation, iou, drawn_iou)
