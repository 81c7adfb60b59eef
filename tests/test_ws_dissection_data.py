"""The Dissection workspace's plain computations, against hand-worked cases and brute force: overlays (outline,
concept stripes, heat palette), peak activations and top images, the cache path, the table's predicates and summary,
and the length histogram."""

from __future__ import annotations

import numpy as np

from probescope.app.dissection.overlays import CONCEPT_COLOR, UNIT_COLOR, OverlayOptions, compose, heat_colors, nearest
from probescope.core.dissection.formula import Formula
from probescope.core.dissection.results import DissectionResult, Explanation, UnitResult
from probescope.core.dissection.settings import DissectionSettings
from probescope.jobs.dissection import layer_data as data
from probescope.jobs.dissection import rows as unit_rows
from probescope.jobs.dissection.layer import result_path


def test_compose_outlines_the_unit_and_stripes_the_concept():
    image = np.full((20, 20, 3), 100, np.uint8)
    unit = np.zeros((20, 20), bool)
    unit[5:15, 5:15] = True
    concept = np.zeros((20, 20), bool)
    concept[0:4, 0:20] = True
    out = compose(image, None, unit, concept, OverlayOptions(opacity=0.5))
    yellow = (out == UNIT_COLOR).all(axis=2)
    assert yellow[5:15, 4].any() and yellow[4, 5:15].any()  # outline around the square
    assert not yellow[8:12, 8:12].any() and not yellow[18:, 18:].any()  # not inside, not far away
    inside = out[0:4].reshape(-1, 3)
    assert (inside != 100).any(axis=1).sum() > 0.4 * len(inside)  # stripes cover about half the concept
    assert (out[16:] == 100).all()  # untouched elsewhere
    cyan_rows = (out[:4] == CONCEPT_COLOR).all(axis=2)
    assert cyan_rows[3].all()  # the concept's edge is drawn in full


def test_compose_heat_weights_by_activation():
    image = np.zeros((4, 4, 3), np.uint8)
    heat = np.zeros((4, 4))
    heat[0, 0] = 1.0
    out = compose(image, heat, np.zeros((4, 4), bool), None, OverlayOptions(opacity=1.0))
    assert (out[0, 0] == heat_colors(np.array(1.0))).all() and (out[1:, 1:] == 0).all()
    assert (heat_colors(np.array([0.0, 1.0])) == [[0, 0, 0], [255, 255, 160]]).all()


def test_nearest_doubles_a_segmentation():
    seg = np.array([[1, 2], [3, 4]])
    assert (nearest(seg, (4, 4)) == np.repeat(np.repeat(seg, 2, 0), 2, 1)).all()


def test_peaks_and_top_images_match_brute_force():
    rng = np.random.default_rng(0)
    act = rng.normal(size=(37, 5, 3, 4)).astype(np.float32)
    peaks = data.unit_peaks(act, chunk=8)
    assert np.array_equal(peaks, act.max(axis=(2, 3)))
    layer = data.LayerData("k", DissectionSettings(), "layer", "model", None, None, act, peaks, None)
    for u in range(5):
        assert list(layer.top_images(u, 6)) == sorted(range(37), key=lambda i: -act[i, u].max())[:6]


def test_result_path_changes_with_every_input():
    s = DissectionSettings()
    base = result_path("/c", {"m": 1}, {"d": 1}, s)
    assert base == result_path("/c", {"m": 1}, {"d": 1}, DissectionSettings(device="cpu", cache_mb=5))
    others = {result_path("/c", {"m": 2}, {"d": 1}, s), result_path("/c", {"m": 1}, {"d": 2}, s),
              result_path("/c", {"m": 1}, {"d": 1}, DissectionSettings(max_length=2))}
    assert base not in others and len(others) == 3


def _explanation(atoms, iou, da):
    f = Formula(tuple(atoms), ("AND",) * (len(atoms) - 1))
    return Explanation(f, f.text({1: "sky", 2: "red-c", 3: "sea", 4: "boat"}), iou, da)


def _result() -> DissectionResult:
    labels = {1: ("sky", "object"), 2: ("red-c", "color"), 3: ("sea", "object"), 4: ("boat", "object")}
    r = DissectionResult({}, {}, {}, labels, 3)
    specs = {0: ((1,), 0.10, (1, 2), (1,)), 1: ((2,), 0.02, (2, 3, 4), (2, 3)), 2: ((3,), 0.05, (3,), (3,))}
    for u, (nd, iou, comp, stop) in specs.items():
        r.units[u] = UnitResult(u, 1.0, 10, 3, _explanation(nd, iou, 0.5),
                                {"iou": _explanation(comp, iou + 0.1, 0.4), "da-select": _explanation(nd, iou, 0.5),
                                 "da-stop": _explanation(stop, iou + 0.05, 0.6)}, [], [])
    return r


def test_rows_predicates_and_summary():
    result = _result()
    rows = [unit_rows.unit_row(result, result.units[u]) for u in range(3)]
    assert [r.category for r in rows] == ["object", "color", "object"]
    assert [unit_rows.is_specialised(r) for r in rows] == [True, False, False]  # unit 2: both of length 1
    assert [unit_rows.is_interpretable(r) for r in rows] == [True, False, True]
    assert unit_rows.summary(rows) == ("2 of 3 units interpretable (IoU > 0.04); 2 distinct concepts (object 2); "
                                  "1 specialised")
    assert rows[1].concepts() == {"red-c", "((red-c AND sea) AND boat)", "(red-c AND sea)"}


def test_length_histogram_counts_units_per_length():
    hist = unit_rows.length_histogram(_result(), 3)
    assert hist["compositional"] == ([1, 2, 3], [1, 1, 1])
    assert hist["da-stop"] == ([1, 2, 3], [2, 1, 0])
    assert hist["da-select"] == ([1, 2, 3], [3, 0, 0])
