"""Compact in-memory label store: every label map of a Broden dataset read once, packed for counting.

Pixels of all images are numbered globally (image by image, row-major). Plane k holds every image's k-th label layer
(colour, object, part 1, part 2, ... in index order), with a label that an earlier layer already gives at a pixel
removed, so a label's count over any pixel set is a plain sum of bincounts over the planes, and a label is looked
for only in the planes where it occurs. Plane k is stored densely over the
images that have a k-th label somewhere (colour and object planes cover every image, part planes about half), so
looking up a pixel's labels is a direct index in every plane. Image-level labels (scenes, textures) cover whole
images and are kept per image, never expanded to pixels: counts over a pixel set get them from its per-image pixel
counts. Part layers are OR-ed, and a label that is both image-level and pixel-level in one image counts once.

ADE20K scale (22,210 images at 112x112, 278M pixels): two full uint16 planes plus part planes over about half the
images, about 1.4 GB.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import scipy.sparse as sp

from probescope.core.errors import InputError
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report

_FULL_PLANES = 2  # planes indexed by global pixel; the rest are stored over the images that have them


class LabelSource(Protocol):
    """What the store reads: probescope.core.data.broden.BrodenDataset or any object with the same per-image methods."""

    n_images: int
    labels: dict

    def pixel_layers(self, i: int) -> list[tuple[str, np.ndarray]]: ...

    def image_labels(self, i: int) -> list[tuple[str, int]]: ...

    def seg_shape(self, i: int) -> tuple[int, int]: ...


@dataclass
class Plane:
    """One packed plane, stored densely over the images that have it (plane k exists where an image has more than
    k labels at some pixel), image after image."""

    data: np.ndarray  # label numbers, 0 = none
    base: np.ndarray  # int64 (images,): where each image starts in `data`, -1 where the image lacks the plane
    images: np.ndarray  # the images that have it, ascending
    full: bool  # every image has it: `data` is indexed by global pixel

    def global_pixels(self, positions: np.ndarray, offsets: np.ndarray) -> np.ndarray:
        """Global pixel index of positions in `data`."""
        if self.full:
            return positions
        starts = self.base[self.images]
        j = np.searchsorted(starts, positions, side="right") - 1
        return offsets[self.images[j]] + positions - starts[j]


class LabelStore:
    """All labels of a dataset, packed for fast counts over pixel sets (see the module docstring)."""

    def __init__(self, seg_shapes: np.ndarray, planes: list[Plane], image_labels: sp.csr_matrix,
                 image_hist: sp.csr_matrix, names: dict[int, str],
                 categories: dict[int, str]):
        self.seg_shapes = seg_shapes
        self.n_images = len(seg_shapes)
        sizes = seg_shapes[:, 0].astype(np.int64) * seg_shapes[:, 1]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.n_pixels = int(self.offsets[-1])
        self._sizes = sizes
        self._uniform = int(sizes[0]) if len(sizes) and (sizes == sizes[0]).all() else 0
        self.planes = planes
        self.plane_has = [np.bincount(p.data, minlength=image_hist.shape[1]) > 0 for p in planes]  # label in plane?
        self.image_labels = image_labels  # (N, L) 0/1 int32: image-level labels
        self.image_hist = image_hist  # (N, L) int64: pixels of each label in each image (both kinds)
        self.n_labels = image_hist.shape[1]
        self.names = names
        self.categories = categories
        self.label_totals = np.asarray(image_hist.sum(axis=0)).ravel().astype(np.int64)
        hist_csc = image_hist.tocsc()
        self.label_images = np.diff(hist_csc.indptr).astype(np.int64)  # images where each label is present
        self._image_level_labels = set(np.flatnonzero(np.diff(image_labels.tocsc().indptr)).tolist())
        self._image_label_cols: dict[int, np.ndarray] = {}
        self._label_image_lists = hist_csc

    # ---- construction -------------------------------------------------------------------------------------------

    @classmethod
    def build(cls, source: LabelSource, progress: ProgressCallback | None = None,
              cancel: CancelCheck | None = None) -> LabelStore:
        """Read every image's label maps once (the only pass over the dataset's files)."""
        n = int(source.n_images)
        if n == 0:
            raise InputError("the dataset has no images")
        max_label = max(source.labels, default=0)
        dtype = np.uint16 if max_label < 65536 else np.int32
        n_labels = max_label + 1
        seg_shapes = np.array([tuple(int(x) for x in source.seg_shape(i)) for i in range(n)], np.int64).reshape(n, 2)
        offsets = np.concatenate([[0], np.cumsum(seg_shapes[:, 0] * seg_shapes[:, 1])])
        # Colour and object planes cover (nearly) every image: written in place; further planes kept per image.
        full = [np.zeros(int(offsets[-1]), dtype) for _ in range(_FULL_PLANES)]
        extra: list[np.ndarray] = []
        img_rows, img_cols = [], []
        hist_rows, hist_cols, hist_vals = [], [], []
        for i in range(n):
            if i % 64 == 0:
                check_cancel(cancel)
                report(progress, i / n, f"reading label maps {i}/{n}")
            shape = tuple(int(x) for x in seg_shapes[i])
            size = shape[0] * shape[1]
            whole = sorted({int(num) for _, num in source.image_labels(i) if int(num) > 0})
            layers = [np.asarray(m) for _, m in source.pixel_layers(i)]
            for m in layers:
                if m.shape != shape:
                    raise InputError(f"image {i}: label map is {m.shape}, segmentation size is {shape}")
            stack = (np.stack([m.reshape(-1) for m in layers]).astype(np.int64) if layers
                     else np.zeros((0, size), np.int64))
            if stack.size and (stack.min() < 0 or stack.max() > max_label):
                raise InputError(f"image {i}: label numbers outside the label table")
            if whole:
                stack[np.isin(stack, whole)] = 0  # covered by the whole-image label already
            planes = _dedupe(stack)
            for k, plane in enumerate(full[:len(planes)]):
                plane[offsets[i]:offsets[i + 1]] = planes[k]
            extra.append(planes[_FULL_PLANES:].astype(dtype))
            counts = np.bincount(planes.reshape(-1), minlength=n_labels)
            counts[0] = 0
            nz = np.flatnonzero(counts)
            counts_nz = counts[nz]
            if whole:
                nz = np.concatenate([nz, whole])
                counts_nz = np.concatenate([counts_nz, np.full(len(whole), size)])
                img_rows += [i] * len(whole)
                img_cols += whole
            hist_rows.append(np.full(len(nz), i))
            hist_cols.append(nz)
            hist_vals.append(counts_nz)
        report(progress, 1.0, "packing label planes")
        image_labels = sp.csr_matrix((np.ones(len(img_rows), np.int32), (img_rows, img_cols)), shape=(n, n_labels))
        image_hist = sp.csr_matrix((np.concatenate(hist_vals).astype(np.int64),
                                    (np.concatenate(hist_rows), np.concatenate(hist_cols))), shape=(n, n_labels))
        planes = [Plane(p, offsets[:-1].astype(np.int64), np.arange(n), True) for p in full]
        planes += _assemble(extra, seg_shapes, dtype)
        names = {int(k): v.name for k, v in source.labels.items()}
        categories = {int(k): v.category for k, v in source.labels.items()}
        return cls(seg_shapes, planes, image_labels, image_hist, names, categories)

    # ---- queries ------------------------------------------------------------------------------------------------

    @property
    def nbytes(self) -> int:
        return (sum(p.data.nbytes + p.base.nbytes for p in self.planes) + self.image_hist.data.nbytes
                + self.image_hist.indices.nbytes)

    def concepts(self, min_samples: int) -> np.ndarray:
        """Label numbers present in at least `min_samples` images (the papers' minimum-images filter)."""
        return np.flatnonzero(self.label_images >= max(1, min_samples))

    def image_of(self, pixels: np.ndarray) -> np.ndarray:
        """Image index of each global pixel index."""
        if self._uniform:
            return pixels // self._uniform
        return np.searchsorted(self.offsets, pixels, side="right") - 1

    def image_pixel_range(self, i: int) -> tuple[int, int]:
        return int(self.offsets[i]), int(self.offsets[i + 1])

    def gather(self, pixels: np.ndarray, images: np.ndarray | None = None, planes: int | None = None) -> np.ndarray:
        """Packed pixel-level labels at `pixels`: (planes, len(pixels)), 0 where a plane holds nothing.
        `images` = image_of(pixels) when already known; `planes` limits the lookup to the first planes."""
        use = self.planes[:planes]
        out = np.zeros((len(use), len(pixels)), self.planes[0].data.dtype)
        local = None
        for k, plane in enumerate(use):
            if plane.full:
                out[k] = plane.data[pixels]
                continue
            if local is None:
                images = self.image_of(pixels) if images is None else images
                local = pixels - self.offsets[images]
            start = plane.base[images]
            ok = start >= 0
            out[k][ok] = plane.data[start[ok] + local[ok]]
        return out

    def image_has(self, label: int) -> np.ndarray | None:
        """Per image: does it carry `label` as an image-level label (None when it never does)."""
        if label not in self._image_level_labels:
            return None
        col = self._image_label_cols.get(label)
        if col is None:
            col = self.image_labels[:, label].toarray().ravel() > 0
            self._image_label_cols[label] = col
        return col

    def images_with(self, label: int) -> np.ndarray:
        """Indices of images where `label` is present (any kind)."""
        h = self._label_image_lists
        return h.indices[h.indptr[label]:h.indptr[label + 1]]

    def atom_pixels(self, label: int) -> np.ndarray:
        """Sorted global pixel indices carrying `label` (pixel-level or through a whole-image label)."""
        parts = []
        images = np.sort(self.images_with(label))
        whole = self.image_has(label)
        if whole is not None:
            parts += [np.arange(*self.image_pixel_range(i)) for i in images[whole[images]]]
            images = images[~whole[images]]
        if len(images):
            share = (self.offsets[images + 1] - self.offsets[images]).sum() / max(1, self.n_pixels)
            for plane, has in zip(self.planes, self.plane_has):
                if not has[label]:
                    continue
                if not plane.full or share > 0.125:
                    parts.append(plane.global_pixels(np.flatnonzero(plane.data == label), self.offsets))
                    continue
                for i in images:  # a rare label: scan only the images that hold it
                    lo, hi = self.image_pixel_range(i)
                    hits = np.flatnonzero(plane.data[lo:hi] == label)
                    if len(hits):
                        parts.append(hits + lo)
        if not parts:
            return np.zeros(0, np.int64)
        return np.sort(np.concatenate(parts).astype(np.int64))

    def cooccurrence(self, chunk: int = 1 << 22) -> np.ndarray:
        """n(a AND b) for all label pairs: int64 (n_labels, n_labels), one pass over the planes.

        Pixel-level pairs come from pairs of planes (a pixel's labels are distinct across planes). With IL the
        image-level incidence, H the per-image histogram and P the image sizes, a pair where a label is image-level
        in image i counts H[i, other]: IL'H + H'IL - IL' diag(P) IL (the last term removes pairs counted twice).
        """
        n_labels = self.n_labels
        pairs = np.zeros(n_labels * n_labels, np.int64)
        for k, plane in enumerate(self.planes[1:], start=1):
            for lo in range(0, len(plane.data), chunk):
                here = plane.data[lo:lo + chunk].astype(np.int64)
                used = np.flatnonzero(here)
                at = self.gather(plane.global_pixels(used + lo, self.offsets), planes=k).astype(np.int64)
                for j in range(k):
                    both = at[j] > 0
                    pairs += np.bincount(at[j][both] * n_labels + here[used][both], minlength=len(pairs))
        pairs = pairs.reshape(n_labels, n_labels)
        out = pairs + pairs.T
        pixel_level = self.label_totals - np.asarray(self.image_labels.multiply(self._sizes[:, None]).sum(axis=0)
                                                     ).ravel().astype(np.int64)
        out[np.diag_indices(n_labels)] += pixel_level
        il = self.image_labels.astype(np.int64)
        h = self.image_hist
        out += (il.T @ h).toarray() + (h.T @ il).toarray() - (il.T @ il.multiply(self._sizes[:, None])).toarray()
        return out

    def label_counts(self, labels: np.ndarray, images: np.ndarray) -> np.ndarray:
        """Pixels of each label in a pixel set given as gather() labels and image_of() images: int64 (n_labels,)."""
        counts = np.bincount(labels.reshape(-1), minlength=self.n_labels).astype(np.int64)
        counts[0] = 0
        if self._image_level_labels:
            per_image = np.bincount(images, minlength=self.n_images)
            counts += np.asarray(self.image_labels.T @ per_image).ravel().astype(np.int64)
        return counts


def _dedupe(stack: np.ndarray) -> np.ndarray:
    """Layers in their order with a label that an earlier layer already gives at that pixel zeroed (part layers are
    OR-ed), trailing empty layers dropped."""
    for k in range(1, len(stack)):
        stack[k][(stack[:k] == stack[k]).any(axis=0)] = 0
    used = np.flatnonzero(stack.any(axis=1))
    return stack[: int(used[-1]) + 1 if len(used) else 0]


def _assemble(packed: list[np.ndarray], seg_shapes: np.ndarray, dtype: type) -> list[Plane]:
    """Planes stored over the images that have them, from per-image stacks of planes."""
    sizes = seg_shapes[:, 0] * seg_shapes[:, 1]
    planes = []
    for k in range(max(len(p) for p in packed)):
        images = np.array([i for i, p in enumerate(packed) if len(p) > k], np.int64)
        base = np.full(len(packed), -1, np.int64)
        base[images] = np.concatenate([[0], np.cumsum(sizes[images])[:-1]])
        data = np.zeros(int(sizes[images].sum()), dtype)
        for i in images:
            data[base[i]:base[i] + sizes[i]] = packed[i][k]
        planes.append(Plane(data, base, images, full=False))
    return planes
