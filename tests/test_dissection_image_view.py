"""The layer's view of one image (image_view.py): against the brute force of tests/oracles on a generated problem and
on the demo world with the shipped demo model."""

from __future__ import annotations

import numpy as np
import pytest

from oracles import segmentation_reference as oracle
from oracles.synthetic_broden import SyntheticBroden, SyntheticSpec, planted_formulas, synthetic_activations
from probescope.core.dissection.engine import dissect
from probescope.core.dissection.image_view import METHODS, concept_colors, layer_colors, segment_image
from probescope.core.dissection.labels import LabelStore
from probescope.core.dissection.settings import DissectionSettings
from probescope.core.errors import InputError

SEARCHES = ("iou", "da-select", "da-stop")


@pytest.fixture(scope="module")
def synthetic():
    """A 40-image generated problem whose 16 units answer planted formulas, dissected with every search."""
    data = SyntheticBroden(SyntheticSpec(n_images=40, seg_size=32, feat_size=7, n_objects=12, n_parts=6,
                                         n_scenes=5, seed=4))
    activations = synthetic_activations(data, planted_formulas(data, 16, seed=4), noise=0.2, seed=4)
    store = LabelStore.build(data)
    settings = DissectionSettings(quantile=0.05, searches=SEARCHES, max_length=2, min_samples=2)  # dense masks
    return data, store, activations, dissect(store, activations, settings)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """60 demo-world images through the shipped demo model's layer4 (128 units at 8x8), dissected."""
    from probescope.core.data.activations import extract_activations
    from probescope.core.data.broden import BrodenDataset
    from probescope.core.demo.dataset import write_demo_dataset
    from probescope.core.models.loading import load_model

    root = write_demo_dataset(tmp_path_factory.mktemp("demo") / "data", n_images=60)
    data = BrodenDataset.open(root)
    activations = extract_activations(load_model("demo"), "layer4", data, None)
    store = LabelStore.build(data)
    return data, store, activations, dissect(store, activations, DissectionSettings(max_length=2, min_samples=2))


def _check_against_oracle(data, store, activations, result, image: int, method: str, min_iou: float):
    view = segment_image(result, activations[image], store=store, image=image, method=method, min_iou=min_iou)
    shape = tuple(int(s) for s in store.seg_shapes[image])
    ref = oracle.segment(result, activations[image], shape, method, min_iou, data.pixel_layers(image),
                         data.image_labels(image))
    assert [u.unit for u in view.units] == ref.units
    labels = np.array([c.label for c in view.concepts] + [None], object)[view.segmentation]
    assert (labels == ref.drawn).all()
    units = np.array([u.unit for u in view.units] + [-1])[view.winner]
    assert (units == ref.winner).all()
    for c in view.concepts:
        assert c.iou == pytest.approx(ref.iou[c.label], abs=1e-12)
        assert c.drawn_iou == pytest.approx(ref.drawn_iou[c.label], abs=1e-12)
        assert c.drawn == int((ref.drawn == c.label).sum()) and set(c.units) == {u for u in ref.units
                                                                                 if ref.labels[u] == c.label}
    for y, x in [(0, 0), (shape[0] // 2, shape[1] // 3), (shape[0] - 1, shape[1] - 1), (5, 7)]:
        here = view.covering(y, x)
        assert [c.unit for c in here] == ref.covering[(y, x)]
        for c in here:
            assert c.activation == pytest.approx(ref.activation[(c.unit, y, x)], rel=1e-6)
            assert c.label == ref.labels[c.unit] and c.activation >= c.threshold
    return view


@pytest.mark.parametrize("method", ["netdissect", *SEARCHES])
def test_equals_brute_force_on_a_generated_problem(synthetic, method):
    data, store, activations, result = synthetic
    for image in (0, 7, 23):
        for min_iou in (0.0, 0.2):
            view = _check_against_oracle(data, store, activations, result, image, method, min_iou)
            assert len(view.units) >= 2 or min_iou > 0


@pytest.mark.parametrize("method", ["netdissect", "iou"])
def test_equals_brute_force_on_the_demo_world(demo, method):
    data, store, activations, result = demo
    for image in (2, 31):
        view = _check_against_oracle(data, store, activations, result, image, method, 0.02)
        assert len(view.units) >= 3 and (view.segmentation >= 0).any()


def test_the_image_labels_and_what_the_units_see(demo):
    """The image's own labels are its label maps' (scene covering every pixel); units explained by a concept the
    image holds agree with it better than by chance."""
    data, store, activations, result = demo
    view = segment_image(result, activations[2], store=store, image=2, method="iou")
    pixels = 64 * 64
    names = {lb.name: lb.pixels for lb in view.labels}
    assert data.labels[data.image_labels(2)[0][1]].name in names
    assert max(names.values()) == pixels  # the scene, an image-level label
    for _, layer in data.pixel_layers(2):
        for n in np.unique(layer[layer > 0]):
            assert data.labels[int(n)].name in names
    assert sum(lb.pixels for lb in view.labels if lb.category == "color") == pixels  # every pixel has a colour
    agreeing = [c for c in view.concepts if c.truth]
    assert agreeing and max(c.iou for c in agreeing) > 0.3


def test_colours_stay_with_their_concepts(synthetic):
    data, store, activations, result = synthetic
    colors = layer_colors(result, "iou")
    views = [segment_image(result, activations[i], store=store, image=i, method="iou") for i in range(6)]
    for view in views:
        for c in view.concepts:
            assert c.color == colors[c.label]
    palette = concept_colors([f"c{k}" for k in range(30)])
    assert len(set(palette.values())) == 30
    drawn = views[0].colored()
    assert drawn.shape == (32, 32, 3) and (drawn[views[0].segmentation < 0] == 0).all()


def test_without_labels_and_partial_results(synthetic):
    """An image outside the dataset: its activations and a segmentation size, no agreement. A layer dissected in
    part: only its dissected units take part."""
    data, store, activations, result = synthetic
    view = segment_image(result, activations[3], (32, 32), method="iou")
    full = segment_image(result, activations[3], store=store, image=3, method="iou")
    assert (view.segmentation == full.segmentation).all() and view.labels == [] and view.concepts[0].iou is None
    from dataclasses import replace

    half = replace(result, units={u: r for u, r in result.units.items() if u % 2 == 0})
    part = segment_image(half, activations[3], store=store, image=3, method="iou")
    assert {u.unit for u in part.units} == {u.unit for u in full.units if u.unit % 2 == 0}
    assert part.left_out == 0 and set(METHODS) >= {"netdissect", *SEARCHES}


def test_bad_requests(synthetic):
    data, store, activations, result = synthetic
    with pytest.raises(InputError, match="unknown explanation method"):
        segment_image(result, activations[0], store=store, image=0, method="best")
    with pytest.raises(InputError, match=r"minimum IoU must lie in \[0, 1\]"):
        segment_image(result, activations[0], store=store, image=0, min_iou=2)
    with pytest.raises(InputError, match="16 units"):
        segment_image(result, activations[0, :5], store=store, image=0)
    with pytest.raises(InputError, match="not in the dataset"):
        segment_image(result, activations[0], store=store, image=40)
    with pytest.raises(InputError, match="segmentation size must be given"):
        segment_image(result, activations[0])
    view = segment_image(result, activations[0], store=store, image=0)
    with pytest.raises(InputError, match="outside the 32x32"):
        view.covering(32, 0)


def test_an_image_where_nothing_fires(synthetic):
    data, store, activations, result = synthetic
    quiet = np.full_like(activations[0], -1.0)
    view = segment_image(result, quiet, store=store, image=0, method="iou")
    assert view.units == [] and view.concepts == [] and (view.segmentation == -1).all() and view.left_out == 0
    assert view.labels and view.covering(3, 3) == [] and view.colored().sum() == 0
