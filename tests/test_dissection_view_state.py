"""The Dissection workspace's view state, without a window: its fields are signals, and the view logic (the unit
shown first, the explanation in view, the table's header, the first part of a dataset) is worked out by hand."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from probescope.app.dissection.view_state import DissectionState
from probescope.core.dissection.formula import Formula
from probescope.core.dissection.results import DissectionResult, Explanation, UnitResult
from probescope.core.dissection.settings import WINDOW_SETTINGS, DissectionSettings
from probescope.jobs.dissection.layer_data import LayerData


class _Store:
    n_pixels = 1000


class _Dataset:
    n_images = 50


def _explanation(atoms: list[int], iou: float) -> Explanation:
    formula = Formula.atom(atoms[0])
    for atom in atoms[1:]:
        formula = formula.extend("AND", atom)
    return Explanation(formula, " AND ".join(f"c{a}" for a in atoms), iou, 0.1)


def _layer(units: dict[int, tuple[float, list[int], list[int]]], complete: bool = True, dataset=None) -> LayerData:
    """units: unit -> (its iou search's IoU, that explanation's atoms, da-stop's atoms)."""
    result = DissectionResult({"quantile": 0.005}, {}, {}, {1: ("c1", "object"), 2: ("c2", "object"),
                                                           3: ("c3", "scene")}, 8, complete=complete)
    for u, (iou, atoms, stop) in units.items():
        result.units[u] = UnitResult(u, 0.5, 10, 3, _explanation(atoms[:1], iou / 2),
                                     {"iou": _explanation(atoms, iou), "da-stop": _explanation(stop, iou / 3)}, [], [])
    return LayerData("k", WINDOW_SETTINGS, "layer4", "demo", dataset or _Dataset(), _Store(),
                     np.zeros((1, 8, 1, 1)), np.zeros((1, 8)), result)


def test_each_field_is_a_signal_and_a_new_result_is_a_new_view():
    state = DissectionState()
    seen: list[tuple[str, object]] = []
    state.events.connect(lambda info: seen.append((info.signal.name, info.args[0])))
    state.unit = 3
    state.unit = 3  # no change, no signal
    d = _layer({0: (0.3, [1, 2], [1])})
    state.show_layer(d)
    state.show_layer(replace(d))  # equal but another result: shown again
    assert [name for name, _ in seen] == ["unit", "rows", "data", "rows", "data"]
    assert state.settings == WINDOW_SETTINGS and state.settings.searches == ("iou", "da-select", "da-stop")


def test_the_first_unit_is_the_best_composition_among_the_specialised():
    state = DissectionState()
    # unit 0: best composition but not specialised (da-stop keeps 2 atoms); unit 1: specialised, lower IoU;
    # unit 2: a single concept with the highest IoU of all (not a composition)
    state.show_layer(_layer({0: (0.5, [1, 2], [1, 2]), 1: (0.4, [1, 3], [1]), 2: (0.9, [2], [2])}))
    assert state.first_unit() == 1
    state.show_layer(_layer({0: (0.5, [1, 2], [1, 2]), 2: (0.9, [2], [2])}))
    assert state.first_unit() == 0  # no specialised unit: the best composition
    state.show_layer(_layer({4: (0.2, [2], [2]), 2: (0.2, [3], [3])}))
    assert state.first_unit() == 2  # no composition: the best unit, the lower number on ties


def test_the_explanation_in_view_follows_the_unit_and_method():
    state = DissectionState()
    state.show_layer(_layer({0: (0.5, [1, 2], [1])}))
    state.choose("iou")
    assert state.formula is None and state.formula_label == ""  # no unit selected yet
    state.unit = 0
    state.choose("iou")
    assert state.formula_label == "c1 AND c2"
    assert state.formula is state.data.result.units[0].explanations["iou"].formula
    state.choose("netdissect")
    assert state.formula_label == "c1"
    state.clear()
    assert (state.data, state.rows, state.unit, state.formula, state.formula_label) == (None, {}, -1, None, "")


def test_the_header_says_how_far_and_of_which_images():
    state = DissectionState()
    part = _Dataset()
    d = _layer({0: (0.5, [1, 2], [1]), 1: (0.02, [3], [3])}, complete=False, dataset=part)
    state.show_layer(d)
    header = state.header(d, 0.04)
    assert header.startswith("<b>Units of layer4</b>: 1 of 2 units interpretable (IoU > 0.04)")
    assert header.endswith(" (2 of 8 units so far)")
    state.first_part = (part, 1500)
    assert state.of_first_part(d) and state.refining(object()) and not state.refining(part)
    assert state.header(d, 0.04, (3, 8)).endswith("· <i>on the first 50 of 1,500 images</i>; dissecting all 1,500 "
                                                  "images: 3 of 8 units done")
    state.cut_short = d
    assert state.header(d, 0.04).endswith("(2 of 8 units done: cancelled) · <i>on the first 50 of 1,500 images</i>")
    assert DissectionSettings() != state.settings  # the window's preset is not the command line's defaults
