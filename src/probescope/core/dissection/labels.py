"""Compact in-memory label store: every label map of a Broden dataset read once, packed into *regions*.

A region is the set of pixels of one image that carry the same pixel-level labels (colour, object, part layers: the
same tuple, wherever they lie in the image). Every formula holds on all pixels of a region or on none, so counts over
pixel sets become weighted counts over regions, and a formula's mask over the whole dataset is a sorted list of
region numbers. Regions are numbered image after image (those of image i are `image_regions[i]:image_regions[i+1]`);
each pixel keeps only its region's number within its image (uint16), which the unit masks need to find their regions.

Per region the store keeps its labels, one per plane (plane k = the k-th label layer after removing a label that an
earlier layer already gives at that pixel; part layers are OR-ed), and its pixel count. Image-level labels (scenes,
textures) cover whole images and are kept per image; a label that is both image-level and pixel-level in one image
counts once.

ADE20K scale (22,210 images at 112x112, 278M pixels, a few hundred regions per image): the per-pixel region numbers
take 556 MB, the regions themselves a few tens of MB.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import numpy as np

from probescope.core.errors import InputError
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report

if TYPE_CHECKING:  # scipy.sparse is imported where matrices are made: it is an eighth of the window's imports
    import scipy.sparse as sp


class LabelSource(Protocol):
    """What the store reads: probescope.core.data.broden.BrodenDataset or any object with the same per-image methods."""

    n_images: int
    labels: dict

    def pixel_layers(self, i: int) -> list[tuple[str, np.ndarray]]: ...

    def image_labels(self, i: int) -> list[tuple[str, int]]: ...

    def seg_shape(self, i: int) -> tuple[int, int]: ...


class LabelStore:
    """All labels of a dataset, packed into regions for fast counts (see the module docstring)."""

    SENT_ONCE = True  # never altered once built: a task that sends it again refers to it by number

    def __init__(self, seg_shapes: np.ndarray, pixel_region: np.ndarray, image_regions: np.ndarray,
                 region_labels: np.ndarray, region_pixels: np.ndarray, image_labels: sp.csr_matrix,
                 names: dict[int, str], categories: dict[int, str]):
        self.seg_shapes = seg_shapes
        self.n_images = len(seg_shapes)
        sizes = seg_shapes[:, 0].astype(np.int64) * seg_shapes[:, 1]
        self.offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        self.n_pixels = int(self.offsets[-1])
        self._sizes = sizes
        self._uniform = int(sizes[0]) if len(sizes) and (sizes == sizes[0]).all() else 0
        self.pixel_region = pixel_region  # (n_pixels,) region number within the pixel's image
        self.image_regions = image_regions  # (n_images + 1,) int64: first region of each image
        self.region_labels = region_labels  # (planes, n_regions): pixel-level labels, 0 = none
        self.region_pixels = region_pixels  # (n_regions,) int64
        self.n_regions = len(region_pixels)
        self.region_image = np.repeat(np.arange(self.n_images, dtype=np.int32), np.diff(image_regions))
        self.image_labels = image_labels  # (N, L) 0/1 int32: image-level labels
        self.n_labels = image_labels.shape[1]
        self.names = names
        self.categories = categories
        self.plane_has = [np.bincount(p, minlength=self.n_labels) > 0 for p in region_labels]  # label in plane?
        self.image_hist = self.histogram()  # (N, L) int64: pixels of each label in each image (both kinds)
        self.label_totals = np.asarray(self.image_hist.sum(axis=0)).ravel().astype(np.int64)
        hist_csc = self.image_hist.tocsc()
        self.label_images = np.diff(hist_csc.indptr).astype(np.int64)  # images where each label is present
        self._label_image_lists = hist_csc
        self._image_level_labels = set(np.flatnonzero(np.diff(image_labels.tocsc().indptr)).tolist())
        self._image_label_cols: dict[int, np.ndarray] = {}
        self._label_regions: sp.csr_matrix | None = None
        self._image_labels_t = image_labels.T.tocsr().astype(np.float64)
        self.files: Path | None = None  # the folder its arrays are kept in (label_cache), for worker processes

    # ---- construction -------------------------------------------------------------------------------------------

    @classmethod
    def build(cls, source: LabelSource, progress: ProgressCallback | None = None,
              cancel: CancelCheck | None = None) -> LabelStore:
        """Read every image's label maps once (the only pass over the dataset's files)."""
        n = int(source.n_images)
        index = getattr(source, "index_path", None)  # named when the dataset's tables and maps disagree
        if n == 0:
            raise InputError("the dataset has no images", index)
        max_label = max(source.labels, default=0)
        n_labels = max_label + 1
        seg_shapes = np.array([tuple(int(x) for x in source.seg_shape(i)) for i in range(n)], np.int64).reshape(n, 2)
        sizes = seg_shapes[:, 0] * seg_shapes[:, 1]
        offsets = np.concatenate([[0], np.cumsum(sizes)])
        pixel_region = np.zeros(int(offsets[-1]), np.uint16 if sizes.max() <= 1 << 16 else np.int32)
        per_image_labels: list[np.ndarray] = []
        per_image_pixels: list[np.ndarray] = []
        img_rows, img_cols = [], []
        for i in range(n):
            if i % 64 == 0:
                check_cancel(cancel)
                report(progress, i / n, f"reading label maps {i}/{n}")
            shape = tuple(int(x) for x in seg_shapes[i])
            whole = sorted({int(num) for _, num in source.image_labels(i) if int(num) > 0})
            if whole and whole[-1] > max_label:
                raise InputError(f"image {i}: label numbers outside the label table", index)
            layers = [np.asarray(m) for _, m in source.pixel_layers(i)]
            for m in layers:
                if m.shape != shape:
                    raise InputError(f"image {i}: label map is {m.shape}, segmentation size is {shape}", index)
            stack = (np.stack([m.reshape(-1) for m in layers]).astype(np.int64) if layers
                     else np.zeros((0, shape[0] * shape[1]), np.int64))
            if stack.size and (stack.min() < 0 or stack.max() > max_label):
                raise InputError(f"image {i}: label numbers outside the label table", index)
            if whole:
                stack[np.isin(stack, whole)] = 0  # covered by the whole-image label already
            labels, pixels, local = _regions(_dedupe(stack), n_labels)
            pixel_region[offsets[i]:offsets[i + 1]] = local
            per_image_labels.append(labels)
            per_image_pixels.append(pixels)
            img_rows += [i] * len(whole)
            img_cols += whole
        report(progress, 1.0, "packing regions")
        depth = max(len(lb) for lb in per_image_labels)
        dtype = np.uint16 if max_label < 1 << 16 else np.int32
        region_labels = np.zeros((depth, sum(len(p) for p in per_image_pixels)), dtype)
        image_regions = np.concatenate([[0], np.cumsum([len(p) for p in per_image_pixels])]).astype(np.int64)
        for i, lb in enumerate(per_image_labels):
            region_labels[:len(lb), image_regions[i]:image_regions[i + 1]] = lb
        import scipy.sparse as sp  # (scipy.sparse: an eighth of the window's imports, see the top)

        image_labels = sp.csr_matrix((np.ones(len(img_rows), np.int32), (img_rows, img_cols)), shape=(n, n_labels))
        names = {int(k): v.name for k, v in source.labels.items()}
        categories = {int(k): v.category for k, v in source.labels.items()}
        return cls(seg_shapes, pixel_region, image_regions, region_labels,
                   np.concatenate(per_image_pixels).astype(np.int64), image_labels, names, categories)

    def histogram(self, regions: np.ndarray | None = None, weights: np.ndarray | None = None) -> sp.csr_matrix:
        """Per image, the weighted count of each label over a set of regions (default: every region, weighted by
        its pixels: the pixels of each label in each image). Image-level labels count the set's weight in the
        image."""
        if regions is None:
            regions, weights = np.arange(self.n_regions), self.region_pixels
        labels = self.region_labels[:, regions].astype(np.int64)
        images = self.region_image[regions]
        keep = labels > 0
        rows = np.broadcast_to(images, labels.shape)[keep]
        vals = np.broadcast_to(weights, labels.shape)[keep]
        per_image = np.bincount(images, weights, minlength=self.n_images)
        il = self.image_labels.tocoo()
        rows = np.concatenate([rows, il.row])
        cols = np.concatenate([labels[keep], il.col])
        vals = np.concatenate([vals, per_image[il.row]])
        import scipy.sparse as sp  # (scipy.sparse: an eighth of the window's imports, see the top)

        hist = sp.csr_matrix((np.rint(vals).astype(np.int64), (rows, cols)), shape=(self.n_images, self.n_labels))
        hist.sum_duplicates()
        hist.eliminate_zeros()
        return hist

    # ---- queries ------------------------------------------------------------------------------------------------

    @property
    def nbytes(self) -> int:
        return (self.pixel_region.nbytes + self.region_labels.nbytes + self.region_pixels.nbytes
                + self.region_image.nbytes + self.image_hist.data.nbytes + self.image_hist.indices.nbytes)

    def concepts(self, min_samples: int) -> np.ndarray:
        """Label numbers present in at least `min_samples` images (the papers' minimum-images filter)."""
        return np.flatnonzero(self.label_images >= max(1, min_samples))

    def image_of(self, pixels: np.ndarray) -> np.ndarray:
        """Image index of each global pixel index."""
        if self._uniform:
            return pixels // self._uniform
        return np.searchsorted(self.offsets, pixels, side="right") - 1

    def region_of(self, pixels: np.ndarray) -> np.ndarray:
        """Region number of each global pixel index."""
        return self.image_regions[self.image_of(pixels)] + self.pixel_region[pixels]

    def image_pixel_range(self, i: int) -> tuple[int, int]:
        return int(self.offsets[i]), int(self.offsets[i + 1])

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

    def label_regions(self, label: int) -> np.ndarray:
        """Sorted numbers of the regions carrying `label` (pixel-level, or through a whole-image label)."""
        if self._label_regions is None:
            planes, n_regions = self.region_labels.shape
            cols = np.tile(np.arange(n_regions, dtype=np.int64), planes)
            rows = self.region_labels.reshape(-1).astype(np.int64)
            keep = rows > 0
            import scipy.sparse as sp  # (scipy.sparse: an eighth of the window's imports, see the top)

            self._label_regions = sp.csr_matrix((np.ones(int(keep.sum()), np.int8), (rows[keep], cols[keep])),
                                                shape=(self.n_labels, n_regions))
        m = self._label_regions
        regions = m.indices[m.indptr[label]:m.indptr[label + 1]].astype(np.int64)
        whole = self.image_has(label)
        if whole is None:
            return regions
        marked = whole[self.region_image]
        marked[regions] = True
        return np.flatnonzero(marked)

    def label_counts(self, regions: np.ndarray, weights: np.ndarray) -> np.ndarray:
        """Weighted label counts over regions: sum of `weights` of the regions carrying each label (int64,
        n_labels). With weights = pixels, these are pixel counts."""
        labels = self.region_labels[:, regions]
        counts = np.bincount(labels.reshape(-1), np.tile(weights, len(labels)), minlength=self.n_labels)
        counts = np.rint(counts).astype(np.int64)
        counts[0] = 0
        if self._image_level_labels:
            per_image = np.bincount(self.region_image[regions], weights, minlength=self.n_images)
            counts += np.rint(self._image_labels_t @ per_image).astype(np.int64)
        return counts

    def cooccurrence(self, regions: np.ndarray | None = None, weights: np.ndarray | None = None) -> np.ndarray:
        """n(a AND b) for all label pairs over a weighted set of regions (default: the whole dataset, in pixels):
        int64 (n_labels, n_labels).

        Pixel-level pairs come from pairs of planes of each region (a region's labels are distinct across planes).
        With IL the image-level incidence, H the set's per-image histogram and P its per-image weight, a pair where a
        label is image-level in image i counts H[i, other]: IL'H + H'IL - IL' diag(P) IL (the last term removes
        pairs counted twice).
        """
        if regions is None:
            regions, weights = np.arange(self.n_regions), self.region_pixels
        n_labels = self.n_labels
        labels = self.region_labels[:, regions].astype(np.int64)
        pairs = np.zeros(n_labels * n_labels, np.float64)
        for k in range(1, len(labels)):
            for j in range(k):
                both = (labels[j] > 0) & (labels[k] > 0)
                pairs += np.bincount(labels[j][both] * n_labels + labels[k][both], weights[both],
                                     minlength=len(pairs))
        pixel_level = np.bincount(labels.reshape(-1), np.tile(weights, len(labels)), minlength=n_labels)
        pixel_level[0] = 0
        out = np.rint(pairs).astype(np.int64).reshape(n_labels, n_labels)
        out = out + out.T
        out[np.diag_indices(n_labels)] += np.rint(pixel_level).astype(np.int64)
        il = self.image_labels.astype(np.int64)
        h = self.histogram(regions, weights)
        per_image = np.bincount(self.region_image[regions], weights, minlength=self.n_images)
        both_whole = il.T @ il.multiply(np.rint(per_image).astype(np.int64)[:, None])
        out += (il.T @ h).toarray() + (h.T @ il).toarray() - both_whole.toarray()
        return out


def _dedupe(stack: np.ndarray) -> np.ndarray:
    """Layers in their order with a label that an earlier layer already gives at that pixel zeroed (part layers are
    OR-ed), trailing empty layers dropped."""
    for k in range(1, len(stack)):
        stack[k][(stack[:k] == stack[k]).any(axis=0)] = 0
    used = np.flatnonzero(stack.any(axis=1))
    return stack[: int(used[-1]) + 1 if len(used) else 0]


def _regions(planes: np.ndarray, n_labels: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One image's regions: (labels (planes, regions), pixels per region, region of each pixel)."""
    size = planes.shape[1]
    code = np.zeros(size, np.int64)
    for plane in planes:  # one integer per distinct label tuple, renumbered densely after each plane
        _, code = np.unique(code * n_labels + plane, return_inverse=True)
    _, first, local, pixels = np.unique(code, return_index=True, return_inverse=True, return_counts=True)
    return planes[:, first], pixels, local
