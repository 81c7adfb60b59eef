"""The Dissection workspace's per-image views on the demo world (300 images, the demo model's layer4): the Image panel
shows the segmentation `segment_image` computes for the image, a click lists the units covering the pixel and opens
one, other inputs clear it (no stale result); the Drawing panel runs the unit's feature visualisation as a task that
can be cancelled, shows its image, and takes it from the cache the next time."""

from __future__ import annotations

import numpy as np
import pytest
import test_ws_dissection
from PySide6.QtCore import QItemSelectionModel, Qt

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
    assert [panel.concepts.item(k, 0).text() for k in range(panel.concepts.rowCount())] == [
        c.label for c in expected.concepts]
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
    open_input(pool, state, OpenRequest("dataset", "demo"))
    assert panel.view is None and panel.image == -1 and panel.covering.rowCount() == 0 and ws.data is None
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
