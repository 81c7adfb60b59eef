"""Label store, thresholds, unit masks, IoU and Detection Accuracy against brute-force code on small data."""

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from oracles.synthetic_broden import ListBroden, concept_mask
from probescope.core.data.broden import Label
from probescope.core.dissection.counts import DatasetCounts, RegionSet
from probescope.core.dissection.formula import AND, AND_NOT, OPERATORS, OR, Formula
from probescope.core.dissection.labels import LabelStore
from probescope.core.dissection.masks import formula_mask, image_masks
from probescope.core.dissection.unit_scorer import UnitScorer, overlap
from probescope.core.dissection.unitmasks import unit_mask_regions, unit_thresholds
from probescope.core.errors import InputError

N_LABELS = 12


def random_dataset(seed: int = 0, n: int = 12, varied_shapes: bool = True) -> ListBroden:
    """Colours, objects, 0-3 part layers (with repeated labels), scenes that sometimes also appear pixel-level."""
    rng = np.random.default_rng(seed)
    layers, whole, shapes = [], [], []
    for _i in range(n):
        shape = (int(rng.integers(5, 9)), int(rng.integers(5, 9))) if varied_shapes else (6, 7)
        shapes.append(shape)
        img = [("color", rng.integers(1, 4, shape)), ("object", rng.integers(0, 8, shape) * (rng.random(shape) < .7))]
        for _ in range(int(rng.integers(0, 4))):
            img.append(("part", rng.choice([0, 0, 7, 8, 9], shape)))
        layers.append([(c, m.astype(np.int32)) for c, m in img])
        whole.append([("scene", int(rng.choice([10, 11, 5])))] if rng.random() < 0.8 else [])
    labels = {k: Label(k, f"l{k}", "scene" if k >= 10 else "object") for k in range(1, N_LABELS)}
    return ListBroden(layers, whole, labels, shapes)


def brute_masks(ds: ListBroden) -> dict[int, np.ndarray]:
    """label -> flat bool mask over all pixels (image after image)."""
    out = {}
    for c in range(1, N_LABELS):
        out[c] = np.concatenate([concept_mask(ds.pixel_layers(i), ds.image_labels(i), c, ds.seg_shape(i)).ravel()
                                 for i in range(ds.n_images)])
    return out


def region_weights(store: LabelStore, pixels: np.ndarray) -> np.ndarray:
    """Each region's pixels among `pixels` (global pixel indices): a mask as the engine holds it."""
    return np.bincount(store.region_of(pixels), minlength=store.n_regions).astype(np.int64)


def pixel_set(store: LabelStore, pixels: np.ndarray) -> RegionSet:
    inside = region_weights(store, pixels)
    regions = np.flatnonzero(inside)
    return RegionSet(store, regions, inside[regions])


def image_ids(ds: ListBroden) -> np.ndarray:
    return np.concatenate([np.full(ds.seg_shape(i)[0] * ds.seg_shape(i)[1], i) for i in range(ds.n_images)])


@pytest.mark.parametrize("varied", [True, False])
def test_store_counts_match_brute_force(varied):
    ds = random_dataset(1, varied_shapes=varied)
    store = LabelStore.build(ds)
    masks = brute_masks(ds)
    img = image_ids(ds)
    for c, m in masks.items():
        assert store.label_totals[c] == m.sum(), c
        assert store.label_images[c] == len(np.unique(img[m])), c
        regions = store.label_regions(c)
        assert (np.flatnonzero(np.isin(store.region_of(np.arange(store.n_pixels)), regions)) == np.flatnonzero(m)).all()
    # every pixel of a region carries the same labels, and the regions' pixel counts add up
    region = store.region_of(np.arange(store.n_pixels))
    for c, m in masks.items():
        assert all(len(set(m[region == r])) == 1 for r in np.unique(region[m])), c
    assert (np.bincount(region, minlength=store.n_regions) == store.region_pixels).all()
    pixels = np.sort(np.random.default_rng(2).choice(store.n_pixels, 50, replace=False))
    s = pixel_set(store, pixels)
    counts = s.label_counts()
    assert s.total == 50
    for c, m in masks.items():
        assert counts[c] == m[pixels].sum()
    assert (store.image_of(np.arange(store.n_pixels)) == img).all()
    assert list(store.concepts(5)) == [c for c in masks if len(np.unique(img[masks[c]])) >= 5]


@pytest.mark.parametrize("seed", [1, 2])
def test_cooccurrence_matches_brute_force(seed):
    ds = random_dataset(seed)
    store = LabelStore.build(ds)
    masks = brute_masks(ds)
    cooc = store.cooccurrence()
    pixels = np.flatnonzero(np.random.default_rng(seed).random(store.n_pixels) < 0.3)
    s = pixel_set(store, pixels)
    inside = store.cooccurrence(s.regions, s.weights)
    sub = np.zeros(store.n_pixels, bool)
    sub[pixels] = True
    for a, ma in masks.items():
        for b, mb in masks.items():
            assert cooc[a, b] == (ma & mb).sum(), (a, b)
            assert inside[a, b] == (ma & mb & sub).sum(), (a, b)


def test_store_rejects_unknown_labels():
    ds = random_dataset(3, n=2)
    ds._layers[1][0] = ("color", np.full(ds.seg_shape(1), 99, np.int32))
    with pytest.raises(InputError):
        LabelStore.build(ds)


def test_thresholds_are_numpy_quantiles():
    act = np.random.default_rng(0).standard_normal((9, 3, 4, 5)).astype(np.float32)
    t = unit_thresholds(act, 0.005)
    assert (unit_thresholds(act, 0.005, chunk_values=50) == t).all()  # one unit at a time
    for u in range(3):
        assert t[u] == np.quantile(act[:, u].astype(np.float64).ravel(), 0.995)


def brute_unit_mask(maps: np.ndarray, threshold: float, ds) -> np.ndarray:
    out = []
    for i in range(len(maps)):
        up = F.interpolate(torch.from_numpy(maps[i][None, None].astype(np.float32)), size=ds.seg_shape(i),
                           mode="bilinear", align_corners=False)[0, 0].double().numpy()
        out.append((up >= threshold).ravel())
    return np.concatenate(out)


@pytest.mark.parametrize("varied", [True, False])
@pytest.mark.parametrize("chunk_bytes", [4 << 20, 200])
def test_unit_masks_match_full_upsampling(varied, chunk_bytes, monkeypatch):
    """Each region's pixels in the mask, from the pixels inside or those outside (whichever are fewer in a chunk of
    images, one image a chunk when chunk_bytes is small), against upsampling every image."""
    from probescope.core.dissection import unitmasks

    monkeypatch.setattr(unitmasks, "_CHUNK_BYTES", chunk_bytes)
    ds = random_dataset(4, n=30, varied_shapes=varied)
    store = LabelStore.build(ds)
    rng = np.random.default_rng(5)
    maps = rng.standard_normal((30, 3, 3)).astype(np.float32)
    maps[7] = 0.0  # flat images sit exactly at or below the threshold
    relu = np.maximum(maps, 0)  # mostly 0: T = 0 for the broad quantiles, images whose minimum is T
    for m in (maps, relu):
        for q in (0.005, 0.05, 0.3, 0.6, 0.9):
            t = float(np.quantile(m.astype(np.float64).ravel(), 1 - q))
            expected = region_weights(store, np.flatnonzero(brute_unit_mask(m, t, ds)))
            assert (unit_mask_regions(m, t, store, "cpu") == expected).all(), q
    # threshold equal to an image's maximum or minimum: that image must still be upsampled
    for t in (float(maps[3].max()), float(maps[3].min())):
        expected = region_weights(store, np.flatnonzero(brute_unit_mask(maps, t, ds)))
        assert (unit_mask_regions(maps, t, store, "cpu") == expected).all()


@pytest.mark.parametrize("value", [0.0, -0.25, 3.0])
def test_a_dead_unit_masks_every_pixel(value, monkeypatch):
    """A ReLU unit that is almost always 0 has T = 0 and (A >= T) covers the dataset (the protocol's mask): every
    image's minimum reaches T exactly (bilinear weights are >= 0), so no image is upsampled. Other constants are
    upsampled, as float32 rounding of the weights can take an interpolated value below T (the protocol's mask)."""
    from probescope.core.dissection import unitmasks

    ds = random_dataset(6, n=20)
    store = LabelStore.build(ds)
    maps = np.full((20, 5, 5), value, np.float32)
    maps[4, 1, 2] = value + 0.7  # fires once: T stays the constant
    t = float(unit_thresholds(maps[:, None], 0.005)[0])
    assert t == value
    expected = region_weights(store, np.flatnonzero(brute_unit_mask(maps, t, ds)))
    if value == 0.0:
        assert (expected == store.region_pixels).all()
        monkeypatch.setattr(unitmasks, "upsample", lambda *args: pytest.fail("upsampled"))
    assert (unit_mask_regions(maps, t, store, "cpu") == expected).all()


def brute_scores(mask: np.ndarray, g: np.ndarray, img: np.ndarray, n: int) -> tuple[float, float]:
    union = (mask | g).sum()
    iou = (mask & g).sum() / union if union else 0.0
    present = np.bincount(img[g], minlength=n) > 0
    hit = np.bincount(img[mask & g], minlength=n) > 0
    return float(iou), float(hit.sum() / present.sum()) if present.any() else 0.0


@pytest.mark.parametrize("share", [0.1, 0.9, 1.0])
@pytest.mark.parametrize("complement", [None, False, True])
def test_iou_and_da_of_grown_formulas_match_masks(share, complement):
    """Counted through the mask or through its complement (the smaller side when `complement` is None), the same
    exact counts."""
    ds = random_dataset(6, n=20)
    store = LabelStore.build(ds)
    masks = brute_masks(ds)
    img = image_ids(ds)
    rng = np.random.default_rng(7)
    mask = rng.random(store.n_pixels) < share
    mask[img == 3] = share < 0.5  # an image wholly inside, or wholly outside, the mask
    concepts = store.concepts(1)
    counts = DatasetCounts(store, cache_bytes=2000)  # tiny cache: region sets get evicted and rebuilt
    scorer = UnitScorer(counts, region_weights(store, np.flatnonzero(mask)), concepts, complement=complement)
    assert scorer.complement == (share > 0.5 if complement is None else complement)
    assert scorer.n_mask == mask.sum()
    assert (scorer.fired_images() == np.unique(img[mask])).all()
    for k, c in enumerate(concepts):
        assert scorer.atom_ious()[k] == brute_scores(mask, masks[c], img, ds.n_images)[0]
    for _ in range(25):
        atoms = rng.choice(concepts, size=int(rng.integers(1, 4)), replace=False)
        f = Formula(tuple(int(a) for a in atoms), tuple(str(rng.choice(OPERATORS)) for _ in atoms[1:]))
        fm = f.evaluate(masks.get)
        ch = scorer.expand(f, concepts)  # atoms already in f included
        bound = scorer.bound(f, concepts)
        loose = scorer.bound(f, concepts, exact_inside=False)
        for inside, universe in ((True, mask), (False, ~mask)):
            rows = [scorer.atom_rows(np.array([a]))[0 if inside else 1][0, concepts] for a in f.atoms]
            lo, hi = overlap(f.ops, rows, np.array([(masks[c] & universe).sum() for c in concepts]), universe.sum(),
                             (fm & universe).sum())
            for j, c in enumerate(concepts):
                assert lo[j] <= (fm & masks[c] & universe).sum() <= hi[j]
        for j, c in enumerate(concepts):
            for o, gm in enumerate((fm | masks[c], fm & masks[c], fm & ~masks[c])):
                assert ch.iou[o, j] == brute_scores(mask, gm, img, ds.n_images)[0]
                assert (ch.inter[o, j], ch.size[o, j]) == ((gm & mask).sum(), gm.sum())
                assert ch.same[o, j] == (gm == fm).all()
                assert loose[o, j] >= bound[o, j] >= ch.iou[o, j]
        assert scorer.da(f) == brute_scores(mask, fm, img, ds.n_images)[1]
        assert counts.record(f).n == fm.sum() and scorer.counts(f) == ((fm & mask).sum(), fm.sum())
        g = Formula(tuple(int(a) for a in rng.choice(concepts, size=2, replace=False)), (str(rng.choice(OPERATORS)),))
        assert counts.same_mask(f, g) == (fm == g.evaluate(masks.get)).all()
        for op in (OR, AND):  # the same atoms in another order: the same mask, known without counting
            h = Formula(f.atoms, (op,) * len(f.ops))
            shuffled = Formula(tuple(int(a) for a in rng.permutation(f.atoms)), h.ops)
            assert counts.same_mask(h, shuffled) and (h.evaluate(masks.get) == shuffled.evaluate(masks.get)).all()


@pytest.mark.parametrize("share", [0.15, 0.85])
def test_category_scope_counts_the_unit_where_its_mask_meets_the_category(share):
    """NetDissect-Lite's tally_units_cat: an image counts the unit's pixels for category K when a label of K lies
    under the mask there (pixel-level) or the image has an image-level label of K."""
    ds = random_dataset(9, n=16)
    store = LabelStore.build(ds)
    masks = brute_masks(ds)
    img = image_ids(ds)
    mask = np.random.default_rng(3).random(store.n_pixels) < share
    counts = DatasetCounts(store)
    scope = counts.category_scope
    scorer = UnitScorer(counts, region_weights(store, np.flatnonzero(mask)), store.concepts(1), scope)
    assert scorer.complement == (share > 0.5)
    category = {c: ds.labels[c].category for c in masks}
    for cats in ({"object"}, {"scene"}, {"object", "scene"}):
        hit = {i for c, m in masks.items() if category[c] in cats for i in np.unique(img[m & mask])}
        expected = int(sum(mask[img == i].sum() for i in hit))
        bits = int(np.bitwise_or.reduce([scope.label_bit[c] for c in masks if category[c] in cats]))
        assert scorer.unit_size(bits) == expected, cats
    for k, c in enumerate(store.concepts(1)):
        inter = (masks[c] & mask).sum()
        size = scorer.unit_size(int(scope.label_bit[c]))
        assert scorer.atom_ious()[k] == inter / (size + masks[c].sum() - inter)


def test_per_image_masks_for_display():
    ds = random_dataset(8, n=6)
    store = LabelStore.build(ds)
    masks = brute_masks(ds)
    f = Formula((1, 7, 10), (OR, AND_NOT))
    act = np.random.default_rng(9).standard_normal((6, 2, 3, 3)).astype(np.float32)
    t = 0.5
    full = brute_unit_mask(act[:, 1], t, ds)
    fm = f.evaluate(masks.get)
    for i in range(6):
        lo, hi = store.image_pixel_range(i)
        um, gm = image_masks(store, act, 1, t, i, f)
        assert gm.shape == um.shape == ds.seg_shape(i)
        assert (um.ravel() == full[lo:hi]).all() and (gm.ravel() == fm[lo:hi]).all()
        g = Formula((2, 3), (AND,))
        assert (formula_mask(store, i, g).ravel() == g.evaluate(masks.get)[lo:hi]).all()


def test_float32_threshold_is_equivalent():
    from probescope.core.dissection.unitmasks import float32_threshold

    rng = np.random.default_rng(11)
    values = rng.standard_normal(2000).astype(np.float32)
    for t in [*rng.standard_normal(50), float(values[3]), float(np.nextafter(values[5], np.float32(9))) - 1e-12]:
        t32 = float32_threshold(t)
        assert ((values.astype(np.float64) >= t) == (values >= np.float32(t32))).all()


@pytest.mark.parametrize("shapes", [((7, 7), (112, 112)), ((13, 17), (200, 150)), ((56, 56), (112, 112)),
                                    ((112, 112), (56, 56)), ((1, 1), (9, 9)), ((5, 5), (5, 5))])
def test_views_bilinear_agrees_with_torch(shapes):
    """The views' NumPy upsampling (the window's process has no torch) is torch's bilinear kernel to float32
    rounding, within the margin the mask counting allows for; a mask from it differs only at pixels that close to
    the threshold."""
    from probescope.core.dissection.unitmasks import _ROUNDING_MARGIN, bilinear, unit_mask, upsample

    (h, w), seg = shapes
    maps = (np.random.default_rng(h * w).standard_normal((16, h, w)) * 3).astype(np.float32)
    ours, theirs = bilinear(maps, seg), upsample(maps, seg).numpy()
    scale = np.abs(maps).max()
    assert ours.shape == theirs.shape == (16, *seg) and ours.dtype == np.float32
    assert np.abs(ours - theirs).max() <= _ROUNDING_MARGIN * scale / 4
    t = 0.7
    near = np.abs(theirs[3] - t) <= _ROUNDING_MARGIN * scale
    assert ((unit_mask(maps[3], t, seg) == (theirs[3] >= np.float32(t))) | near).all()
