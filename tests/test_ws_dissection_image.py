"""The Dissection workspace's per-image views on the demo world (300 images, the demo model's layer4): the Image panel
shows the segmentation `segment_image` computes for the image, a click lists the units covering the pixel and opens
one, other inputs clear it (no stale result); the Drawing panel runs the unit's feature visualisation as a task that
can be cancelled, shows its image, and takes it from the cache the next time."""

from __future__ import annotations

import numpy as np
import pytest
import test_ws_dissection
from PySide6.QtCore import QItemSelectionModel, Qt
from PySide6.QtGui import QColor

from probescope.app.dissection.image_panel import open_in
from probescope.core.cache import cache_dir
from probescope.core.dissection.image_view import segment_image
from probescope.core.featurevis.render import visualize
from probescope.core.featurevis.settings import Direction, VisSettings
from probescope.jobs.dissection import rows as data
from probescope.jobs.inputs import OpenRequest

pytestmark = pytest.mark.usefixtures("isolated_cache")
WAIT_MS = 120_000
env = test_ws_dissection.env  # the demo world's workspace, as the other Dissection tests have it
idle = test_ws_dissection.idle


def test_image_view_shows_the_layers_segmentation_and_the_units_at_a_click(qtbot, env, open_input):
    ws, pool, state = env
    panel, d = ws.image_view, ws.data
    ws.area.raise_panel("image")  # on screen with nothing picked: the image most units fire in
    qtbot.waitUntil(lambda: panel.view is not None, timeout=WAIT_MS)
    assert panel.view.image == panel.busiest_image(d)
    image = int(d.top_images(ws.unit, 1)[0])  # the grid's first image, through its context menu's action
    open_in(panel, ws.area, image)
    qtbot.waitUntil(lambda: panel.view is not None and panel.view.image == image, timeout=WAIT_MS)
    expected = segment_image(d.result, d.activations[image], store=d.store, image=image, method="iou",
                             min_iou=panel.min_iou.value())
    seg = panel.view.segmentation
    assert seg.method == "iou" and np.array_equal(seg.segmentation, expected.segmentation)
    assert [u.unit for u in seg.units] == [u.unit for u in expected.units] and seg.units
    assert sorted(panel.concepts.item(k, 0).text() for k in range(panel.concepts.rowCount())) == sorted(
        c.label for c in expected.concepts)  # (in their order on the picture: see the tests below)
    assert [panel.labels.item(k, 0).text() for k in range(panel.labels.rowCount())] == [
        x.name for x in expected.labels]
    assert [panel.method.itemData(k) for k in range(panel.method.count())] == ["netdissect", *data.SEARCHES]
    # a click on a drawn pixel lists the units covering it, the drawn one first; a row opens that unit
    ys, xs = np.nonzero(expected.segmentation >= 0)
    y, x = int(ys[len(ys) // 2]), int(xs[len(xs) // 2])
    qtbot.mouseClick(panel.canvas, Qt.MouseButton.LeftButton, pos=panel.canvas.point_of(y, x))
    covering = expected.covering(y, x)
    listed = [int(panel.covering.item(k, 0).text()) for k in range(panel.covering.rowCount())]
    assert listed == [c.unit for c in covering]
    assert panel.covering.item(0, 1).text() == covering[0].label
    assert seg.units[seg.winner[y, x]].unit == covering[0].unit
    last = panel.covering.rowCount() - 1
    panel.covering.cellClicked.emit(last, 0)
    assert ws.unit == listed[last]
    # another method and minimum IoU: recomputed; a file name typed picks its image
    panel.method.setCurrentIndex(panel.method.findData("netdissect"))
    panel.min_iou.setValue(0.1)
    panel.which.setText(d.dataset.image_path(7).name)
    panel.show_button.click()
    qtbot.waitUntil(lambda: panel.view.image == 7 and panel.view.segmentation.method == "netdissect", timeout=WAIT_MS)
    expected = segment_image(d.result, d.activations[7], store=d.store, image=7, method="netdissect", min_iou=0.1)
    assert np.array_equal(panel.view.segmentation.segmentation, expected.segmentation)
    panel.which.setText("no-such-image.jpg")
    panel.show_button.click()
    assert "no image" in panel.status.text() and panel.view.image == 7
    # other inputs: cleared at once, and a request on its way is never shown; what comes later is of the new result
    panel.show_image(11)
    seen = []  # the panel as the workspace left it on the change (a cached result may follow within the same wait)
    state.changed.connect(lambda *_: seen.append((panel.view, panel.image, panel.covering.rowCount(), ws.data)))
    open_input(pool, state, OpenRequest("dataset", "demo"))
    assert seen[0] == (None, -1, 0, None)
    idle(qtbot, pool)
    assert panel.view is None or (panel.data is ws.data and panel._wanted[0] == id(ws.data.result))


def test_drawing_runs_as_a_task_is_cancellable_and_comes_from_the_cache(qtbot, env):
    ws, pool, state = env
    panel = ws.drawing
    ws.area.raise_panel("drawing")
    unit = ws.unit
    assert panel.target().name == f"unit {unit}" and "not drawn yet" in panel.status.text()
    assert panel.title.text() == f"<b>What unit {unit} would draw</b> at layer4"
    panel.steps.setValue(5000)  # long enough to be cancelled mid-way
    panel.draw()
    qtbot.waitUntil(lambda: "step" in panel.status.text(), timeout=WAIT_MS)
    panel.cancel_button.click()
    idle(qtbot, pool)
    assert panel.visualization is None and panel.status.text() == "cancelled"
    panel.steps.setValue(6)
    panel.draw()
    qtbot.waitUntil(lambda: panel.visualization is not None, timeout=WAIT_MS)
    vis = panel.visualization
    model = pool.session.held("model")
    assert model and not vis.from_cache and panel.picture.image is not None
    loaded = pool.session.get("model", model[-1], lambda: None)
    direct = visualize(loaded, "layer4", Direction.unit(unit, 128), VisSettings(steps=6), cache=cache_dir())
    assert np.array_equal(vis.image, direct.image) and direct.from_cache  # the same image, kept in the cache
    assert f"unit {unit}" in panel.caption.text() and "Geirhos" in panel.caveat.text()
    # the unit card shows it as its last image, and says what it is (the card is filled at the next turn of the
    # event loop, which a busy machine may not have reached yet)
    qtbot.waitUntil(lambda: ws.card.images[-1] is panel.picture.image, timeout=WAIT_MS)
    assert "what the unit would draw" in ws.card.subtitle
    # another unit and back: from the cache without a Draw
    other = next(u for u in ws.units.visible_units() if u != unit)
    ws.units.select_unit(other)
    assert panel.visualization is None
    ws.units.select_unit(unit)
    qtbot.waitUntil(lambda: panel.visualization is not None, timeout=WAIT_MS)
    assert panel.visualization.from_cache and np.array_equal(panel.visualization.image, vis.image)
    # the table's selection, as one direction (the unit alone when nothing else is selected)
    panel.mode.setCurrentIndex(panel.mode.findData("selection"))
    assert panel.target().name == f"units {unit}"
    other = next(u for u in ws.units.visible_units() if u != unit)
    flags = QItemSelectionModel.SelectionFlag.Select | QItemSelectionModel.SelectionFlag.Rows
    ws.units.selectionModel().select(ws.units.model().index(ws.units.visible_units().index(other), 0), flags)
    pair = sorted({unit, other})
    assert panel.target().name == f"units {pair[0]}, {pair[1]}"
    assert panel.target().direction.vector[pair] == pytest.approx([2 ** -0.5] * 2)
    # the unit's concept, as a direction: drawn too
    panel.mode.setCurrentIndex(panel.mode.findData("concept"))
    assert panel.target().name.startswith("concept ")
    panel.draw()
    qtbot.waitUntil(lambda: panel.visualization is not None and panel.shown == panel.target().key, timeout=WAIT_MS)
    idle(qtbot, pool)
    ws.clear()  # another layer chosen: until its units come, the title names no unit of the previous layer
    assert panel.title.text() == "<b>What the unit would draw</b>"


# -- issue 45, "under the hand": the Image tab at the window's sizes ---------------------------------------------------
WINDOW_SIZES = ((1400, 790), (1280, 690))  # the workspace in a 1400x900 (the default) and a 1280x800 window


def _busiest_shown(qtbot, env, size=WINDOW_SIZES[0]):
    ws, pool, state = env
    ws.resize(*size)
    qtbot.waitUntil(lambda: ws.area.width() <= size[0], timeout=5_000)
    ws.area.reset()  # (the panels keep their pixel sizes as the area shrinks: the window's arrangement at this size)
    ws.area.raise_panel("image")
    qtbot.waitUntil(lambda: ws.image_view.view is not None, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: ws.image_view.canvas.isVisible(), timeout=WAIT_MS)
    return ws.image_view


def _drawn_texts(canvas, monkeypatch) -> list[tuple]:
    """(rect, text) of every text the canvas paints (its painter is never transformed)."""
    from PySide6.QtGui import QPainter

    texts, draw = [], QPainter.drawText

    def record(painter, *args):
        if len(args) == 3 and hasattr(args[0], "center"):
            texts.append((args[0], args[2]))
        return draw(painter, *args)

    monkeypatch.setattr(QPainter, "drawText", record)
    canvas.grab()
    monkeypatch.setattr(QPainter, "drawText", draw)
    return texts


def test_region_names_are_whole_and_leave_the_pictures_middle_visible(qtbot, env, monkeypatch):
    """At the window's default size and at 1280x800, several explanations are written out whole beside the picture
    (five were elided over it, covering its middle band), and at most a tenth of the middle band is covered."""
    for size in WINDOW_SIZES:
        panel = _busiest_shown(qtbot, env, size)
        canvas, seg = panel.canvas, panel.view.segmentation
        qtbot.wait(10)
        names = [t.replace("\n", " ") for _, t in _drawn_texts(canvas, monkeypatch) if not t.isdigit()]
        assert not [n for n in names if "…" in n]
        labels = {c.label for c in seg.concepts}
        assert len([n for n in names if n in labels]) >= 3, names
        shot, picture = canvas.grab().toImage(), panel.view.picture
        h, w = picture.shape[:2]
        covered = [abs(QColor(shot.pixel(canvas.point_of(y, x))).red() - int(picture[y, x, 0])) +
                   abs(QColor(shot.pixel(canvas.point_of(y, x))).green() - int(picture[y, x, 1])) > 60
                   for y in range(h // 3, 2 * h // 3) for x in range(w)]
        assert np.mean(covered) <= 0.1, (size, np.mean(covered))
        placed = canvas.placement()  # numbers on the picture, none over another; the legend beside it
        boxes = list(placed.badges.values())
        assert len(boxes) >= 3 and all(placed.frame.contains(b) for b in boxes)
        assert not any(a.intersects(b) for k, a in enumerate(boxes) for b in boxes[k + 1:])
        assert all(not where.intersects(placed.frame) for _, _, where in placed.legend)


def test_a_click_on_a_regions_name_lists_that_explanations_units(qtbot, env, monkeypatch):
    """A click on a name (or its number) lists the units its explanation stands for in the image; it fell through
    to the pixel under the name, which said "0 units" or listed other explanations' units."""
    panel = _busiest_shown(qtbot, env)
    seg = panel.view.segmentation
    by_label = {c.label: k for k, c in enumerate(seg.concepts)}
    clicked = 0
    for rect, text in _drawn_texts(panel.canvas, monkeypatch):
        name = text.replace("\n", " ")
        concept = next((k for label, k in by_label.items() if label == name or
                        (name.endswith("…") and label.startswith(name[:-1]))), None)
        if concept is None:
            continue
        qtbot.mouseClick(panel.canvas, Qt.MouseButton.LeftButton, pos=rect.center().toPoint())
        listed = [int(panel.covering.item(k, 0).text()) for k in range(panel.covering.rowCount())]
        assert sorted(listed) == sorted(u.unit for u in seg.units if u.concept == concept), name
        assert listed and seg.concepts[concept].label in panel.covering_title.text()
        clicked += 1
    assert clicked >= 3
    number = panel.canvas.regions[1]  # a number on the picture, and a row of the table, do the same
    qtbot.mouseClick(panel.canvas, Qt.MouseButton.LeftButton, pos=panel.canvas.point_of_concept(number.concept))
    assert panel.covering.rowCount() == len(seg.concepts[number.concept].units)
    panel.concepts.cellClicked.emit(0, 0)
    assert panel.covering.rowCount() == len(seg.concepts[panel.canvas.regions[0].concept].units)


def test_a_clicked_pixel_is_named_by_its_axes_and_grid(qtbot, env):
    """The pixel clicked reads "x 52, y 31" of the 64x64 segmentation grid (of the 128x128 image), not "pixel (31,
    52)" whose order the reader had to guess."""
    panel = _busiest_shown(qtbot, env)
    qtbot.mouseClick(panel.canvas, Qt.MouseButton.LeftButton, pos=panel.canvas.point_of(31, 52))
    text = panel.covering_title.text()
    assert "x 52, y 31" in text and "pixel (" not in text
    assert "64×64 segmentation grid" in text and "128×128" in text and "x across and y down" in text
    assert [int(panel.covering.item(k, 0).text()) for k in range(panel.covering.rowCount())] == [
        c.unit for c in panel.view.segmentation.covering(31, 52)]


def test_explanations_are_listed_with_their_true_size_most_drawn_first(qtbot, env):
    """The explanations table's first row said 0 px: it listed in unit order, and an explanation whose units fire
    only beneath other regions is drawn on no pixel. Now the drawn come first, numbered as on the picture, each
    row with the pixels its units fire on (what IoU here compares); the ones only beneath follow, unnumbered."""
    panel = _busiest_shown(qtbot, env)
    seg, table = panel.view.segmentation, panel.concepts
    header = [table.horizontalHeaderItem(c).text().replace("\n", " ") for c in range(table.columnCount())]
    rows = [[table.item(r, c).text() for c in range(table.columnCount())] for r in range(table.rowCount())]
    drawn = [int(row[header.index("drawn px")].replace(",", "")) for row in rows]
    assert any(c.drawn == 0 for c in seg.concepts)  # (the image has some: what the row was about)
    assert drawn[0] > 0 and drawn == sorted(drawn, reverse=True)
    fires = [int(row[header.index("fires px")].replace(",", "")) for row in rows]
    by_label = {c.label: c for c in seg.concepts}
    assert all(f > 0 for f in fires) and fires == [by_label[row[0]].pixels for row in rows]
    numbers = [table.verticalHeaderItem(r).text() for r in range(table.rowCount())]
    assert numbers == [str(r.number) for r in panel.canvas.regions] + ["–"] * drawn.count(0)
    assert [rows[r.number - 1][0] for r in panel.canvas.regions] == [r.label for r in panel.canvas.regions]
