"""The Dissection workspace on the demo world (300 images, the demo model's layer4, max length 2): the table holds
the engine's numbers, sorts and filters (specialised units), the unit view shows the overlays and the trace with the
engine's numbers, explanations switch, the images behind DA are marked, the unit card exports, results are cached on
disk and re-runs with other settings are kept and switchable."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage

from probescope.app.dissection.workspace import COLUMNS, DissectionWorkspace
from probescope.core.dissection.settings import DissectionSettings
from probescope.jobs import inputs
from probescope.jobs.dissection import rows as data
from probescope.jobs.inputs import OpenRequest

pytestmark = pytest.mark.usefixtures("isolated_cache")
WAIT_MS = 120_000
SETTINGS = DissectionSettings(max_length=2, searches=data.SEARCHES, sweep_length=3, da_limit=4)


@pytest.fixture
def env(qtbot, monkeypatch, make_workspace, open_input):
    monkeypatch.setattr(inputs, "DEMO_DATASET_IMAGES", 300)
    monkeypatch.setattr(DissectionWorkspace, "default_settings", SETTINGS)
    ws, pool, state = make_workspace(DissectionWorkspace)
    open_input(pool, state, OpenRequest("model", "demo"))
    open_input(pool, state, OpenRequest("dataset", "demo"))
    qtbot.waitUntil(lambda: ws.is_initial_work_done and not pool.active(), timeout=WAIT_MS)
    return ws, pool, state


def idle(qtbot, pool) -> None:
    qtbot.waitUntil(lambda: not pool.active(), timeout=WAIT_MS)


def column(ws, name: str) -> list:
    c = COLUMNS.index(name)
    return [ws.units.value(r, c) for r in range(ws.units.rowCount())]


def test_table_holds_the_engines_numbers_and_sorts_and_filters(qtbot, env):
    ws, pool, state = env
    result = ws.data.result
    assert result.complete and len(result.units) == 128 and ws.units.rowCount() == 128
    assert result.settings == SETTINGS.protocol()
    for r in range(ws.units.rowCount()):
        u = ws.units.value(r, 0)
        unit = result.units[u]
        assert ws.units.value(r, COLUMNS.index("ND IoU")) == unit.netdissect.iou
        assert ws.units.value(r, COLUMNS.index("compositional")) == unit.explanations["iou"].label
        assert ws.units.value(r, COLUMNS.index("stop DA")) == unit.explanations["da-stop"].da
    # sort by every column, both ways
    for name in ("comp IoU", "stop len", "NetDissect"):
        for order in (Qt.SortOrder.AscendingOrder, Qt.SortOrder.DescendingOrder):
            ws.units.sortByColumn(COLUMNS.index(name), order)
            values = column(ws, name)
            key = (lambda v: v.lower()) if isinstance(values[0], str) else (lambda v: v)
            assert values == sorted(values, key=key, reverse=order == Qt.SortOrder.DescendingOrder)
    # specialised: da-stop keeps one concept while the IoU search's explanation is longer
    ws.filters.specialised.setChecked(True)
    expected = {u for u, r in result.units.items()
                if r.explanations["da-stop"].length == 1 and r.explanations["iou"].length > 1}
    assert expected and set(ws.units.visible_units()) == expected
    assert f"{len(expected)} specialised" in ws.header.text()
    # category and concept search narrow further; the summary counts interpretable units as the engine's IoU says
    ws.filters.specialised.setChecked(False)
    ws.filters.category.setCurrentText("color")
    assert {result.labels[result.units[u].netdissect.formula.atoms[0]][1] for u in ws.units.visible_units()} == {
        "color"}
    ws.filters.category.setCurrentText("all categories")
    name = result.units[ws.units.visible_units()[0]].netdissect.label
    ws.filters.search.setText(name)
    assert all(any(name in e.label for e in [r.netdissect, *r.explanations.values()])
               for r in (result.units[u] for u in ws.units.visible_units()))
    ws.filters.search.clear()
    good = sum(r.netdissect.iou > 0.04 for r in result.units.values())
    assert ws.header.text().count(f"{good} of 128 units interpretable") == 1
    ws.filters.interpretable.setChecked(True)
    assert len(ws.units.visible_units()) == good


def test_unit_view_shows_overlays_and_the_trace_of_the_engine(qtbot, env):
    ws, pool, state = env
    ws.filters.specialised.setChecked(True)
    unit = ws.units.visible_units()[0]
    ws.units.select_unit(unit)
    idle(qtbot, pool)
    r = ws.data.result.units[unit]
    assert ws.unit == unit and ws.formula == r.explanations["iou"].formula
    # top images: the k images with the highest peak activation, each with the unit's outline drawn
    k = ws.view.controls.k.value()
    peaks = np.asarray(ws.data.activations[:, unit]).reshape(300, -1).max(1)
    assert [o.image for o in ws.overlays] == list(np.argsort(-peaks, kind="stable")[:k])
    assert ws.view.images.thumbnails.rowCount() == k
    assert sum(o.unit_pixels > 0 for o in ws.overlays) == k
    image = ws.view.images.thumbnails.item(0).image.convertToFormat(QImage.Format.Format_RGB888)
    arr = np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine())
    arr = arr[:, :image.width() * 3].reshape(image.height(), image.width(), 3)
    assert (arr == [255, 214, 0]).all(axis=2).sum() > 20  # the mask outline
    # the trace: every beam formula with the engine's IoU and DA; the methods' picks marked
    leaves = ws.trace.leaves()
    assert len(leaves) == sum(len(b) for b in r.trace)
    for step, pos, cells in leaves:
        e = r.trace[step][pos]
        assert cells[:3] == [e.label, f"{e.iou:.4f}", f"{e.da:.3f}"]
    picked = {name for _, _, cells in leaves for name in cells[3].split(", ") if name}
    assert picked == {"ND", "comp", "select", "stop"}  # short names: the formula column keeps the room
    # bars and sweep hold the explanations' scores
    assert ws.charts.iou_bars.values.tolist() == [r.netdissect.iou] + [r.explanations[m].iou for m in data.SEARCHES]
    assert ws.charts.da_bars.values.tolist() == [r.netdissect.da] + [r.explanations[m].da for m in data.SEARCHES]
    assert ws.charts.sweep.series["best IoU"][1] == [e.iou for e in r.sweep]
    assert ws.charts.histogram.threshold == r.threshold
    want, _ = np.histogram(np.asarray(ws.data.activations[:, unit], np.float32).ravel(), bins=60)
    assert ws.charts.histogram.counts.tolist() == want.tolist()  # computed with the overlays, drawn when they show
    # switching the explanation and clicking a trace formula change the concept overlay
    ws.view.controls.explanation.setCurrentIndex(data.METHODS.index("da-stop"))
    idle(qtbot, pool)
    assert ws.formula == r.explanations["da-stop"].formula
    assert any(o.concept_pixels > 0 for o in ws.overlays)
    ws.trace.click(1, 2)
    idle(qtbot, pool)
    assert ws.formula == r.trace[1][2].formula and ws.formula_label == r.trace[1][2].label
    # arrow keys move through the visible units; the views follow
    ws.units.setFocus()
    before = ws.units.current_unit()
    qtbot.keyClick(ws.units, Qt.Key.Key_Down)
    idle(qtbot, pool)
    assert ws.unit == ws.units.current_unit() != before
    assert ws.unit in ws.units.visible_units()


def test_a_unit_asked_for_again_after_its_overlays_were_cancelled_gets_its_own(qtbot, env):
    """Unit b's overlays are asked for, unit a's from the cache cancel them, and b is asked for again before b's
    cancelled task has ended: b's overlays are built again. (They were taken for 'on their way', and the grid kept
    a's images under b's title: the cancelled task's result is dropped.)"""
    ws, pool, state = env
    order = ws.units.visible_units()
    a, b = order[0], order[-1]
    ws.units.select_unit(a)
    idle(qtbot, pool)
    ws.units.select_unit(b)  # built in the I/O pool
    assert not ws.unit_images.ready
    ws.units.select_unit(a)  # from the cache, at once: b's overlays are cancelled
    assert ws.unit_images.ready and ws.unit_images.unit == a
    ws.units.select_unit(b)  # in the same turn of the event loop: b's cancelled task has not ended
    qtbot.waitUntil(lambda: ws.unit_images.ready, timeout=WAIT_MS)
    k = ws.view.controls.k.value()
    assert ws.unit == ws.unit_images.unit == b
    assert [o.image for o in ws.overlays] == [int(i) for i in ws.data.top_images(b, k)]
    assert ws.view.images.thumbnails.rowCount() == k


def test_a_later_part_of_the_run_keeps_the_unit_the_user_chose(qtbot, env):
    """A partial result of the run on screen whose selected unit is unchanged leaves the user on that unit. (It
    jumped to the workspace's first unit: with the arrow keys, a unit switch snapped back while the layer dissected.)"""
    import dataclasses

    ws, pool, state = env
    first = ws.current.first_unit()
    chosen = next(u for u in ws.units.visible_units() if u != first)
    ws.units.select_unit(chosen)
    idle(qtbot, pool)
    d = ws.data
    later = dataclasses.replace(d, result=dataclasses.replace(d.result, units=dict(d.result.units)))
    ws.show_layer(later)  # the same units, the same result objects: nothing to redraw
    assert ws.data is later
    assert ws.unit == chosen
    assert ws.units.selected_units() == [chosen]
    assert ws.unit_images.unit == chosen and ws.unit_images.ready


def test_images_behind_detection_accuracy_are_marked(qtbot, env):
    from probescope.core.dissection.masks import image_masks

    ws, pool, state = env
    ws.view.controls.mode.setCurrentIndex(1)
    idle(qtbot, pool)
    d, unit = ws.data, ws.unit
    r = d.result.units[unit]
    assert ws.overlays and all(o.concept_pixels > 0 for o in ws.overlays)
    for o in ws.overlays:
        m, g = image_masks(d.store, d.activations, unit, r.threshold, o.image, ws.formula)
        assert (o.fired, o.overlap_pixels, o.concept_pixels) == (m.any(), int((m & g).sum()), int(g.sum()))
        assert o.thumbnail.caption.startswith("fired" if m.any() else "silent")
    # a click opens the large view with the image's labels
    ws.open_image(0)
    qtbot.waitUntil(lambda: ws.detail.isVisible(), timeout=WAIT_MS)
    assert ws.detail.labels.count() > 0 and not ws.detail.picture.pixmap().isNull()


def test_unit_card_and_results_export(qtbot, env, tmp_path):
    from PySide6.QtSvg import QSvgRenderer

    from probescope.core.dissection.results import DissectionResult

    ws, pool, state = env
    png = ws.export_unit_card(tmp_path / "card.png", width=1800)
    assert QImage(str(png)).width() == 1800
    assert len(ws.card.images) == min(12, len(ws.overlays)) and len(ws.card.lines) == 4
    assert ws.card.lines[1].label == ws.data.result.units[ws.unit].explanations["iou"].label
    assert QSvgRenderer(str(ws.export_unit_card(tmp_path / "card.svg"))).isValid()
    assert ws.export_unit_card(tmp_path / "card.pdf").read_bytes().startswith(b"%PDF")
    ws.export_results("tally", tmp_path / "tally.csv")
    lines = (tmp_path / "tally.csv").read_text().splitlines()
    assert len(lines) == 129 and "dastop_label" in lines[0]
    ws.export_results("json", tmp_path / "d.json")
    assert DissectionResult.load(tmp_path / "d.json").units.keys() == ws.data.result.units.keys()
    names = [t.name for t in ws.export_targets()]
    assert "Unit card" in names and "Beam-search trace" in names and "IoU against DA (all units)" in names


def test_second_launch_reads_the_cache_and_reruns_are_kept(qtbot, env, monkeypatch):
    import probescope.core.dissection.engine as engine

    ws, pool, state = env
    first = ws.data.result
    # a second workspace on the same inputs never dissects: the result comes from the cache folder
    monkeypatch.setattr(engine, "dissect", lambda *a, **k: pytest.fail("dissected again"))
    again = DissectionWorkspace(pool)
    qtbot.addWidget(again)
    again.load_state(state)
    qtbot.waitUntil(lambda: again.is_initial_work_done and not pool.active(), timeout=WAIT_MS)
    assert again.data.result.to_json() == first.to_json()
    monkeypatch.undo()
    monkeypatch.setattr(inputs, "DEMO_DATASET_IMAGES", 300)
    # re-run with max length 1 (quick); both results are kept and can be switched
    ws.runs.fields["max_length"].setValue(1)
    ws.runs.fields["sweep_length"].setValue(0)
    ws.runs.run.click()
    idle(qtbot, pool)
    assert ws.data.settings.max_length == 1 and ws.runs.runs.count() == 2
    assert all(r.explanations["iou"].length == 1 for r in ws.data.result.units.values())
    ws.runs.runs.setCurrentIndex(0)
    ws.runs.runs.activated.emit(0)
    assert ws.data.result is not None and ws.data.settings == SETTINGS
    # cancel: the run stops, the last result stays
    ws.runs.fields["max_length"].setValue(3)
    ws.runs.run.click()
    ws.runs.cancel.click()
    idle(qtbot, pool)
    assert ws.data.settings in (SETTINGS, ws.runs.settings())


def test_trace_picks_replay_the_engines_choices_and_correlation_shows(qtbot, env):
    from probescope.core.dissection.correlation import accuracy_correlation

    ws, pool, state = env
    # the demo model names its classes: the units carry accuracies and the correlation table shows the engine's r
    rows = [r for r in accuracy_correlation(ws.data.result) if r["set"] in ("union", "intersection")
            and not r["method"].startswith("length-")]
    assert ws.layer_views.correlation.rowCount() == 0  # the Layer tab is drawn when it is shown
    ws.area.raise_panel("layer")
    assert ws.layer_views.correlation.rowCount() == len(rows) > 0
    for k, r in enumerate(rows):
        expected = "—" if r["pearson_da"] is None else f"{r['pearson_da']:.3f}"
        assert ws.layer_views.correlation.item(k, 3).text() == expected
    for r in ws.data.result.units.values():
        picks = data.trace_picks(r, SETTINGS.max_length, SETTINGS.da_limit)
        assert r.trace[0][0].formula == r.netdissect.formula
        for m in data.SEARCHES:
            step, pos = picks.picks[m]
            assert r.trace[step][pos].formula == r.explanations[m].formula, (r.unit, m)


def test_role_panel_shows_the_ablation_of_the_selected_units(qtbot, env):
    """The Role tab's bars are each class's loss of p(true class) without the unit, as a full forward pass with the
    unit zeroed says (the slow oracle); a table selection is ablated as one group; the layer view is units x classes;
    the unit card carries the role."""
    import torch

    from oracles.ablation_reference import per_class
    from probescope.core.dissection.correlation import scene_truth
    from probescope.jobs.inputs import model_of
    from probescope.jobs.protocol import TaskContext

    ws, pool, state = env
    ws.area.raise_panel("role")
    unit = ws.units.visible_units()[0]
    ws.units.select_unit(unit)
    qtbot.waitUntil(lambda: bool(ws.role.results) and "ablating" not in ws.role.title.text(), timeout=WAIT_MS)
    idle(qtbot, pool)
    d, model = ws.data, model_of(TaskContext(session=pool.session), ws.role.model)  # the one the pool holds
    images = model.preprocess([d.dataset.load_image(i) for i in range(d.dataset.n_images)])
    truth = scene_truth(d.store, model.class_names)
    with torch.no_grad():
        before = per_class(model.module, d.layer, images, truth, [])
        after = per_class(model.module, d.layer, images, truth, [unit])
    lost = {model.class_names[c]: before[c][1] - after[c][1] for c in before}
    shown = dict(zip(ws.role.bars.names, ws.role.bars.values, strict=True))
    assert shown and len(shown) <= 8
    for name, value in shown.items():
        assert value == pytest.approx(max(lost[name], 0.0), abs=1e-5)
    assert sorted(lost.values(), reverse=True)[: len(shown)] == pytest.approx(sorted(shown.values(), reverse=True),
                                                                              abs=1e-5)
    assert f"Role of unit {unit}" in ws.role.title.text()
    qtbot.waitUntil(lambda: "without it:" in ws.card.subtitle, timeout=WAIT_MS)  # the card is filled a turn later
    assert "(p of the true class)" in ws.card.subtitle
    # two units from the table, as one group (the table's context menu)
    pair = ws.units.visible_units()[:2]
    ws.selected.ablate_selection(pair)
    qtbot.waitUntil(lambda: any(len(key[2]) == 2 for key in ws.role.results), timeout=WAIT_MS)
    idle(qtbot, pool)
    after_pair = per_class(model.module, d.layer, images, truth, pair)
    for name, value in zip(ws.role.bars.names, ws.role.bars.values, strict=True):
        c = model.class_names.index(name)
        assert value == pytest.approx(max(before[c][1] - after_pair[c][1], 0.0), abs=1e-5)
    # every unit alone: the matrix is units x classes
    ws.role.layer_button.click()
    qtbot.waitUntil(lambda: ws.role.matrix.isVisible(), timeout=WAIT_MS)
    assert ws.role.image.image.shape == (len(d.result.units), len(before))


def test_optimal_search_shows_each_units_gap(qtbot, env):
    """With 'optimal' ticked in Settings, the table's 'opt gap' column, the layer summary and the unit's title say
    how far the beam's explanation is below the best formula, as the engine recorded it."""
    ws, pool, state = env
    ws.runs.fields["sweep_length"].setValue(0)
    ws.runs.search_boxes["optimal"].setChecked(True)
    ws.runs.run.click()
    idle(qtbot, pool)
    result = ws.data.result
    assert "optimal" in ws.data.settings.searches and "optimal" in ws.runs.runs.currentText()
    gaps = {u: r.optimality_gap for u, r in result.units.items()}
    assert all(g is not None and g >= 0 for g in gaps.values())
    c = COLUMNS.index("opt gap")
    assert {ws.units.value(k, 0): ws.units.value(k, c) for k in range(ws.units.rowCount())} == gaps
    at_optimum = sum(g <= 1e-12 for g in gaps.values())
    assert f"the beam found the optimum for {at_optimum} of 128 units" in ws.header.text()
    worst = max(gaps, key=gaps.get)
    ws.units.select_unit(worst)
    idle(qtbot, pool)
    title = ws.view.title.text()
    if gaps[worst] > 0:
        optimal = result.units[worst].explanations["optimal"]
        assert f"{gaps[worst]:.4f}</b> above the beam's" in title and f"{optimal.iou:.4f}" in title
    else:
        assert "The beam's explanation is optimal." in title
    assert "optimal" in ws.charts.iou_bars.names  # its bar beside the other explanations


def test_a_partly_dissected_layer_is_on_screen_before_the_next_block(env, monkeypatch):
    """A launch after a stopped dissection shows the units saved so far at once, before dissecting more of them."""
    from probescope.core.cache import cache_dir
    from probescope.core.dissection import saved as saved_module
    from probescope.core.dissection.results import DissectionResult
    from probescope.jobs.dissection.layer import DatasetSpec, LayerRequest, ModelLayer
    from probescope.jobs.dissection.layer_data import layer_data_job
    from probescope.jobs.protocol import Partial, TaskContext

    ws, pool, state = env
    d = ws.data
    path = cache_dir() / "dissection" / f"{d.key}.json"
    stopped = DissectionResult.load(path)
    keep = sorted(stopped.units)[:5]
    stopped.units = {u: stopped.units[u] for u in keep}
    stopped.complete = False
    stopped.save(path)
    monkeypatch.setattr(saved_module, "add_units", lambda *a, **k: pytest.fail("dissected before showing"))
    model = state.get("model")
    request = LayerRequest(DatasetSpec.of(d.dataset), ModelLayer(model.value, d.layer), d.settings)
    steps = layer_data_job(TaskContext(), request=request, model_label=model.label)
    first = next(item for item in steps if isinstance(item, Partial))
    assert sorted(first.value.result.units) == keep and not first.value.result.complete


def test_mask_share_and_dead_units(qtbot, env):
    """The table gives each mask's share of the dataset's pixels; a dead unit (T at a tie: here one that is always 0,
    dissected by the engine) is named as such in the unit view, and a filter hides such units."""
    from dataclasses import replace

    from probescope.core.dissection.engine import dissect

    ws, pool, state = env
    d = ws.data
    n = d.store.n_pixels
    c = COLUMNS.index("mask %")
    assert {ws.units.value(k, 0): ws.units.value(k, c) for k in range(ws.units.rowCount())} == \
        {u: 100 * (x.mask_pixels / n) for u, x in d.result.units.items()}
    assert not any(x.at_tie(SETTINGS.quantile) for x in d.result.units.values())
    zeros = np.zeros((d.store.n_images, 1) + d.activations.shape[2:], np.float32)
    dead = replace(dissect(d.store, zeros, d.settings).units[0], unit=7)
    assert dead.threshold == 0.0 and dead.mask_pixels == n and dead.threshold_ties == 1.0
    d.result.units[7] = dead
    ws.show_layer(d)
    ws.units.select_unit(7)
    idle(qtbot, pool)
    assert "sits at a tie: 100.0% of the unit's activations equal it" in ws.view.title.text()
    assert "holds 100.0% of the pixels" in ws.view.title.text()
    assert ws.units.value(next(k for k in range(128) if ws.units.value(k, 0) == 7), c) == 100.0
    ws.filters.hide_ties.setChecked(True)
    assert sorted(ws.units.visible_units()) == [u for u in range(128) if u != 7]
    # the Settings panel's processes: automatic (all cores but one) by default, and what a run is asked with
    assert ws.runs.fields["jobs"].value() == 0 and "all cores but one" in ws.runs.fields["jobs"].specialValueText()
    ws.runs.fields["jobs"].setValue(1)
    assert ws.runs.settings().jobs == 1 and ws.runs.settings().protocol() == d.settings.protocol()


def test_the_window_dissects_in_worker_processes_with_the_same_results(qtbot, env):
    """Settings' processes for units: the layer dissected again in 2 worker processes (its cached result removed)
    is the one the window's own worker thread found."""
    from probescope.core.cache import cache_dir

    ws, pool, state = env
    alone = ws.data.result.to_json()
    (cache_dir() / "dissection" / f"{ws.data.key}.json").unlink()
    ws.runs.fields["jobs"].setValue(2)
    ws.runs.run.click()
    idle(qtbot, pool)
    assert ws.data.settings.jobs == 2 and ws.data.result.complete
    assert ws.data.result.to_json() == alone


def test_a_window_closed_as_the_first_units_arrive_picks_no_unit_afterwards(qtbot, monkeypatch, make_workspace,
                                                                             open_input):
    """The workspace shows its picked unit one turn after the first units' table; a window closed in between (its
    pool shut down) does not ask the closed pool for that unit's overlays. (CI caught the error it raised.)"""
    monkeypatch.setattr(inputs, "DEMO_DATASET_IMAGES", 300)
    monkeypatch.setattr(DissectionWorkspace, "default_settings", SETTINGS)
    shown = DissectionWorkspace.show_layer
    closed = []

    def show_layer_and_close(ws, d):
        shown(ws, d)
        if ws.rows and not closed:
            closed.append(True)
            pool.shutdown()  # as the window does when it closes

    monkeypatch.setattr(DissectionWorkspace, "show_layer", show_layer_and_close)
    ws, pool, state = make_workspace(DissectionWorkspace)
    open_input(pool, state, OpenRequest("model", "demo"))
    open_input(pool, state, OpenRequest("dataset", "demo"))
    qtbot.waitUntil(lambda: bool(closed), timeout=WAIT_MS)
    qtbot.wait(50)  # the next turns of the event loop: the picked unit's would-be turn
    assert ws.unit < 0 and ws.unit_images.unit != ws.current.picked
