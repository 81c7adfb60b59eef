"""The demo world's renderer: deterministic, labels consistent with pixels, fidelity degrades recognisability."""

from __future__ import annotations

import numpy as np

from probescope.core.demo import world


def test_label_table_is_broden_like():
    assert len(world.COLORS) == 11
    assert [lb.number for lb in world.LABELS] == list(range(1, len(world.LABELS) + 1))
    assert all(name.endswith("-c") for name in world.COLORS)
    assert all(name.endswith("-s") for name in world.SCENES)
    assert len(world.LABELS) >= 50


def test_render_is_deterministic_and_shaped():
    a = world.render_batch(3, 5)
    b = world.render_batch(3, 5)
    for x, y in zip(a, b):
        assert x.scene == y.scene
        np.testing.assert_array_equal(x.image, y.image)
        assert x.image.shape == (world.IMAGE_SIZE, world.IMAGE_SIZE, 3) and x.image.dtype == np.uint8
        assert set(x.layers) == set(world.LAYERS)
        assert all(m.shape == (world.SEG_SIZE, world.SEG_SIZE) for m in x.layers.values())
        assert x.attributes.shape == (len(world.ATTRIBUTE_NAMES),)


def test_every_pixel_has_a_colour_and_an_object_in_clean_scenes():
    for sample in world.render_batch(1, 28):
        assert (sample.layers["color"] > 0).all()
        assert (sample.layers["object"] > 0).all()


def test_parts_lie_inside_objects_and_subparts_inside_parts():
    part_of = {"crown": "tree", "trunk": "tree", "roof": "house", "wheel": "car", "sail": "boat", "petal": "flower"}
    for sample in world.render_batch(2, 40):
        part1, part2, obj = sample.layers["part_1"], sample.layers["part_2"], sample.layers["object"]
        assert ((part2 == 0) | (part1 > 0)).all()
        for part, owner in part_of.items():
            where = part1 == world.label_number(part)
            assert (obj[where] == world.label_number(owner)).all()


def test_scenes_are_compositions():
    """An autumn forest differs from a forest only in the crown colours: the composition is what defines it."""
    crown = world.label_number("crown")
    warm = {world.label_number(c) for c in ("orange-c", "red-c", "yellow-c")}
    autumn = world.render_batch(4, 10, scenes=["autumn_forest-s"])
    green = world.render_batch(4, 10, scenes=["forest-s"])

    def warm_crown_share(samples):
        on_crown = np.concatenate([s.layers["color"][s.layers["part_1"] == crown] for s in samples])
        return np.isin(on_crown, list(warm)).mean()

    assert warm_crown_share(autumn) > 0.9 and warm_crown_share(green) < 0.05


def test_attributes_sum_to_one_per_group():
    s = world.render_batch(5, 1)[0]
    n_s, n_o = len(world.SCENES), len(world.OBJECTS)
    assert s.attributes[:n_s].sum() == 1.0
    np.testing.assert_allclose(s.attributes[n_s:n_s + n_o].sum(), 1.0, atol=1e-6)
    np.testing.assert_allclose(s.attributes[n_s + n_o:].sum(), 1.0, atol=1e-6)


def test_low_fidelity_adds_noise():
    rng = np.random.default_rng(0)
    clean = world.render_sample(rng, "street-s", 1.0).image.astype(float)
    noisy = world.render_sample(rng, "street-s", 0.0).image.astype(float)

    def roughness(img):
        return np.abs(np.diff(img, axis=1)).mean()

    assert roughness(noisy) > 2 * roughness(clean)
