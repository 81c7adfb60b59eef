"""Synthetic Broden-like problems for tests and benchmarks: label maps plus a layer whose units answer planted
formulas.

`SyntheticBroden` has the reader's per-image interface (n_images, labels, seg_shape, pixel_layers, image_labels);
label maps are regenerated from (seed, image) on each call, so even ADE20K-sized problems cost no memory. Concepts
follow a Zipf-like frequency as in ADE20K: a few colours and objects cover most pixels, most concepts are rare.
`write_synthetic_broden` stores one as a real Broden folder; `ListBroden` wraps hand-made label maps the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from probescope.core.data.broden import Label
from probescope.core.dissection.formula import AND, AND_NOT, OR, Formula

N_COLORS = 11


@dataclass(frozen=True)
class SyntheticSpec:
    n_images: int = 200
    seg_size: int = 112
    feat_size: int = 7
    n_objects: int = 60
    n_parts: int = 20
    n_scenes: int = 20
    part_share: float = 0.5  # share of images with part layers
    seed: int = 0


class ListBroden:
    """A dataset given as lists: per image its pixel layers and image labels (the reader's interface)."""

    def __init__(self, layers: list[list[tuple[str, np.ndarray]]], image_labels: list[list[tuple[str, int]]],
                 labels: dict[int, Label], seg_shapes: list[tuple[int, int]] | None = None):
        self.n_images = len(layers)
        self.labels = labels
        self._layers = layers
        self._image_labels = image_labels
        self._shapes = seg_shapes or [m[0][1].shape for m in layers]

    def seg_shape(self, i: int) -> tuple[int, int]:
        return tuple(self._shapes[i])

    def pixel_layers(self, i: int) -> list[tuple[str, np.ndarray]]:
        return self._layers[i]

    def image_labels(self, i: int) -> list[tuple[str, int]]:
        return self._image_labels[i]


class SyntheticBroden:
    """A generated Broden-format dataset held as a recipe (see the module docstring)."""

    def __init__(self, spec: SyntheticSpec):
        self.spec = spec
        self.n_images = spec.n_images
        names = ([f"color{k}-c" for k in range(N_COLORS)] + [f"object{k}" for k in range(spec.n_objects)]
                 + [f"part{k}" for k in range(spec.n_parts)] + [f"scene{k}-s" for k in range(spec.n_scenes)])
        cats = (["color"] * N_COLORS + ["object"] * spec.n_objects + ["part"] * spec.n_parts
                + ["scene"] * spec.n_scenes)
        self.labels = {k + 1: Label(k + 1, name, cat) for k, (name, cat) in enumerate(zip(names, cats))}
        self.first = {"color": 1, "object": 1 + N_COLORS, "part": 1 + N_COLORS + spec.n_objects,
                      "scene": 1 + N_COLORS + spec.n_objects + spec.n_parts}
        self._last: tuple[int, tuple] | None = None

    def seg_shape(self, i: int) -> tuple[int, int]:
        return (self.spec.seg_size, self.spec.seg_size)

    def _zipf(self, rng: np.random.Generator, n: int, size: int | None = None) -> np.ndarray:
        p = 1.0 / np.arange(1, n + 1) ** 1.1
        return rng.choice(n, size=size, p=p / p.sum())

    def sample(self, i: int) -> tuple[list[tuple[str, np.ndarray]], list[tuple[str, int]]]:
        """Image i's (pixel layers, image labels); the last one is kept, as readers ask for both in turn."""
        if self._last is not None and self._last[0] == i:
            return self._last[1]
        self._last = (i, self._generate(i))
        return self._last[1]

    def _generate(self, i: int) -> tuple[list[tuple[str, np.ndarray]], list[tuple[str, int]]]:
        s = self.spec
        rng = np.random.default_rng([s.seed, i])
        size = s.seg_size
        grid = self._zipf(rng, N_COLORS, (8, 8)) + self.first["color"]
        color = np.kron(grid, np.ones((size // 8 + 1, size // 8 + 1), np.int32))[:size, :size].astype(np.int32)
        obj = np.full((size, size), self.first["object"] + int(self._zipf(rng, s.n_objects)), np.int32)
        with_parts = rng.random() < s.part_share
        parts = [np.zeros((size, size), np.int32) for _ in range(2 if rng.random() < 0.3 else 1)] if with_parts else []
        for _ in range(int(rng.integers(1, 5))):
            h, w = rng.integers(size // 8, size // 2, 2)
            y, x = rng.integers(0, size - h), rng.integers(0, size - w)
            obj[y:y + h, x:x + w] = self.first["object"] + int(self._zipf(rng, s.n_objects))
            for layer in parts:
                py, px = y + int(rng.integers(0, h // 2 + 1)), x + int(rng.integers(0, w // 2 + 1))
                layer[py:py + h // 2, px:px + w // 2] = self.first["part"] + int(self._zipf(rng, s.n_parts))
        layers = [("color", color), ("object", obj)] + [("part", p) for p in parts]
        scene = [] if rng.random() < 0.05 else [("scene", self.first["scene"] + int(self._zipf(rng, s.n_scenes)))]
        return layers, scene

    def pixel_layers(self, i: int) -> list[tuple[str, np.ndarray]]:
        return self.sample(i)[0]

    def image_labels(self, i: int) -> list[tuple[str, int]]:
        return self.sample(i)[1]


def concept_mask(layers: list[tuple[str, np.ndarray]], image_labels: list[tuple[str, int]], label: int,
                 shape: tuple[int, int]) -> np.ndarray:
    """Mask of one concept in one image: part layers OR-ed, image-level labels cover the image."""
    if any(num == label for _, num in image_labels):
        return np.ones(shape, bool)
    mask = np.zeros(shape, bool)
    for _, m in layers:
        mask |= m == label
    return mask


def planted_formulas(dataset: SyntheticBroden, n_units: int, seed: int = 0) -> list[Formula]:
    """One formula per unit: atoms among frequent colours, objects, parts and scenes, of length 1 to 3."""
    rng = np.random.default_rng(seed)
    pool = ([dataset.first["color"] + k for k in range(4)] + [dataset.first["object"] + k for k in range(12)]
            + [dataset.first["part"] + k for k in range(4)] + [dataset.first["scene"] + k for k in range(3)])
    out = []
    for _ in range(n_units):
        atoms = rng.choice(pool, size=int(rng.integers(1, 4)), replace=False)
        f = Formula.atom(int(atoms[0]))
        for a in atoms[1:]:
            f = f.extend((OR, AND, AND_NOT)[int(rng.integers(0, 3))], int(a))
        out.append(f)
    return out


def synthetic_activations(dataset: SyntheticBroden, formulas: list[Formula], noise: float = 0.3,
                          seed: int = 0, out: np.ndarray | None = None) -> np.ndarray:
    """float32 (images, units, feat, feat): each unit applies its formula with soft logic (a OR b = a + b - ab,
    a AND b = ab, a AND NOT b = a(1 - b)) to its atoms' masks pooled to feature size, plus noise. Written into
    `out` when given (a memory-mapped file, for layers too large to hold)."""
    s = dataset.spec
    rng = np.random.default_rng([seed, 1])
    atoms = sorted({a for f in formulas for a in f.atoms})
    if out is None:
        out = np.empty((s.n_images, len(formulas), s.feat_size, s.feat_size), np.float32)
    shape = dataset.seg_shape(0)
    for i in range(s.n_images):
        layers, whole = dataset.sample(i)
        masks = np.stack([concept_mask(layers, whole, c, shape) for c in atoms]).astype(np.float32)
        pooled = dict(zip(atoms, F.adaptive_avg_pool2d(torch.from_numpy(masks), s.feat_size).numpy()))
        for u, f in enumerate(formulas):
            value = pooled[f.atoms[0]]
            for op, c in zip(f.ops, f.atoms[1:]):
                other = pooled[c]
                value = value + other - value * other if op == OR else value * (other if op == AND else 1 - other)
            out[i, u] = value
    for i in range(s.n_images):  # image by image: no full-size float64 temporary
        out[i] += noise * rng.standard_normal(out.shape[1:], dtype=np.float32)
    return out


def write_synthetic_broden(root: str | Path, dataset: SyntheticBroden) -> Path:
    """Write the dataset as a real Broden folder (grey images; the label maps are what matters)."""
    from probescope.core.data.broden_write import BrodenImage, write_broden

    size = dataset.spec.seg_size
    image = np.full((2 * size, 2 * size, 3), 128, np.uint8)

    def items():
        for i in range(dataset.n_images):
            layers, whole = dataset.sample(i)
            by_cat: dict[str, list[np.ndarray]] = {}
            for cat, m in layers:
                by_cat.setdefault(cat, []).append(m)
            yield BrodenImage(f"syn/{i:06d}", image, by_cat, {cat: [num] for cat, num in whole})

    return write_broden(root, items(), list(dataset.labels.values()), image_format="png")
