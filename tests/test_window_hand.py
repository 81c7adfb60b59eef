"""The window under the hand: keys that move instead of extending, a cancel that puts the last result back, tasks
that stay listed, an ablation matrix one can read, wheels that scroll, hover thumbnails that go away, layers that
cannot be dissected said so. One test per behaviour, driven through the real window."""

from __future__ import annotations

import pytest
from PySide6.QtCore import Qt
from windows import WAIT_MS, open_all, world_requests

from probescope.jobs.inputs import OpenRequest

pytestmark = pytest.mark.usefixtures("isolated_cache")


def test_a_layer_without_a_spatial_map_is_refused_in_the_window(qtbot, window, small_world, tmp_path, answer_trust):
    """A TorchScript classifier's only layer, "output", holds logits: the window says Network Dissection needs a
    spatial map instead of showing "14 of 14 units interpretable"."""
    import torch
    from torch import nn

    class Classifier(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.mean(dim=(2, 3))

    torch.jit.script(Classifier()).save(str(tmp_path / "clf.pt"))
    answer_trust(accept=True)
    for request in (OpenRequest("dataset", str(small_world["dataset"])),
                    OpenRequest("model", f"torchscript:{tmp_path / 'clf.pt'}")):
        with qtbot.waitSignal(window.opened, timeout=WAIT_MS):
            window.open(request)
    ws = window.workspaces["dissection"]
    qtbot.waitUntil(lambda: window.notification.isVisible() and not window.pool.active(), timeout=WAIT_MS)
    message = window.notification.message.text()
    assert "layer 'output' has no spatial map" in message and "choose a layer with a spatial map" in message
    assert "no spatial map" in ws.runs.status.text() and not ws.runs.cancel.isEnabled()
    assert ws.units.rowCount() == 0 and ws.data is None and "failed" in ws.header.text()


@pytest.fixture
def loaded(qtbot, window, small_world):
    open_all(qtbot, window, world_requests(small_world))
    return window


def test_next_and_previous_unit_move_the_selection(qtbot, loaded):
    """Ctrl+] / Ctrl+[ move to the next / previous unit; with Ctrl held, Qt's extended selection added each row
    instead (three presses: four units selected, "Ablate the 4 selected units")."""
    qtbot.keyClick(loaded, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    units = loaded.workspaces["dissection"].units
    units.select_unit(units.visible_units()[0])
    for key, row in ((Qt.Key.Key_BracketRight, 1), (Qt.Key.Key_BracketRight, 2), (Qt.Key.Key_BracketRight, 3),
                     (Qt.Key.Key_BracketLeft, 2)):
        qtbot.keyClick(loaded, key, Qt.KeyboardModifier.ControlModifier)
        assert units.currentIndex().row() == row
        assert units.selected_units() == [units.visible_units()[row]]
    units.select_unit(units.visible_units()[5])  # as the palette or a click elsewhere does, with Ctrl still down
    assert units.selected_units() == [units.visible_units()[5]]


def _slow_blocks(monkeypatch, cache) -> None:
    """Dissections of the small world in blocks of 2, 4, ... units, each taking a moment, into an empty cache:
    partial results come before the end, and there is time to cancel."""
    import time

    from probescope.core.dissection import saved

    monkeypatch.setenv("PROBESCOPE_CACHE", str(cache))
    real = saved.add_units

    def slowly(*args, **kwargs):
        for unit in real(*args, **kwargs):
            time.sleep(0.4)
            yield unit

    monkeypatch.setattr(saved, "FIRST_BLOCK", 2)
    monkeypatch.setattr(saved, "add_units", slowly)


def test_cancelling_a_re_dissection_puts_the_previous_result_back(qtbot, loaded, monkeypatch, tmp_path):
    """Cancel said "Cancelled" in the status bar while Settings still said "dissecting …" with Cancel enabled, the
    table stayed on "2 of 8 units so far", and the unit in view had jumped to another; the Tasks panel emptied as
    soon as tasks ended."""
    _slow_blocks(monkeypatch, tmp_path)
    ws = loaded.workspaces["dissection"]
    before = ws.data
    assert before.result.complete
    unit = ws.units.visible_units()[5]
    ws.units.select_unit(unit)
    ws.runs.fields["quantile"].setValue(0.01)
    ws.runs.run.click()
    qtbot.waitUntil(lambda: ws.data is not before and bool(ws.data.result.units), timeout=WAIT_MS)
    assert not ws.data.result.complete and "so far" in ws.header.text()
    assert ws.unit == unit and ws.units.current_unit() == unit  # the unit in view is dissected first, and kept
    assert ws.runs.cancel.isEnabled() and "dissecting" in ws.runs.status.text()
    qtbot.wait(500)  # (it runs a second or more, as a task the Tasks panel keeps listed does)
    ws.runs.cancel.click()
    qtbot.waitUntil(lambda: not loaded.pool.is_running(ws.task_key("layer")), timeout=WAIT_MS)
    assert ws.data is before and ws.settings == before.settings and ws.runs.fields["quantile"].value() == 0.005
    assert not ws.runs.cancel.isEnabled() and ws.runs.status.text().startswith("cancelled")
    assert "so far" not in ws.header.text() and ws.units.rowCount() == len(before.result.units)
    assert ws.unit == unit and ws.units.selected_units() == [unit]
    qtbot.waitUntil(lambda: ("dissect layer4", "cancelled") in loaded.tasks.recent(), timeout=WAIT_MS)
    import time

    loaded.pool.submit(lambda ctx: time.sleep(1.2), name="a second's work")
    qtbot.waitUntil(lambda: ("a second's work", "done") in loaded.tasks.recent(), timeout=WAIT_MS)
    assert loaded.tasks.recent()[:2] == [("a second's work", "done"), ("dissect layer4", "cancelled")]  # newest first
    assert loaded.tasks.stages() == []  # nothing runs


def test_a_cancelled_first_dissection_says_it_was_cut_short(qtbot, window, small_world, monkeypatch, tmp_path):
    _slow_blocks(monkeypatch, tmp_path)
    for request in world_requests(small_world)[:2]:
        with qtbot.waitSignal(window.opened, timeout=WAIT_MS):
            window.open(request)
    ws = window.workspaces["dissection"]
    qtbot.waitUntil(lambda: ws.data is not None, timeout=WAIT_MS)
    ws.runs.cancel.click()
    qtbot.waitUntil(lambda: not window.pool.active(), timeout=WAIT_MS)
    assert not ws.data.result.complete and "done: cancelled" in ws.header.text()
    assert ws.runs.status.text().startswith("cancelled after") and not ws.runs.cancel.isEnabled()


def test_a_dissection_cancelled_before_its_first_units_stops_saying_it_computes(qtbot, window, small_world,
                                                                               monkeypatch, tmp_path):
    _slow_blocks(monkeypatch, tmp_path)
    for request in world_requests(small_world)[:2]:
        with qtbot.waitSignal(window.opened, timeout=WAIT_MS):
            window.open(request)
    ws = window.workspaces["dissection"]
    qtbot.waitUntil(lambda: window.pool.is_running(ws.task_key("layer")), timeout=WAIT_MS)
    assert "(computing…)" in ws.header.text() and ws.data is None
    window.pool.cancel(ws.task_key("layer"))  # as the status bar's or the Tasks panel's Cancel does
    qtbot.waitUntil(lambda: not window.pool.active(), timeout=WAIT_MS)
    assert ws.data is None and "computing" not in ws.header.text() and "cancelled before" in ws.header.text()
    assert ws.runs.status.text() == "cancelled" and not ws.runs.cancel.isEnabled()


def test_the_layer_ablation_is_a_matrix_one_can_read(qtbot, loaded):
    """Role > "Ablate every unit of the layer": the matrix was near white (a fixed ±0.5 scale for changes of a few
    percent) with no colour bar and class numbers, its caption swapped rows and columns, and the bars of the
    previous ablation stayed under the new caption."""
    import numpy as np
    from PySide6.QtGui import QImage

    ws = loaded.workspaces["dissection"]
    role = ws.role
    ws.area.raise_panel("role")
    ws.selected.ablate_selection(ws.units.visible_units()[:2])
    qtbot.waitUntil(lambda: any(len(k[2]) == 2 for k in role.results) and not loaded.pool.active(), timeout=WAIT_MS)
    assert role.bars.names
    role.layer_button.click()
    assert not role.bars.names and not role.bars.isVisible()  # the pair's bars went with its caption
    qtbot.waitUntil(lambda: role.matrix.isVisible() and not loaded.pool.active(), timeout=WAIT_MS)
    result = role.results[(ws.data.key, "zero", "layer")]
    delta = result.delta_accuracy
    assert role.image.image.shape == delta.shape == (len(ws.data.result.units), len(result.classes))
    text = role.title.text()
    assert "each class (rows)" in text and "each unit (columns" in text  # as the axes have them: units along x
    assert role.matrix.getAxis("bottom").labelText.startswith("unit") and role.matrix.getAxis("left").labelText == \
        "class"
    assert [name for _, name in role.matrix.getAxis("left").labels()] == result.classes  # classes by name
    span = max(float(np.abs(delta).max()), 1e-3)
    assert role.colour_bar.isVisible() and role.colour_bar.levels() == pytest.approx((-span, span))
    image = role.matrix.grab().toImage().convertToFormat(QImage.Format.Format_RGB888)
    rgb = np.frombuffer(image.constBits(), np.uint8, image.bytesPerLine() * image.height()).reshape(
        image.height(), image.bytesPerLine())[:, : 3 * image.width()].reshape(-1, 3).astype(int)
    coloured = (np.abs(rgb[:, 0] - rgb[:, 2]) > 80).mean()  # blue or red, not white, grey or black
    assert np.abs(delta).max() == 0 or coloured > 0.02
    ws.units.select_unit(ws.units.visible_units()[3])  # a unit again: its bars, not the matrix, under its caption
    qtbot.waitUntil(lambda: "Role of unit" in role.title.text() and "ablating" not in role.title.text(),
                    timeout=WAIT_MS)
    assert role.bars.isVisible() and not role.matrix.isVisible()
    ws.units.select_unit(ws.units.visible_units()[4])  # its ablation on its way, the matrix back from the cache:
    role.layer_button.click()  # the latest request wins (the unit's result replaced the matrix)
    qtbot.waitUntil(lambda: not loaded.pool.active(), timeout=WAIT_MS)
    assert role.matrix.isVisible() and "each class (rows)" in role.title.text()


def _wheel(widget, modifiers=Qt.KeyboardModifier.NoModifier) -> None:
    """One notch of the wheel, down, over the middle of `widget`, passed up its parents while none takes it, as
    Qt does with the window system's wheel events (an event sent by hand is not passed on)."""
    from PySide6.QtCore import QPoint, QPointF
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QApplication

    target = widget.viewport() if hasattr(widget, "viewport") else widget
    at = target.rect().center()
    while target is not None:
        event = QWheelEvent(QPointF(at), QPointF(target.mapToGlobal(at)), QPoint(0, 0), QPoint(0, -120),
                            Qt.MouseButton.NoButton, modifiers, Qt.ScrollPhase.NoScrollPhase, False)
        if QApplication.sendEvent(target, event) and event.isAccepted():
            return
        at, target = target.mapToParent(at), target.parentWidget()


def test_the_wheel_scrolls_a_panel_of_plots_until_a_plot_is_clicked(qtbot, loaded):
    """Over the Real data panel's plots the wheel zoomed each plot it passed (the x axis of 1/N then showed
    several "∞" ticks) instead of scrolling the panel; the plots' menus had no way back."""
    from probescope.app.figures.export import ExportTarget
    from probescope.app.figures.figure_menu import figure_menu
    from probescope.widgets.gallery.inverse_n import InverseAxis

    loaded.set_workspace("gallery")
    ws = loaded.workspaces["gallery"]
    loaded.resize(1280, 700)
    ws.area.raise_panel("real")
    plot = ws.real_panel.fid_plot
    scroll = ws.area.panels["real"].widget()
    qtbot.waitUntil(lambda: scroll.verticalScrollBar().maximum() > 0 and plot.isVisible(), timeout=WAIT_MS)
    import numpy as np

    plot.set_fit(np.array([100, 200, 400]), np.array([30.0, 25.0, 22.0]), 19.0, 1100.0)
    plot.reset_view()
    view = plot.getViewBox().viewRange()
    _wheel(plot)
    assert scroll.verticalScrollBar().value() > 0 and plot.getViewBox().viewRange() == view  # scrolled, not zoomed
    at = scroll.verticalScrollBar().value()
    _wheel(plot, Qt.KeyboardModifier.ControlModifier)  # a modifier: the plot zooms
    assert plot.getViewBox().viewRange() != view and scroll.verticalScrollBar().value() == at
    qtbot.mouseClick(plot.viewport(), Qt.MouseButton.LeftButton)
    assert plot.hasFocus()
    zoomed = plot.getViewBox().viewRange()
    _wheel(plot)  # clicked (it has the focus): the plot zooms
    assert plot.getViewBox().viewRange() != zoomed and scroll.verticalScrollBar().value() == at
    menu = figure_menu(ExportTarget("FID against 1/N", plot), lambda *_: None, plot)
    [reset] = [a for a in menu.actions() if a.text() == "Reset View"]
    reset.trigger()
    assert np.allclose(plot.getViewBox().viewRange(), view)
    assert InverseAxis("bottom").tickStrings([-0.02, 0.0, 0.01], 1, 0.01) == ["", "∞", "100"]


def test_the_embedding_thumbnail_goes_with_the_hover(qtbot, loaded):
    """The hover thumbnail stayed after the pointer left the plot, across trials and theme changes."""
    from PySide6.QtCore import QEvent, QPointF
    from PySide6.QtGui import QColor, QImage
    from PySide6.QtWidgets import QApplication

    from probescope.app.window.theme import apply_theme

    loaded.set_workspace("similarity")
    ws = loaded.workspaces["similarity"]
    view = ws.embedding.view
    ws.area.raise_panel("embedding")
    qtbot.waitUntil(lambda: len(view._xy) > 0 and not loaded.pool.active(), timeout=WAIT_MS)
    image = QImage(32, 32, QImage.Format.Format_RGB32)
    image.fill(QColor("#808080"))

    def hover() -> None:
        vb = view.plot.getPlotItem().vb
        view._moved(vb.mapViewToScene(QPointF(*view._xy[0])))
        assert view._hover >= 0
        view.set_thumbnail(view._hover, image, "a stimulus")
        assert view.thumbnail.isVisible()

    hover()
    QApplication.sendEvent(view.plot.viewport(), QEvent(QEvent.Type.Leave))
    assert not view.thumbnail.isVisible() and view._hover == -1
    hover()
    ws.step(1)  # the next trial
    qtbot.waitUntil(lambda: not loaded.pool.active(), timeout=WAIT_MS)
    assert not view.thumbnail.isVisible()
    hover()
    try:
        apply_theme(QApplication.instance(), "dark")
        QApplication.processEvents()  # (the palette change is posted)
        assert not view.thumbnail.isVisible()
    finally:
        apply_theme(QApplication.instance(), "light")


def test_a_result_shown_again_from_the_cache_draws_the_units_histogram(qtbot, loaded):
    """Back to settings dissected before (from the cache: a new LayerData), the unit's overlays came from the
    overlay cache and its activation histogram stayed empty."""
    ws = loaded.workspaces["dissection"]
    assert ws.charts.histogram.counts.size
    before = ws.data
    ws.run_settings(ws.settings)
    qtbot.waitUntil(lambda: ws.data is not before and not loaded.pool.active(), timeout=WAIT_MS)
    assert ws.data.key == before.key and ws.charts.histogram.counts.size
