"""The window researchers take figures from: nothing stale, nothing clipped, the device used, readable in both themes.

One test per defect found by driving the real window (the export defects are in test_app_export_vector.py, the
gallery's frozen runs in test_ws_gallery.py)."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtGui import QColor, QGuiApplication, QImage
from PySide6.QtWidgets import QApplication, QLabel
from windows import WAIT_MS, open_all, world_requests

from probescope.app.compute.activity import Activity, counts, duration
from probescope.app.dissection.workspace import COLUMNS
from probescope.app.figures.export import render_image
from probescope.app.window.theme import apply_theme
from probescope.jobs.inputs import OpenRequest
from probescope.jobs.protocol import Progress
from probescope.widgets.ink import contrast, ink_color
from probescope.widgets.plots_curve import nice_ticks

pytestmark = pytest.mark.usefixtures("isolated_cache")


@pytest.fixture
def loaded(qtbot, window, small_world):
    open_all(qtbot, window, world_requests(small_world))
    return window


def test_the_first_window_fits_the_screen_and_the_explanations_are_in_view(qtbot, loaded):
    assert loaded.focusWidget() is loaded.workspaces["dissection"].units  # the unit table, not the layer box
    available = loaded.screen().availableGeometry()
    assert abs(loaded.width() - 0.9 * available.width()) <= 2 and abs(loaded.height() - 0.9 * available.height()) <= 2
    loaded.resize(1440, 900)  # what it is on a 1600x1000 screen (the offscreen test screen is 800x600)
    loaded.workspaces["dissection"].area.reset()
    for _ in range(3):
        QApplication.processEvents()
    ws = loaded.workspaces["dissection"]
    column = COLUMNS.index("compositional")  # the explanation: in view without scrolling
    assert ws.units.columnViewportPosition(column) + 20 < ws.units.viewport().width()
    assert ws.trace.columnWidth(0) >= 0.45 * ws.trace.viewport().width()  # the beam trace's formulas have room
    for key in ("units", "trace", "charts"):
        assert ws.area.on_screen(key)
    # the keys browse each workspace's items when it is shown, never the layer box (a layer is chosen, not arrowed)
    for name, view in (("gallery", loaded.workspaces["gallery"].grid),
                       ("similarity", loaded.workspaces["similarity"].trials.trial_list), ("dissection", ws.units)):
        loaded.set_workspace(name)
        qtbot.waitUntil(lambda view=view: loaded.focusWidget() is view, timeout=WAIT_MS)


def test_panels_hide_reset_and_come_back_after_a_restart(qtbot, window, settings_path):
    from windows import make_window

    area = window.workspaces["dissection"].area
    area.panels["charts"].close()
    assert not area.on_screen("charts")
    window.reset_layout()
    qtbot.waitUntil(lambda: area.on_screen("charts"), timeout=WAIT_MS)
    area.panels["units"].close()
    window.close()
    again = make_window(qtbot, settings_path)
    try:
        qtbot.waitUntil(lambda: again.workspaces["dissection"].area.default_state is not None, timeout=WAIT_MS)
        assert not again.workspaces["dissection"].area.panels["units"].isVisible()  # the user's arrangement
    finally:
        again.close()


def test_a_new_model_never_shows_the_previous_models_results(qtbot, loaded):
    ws = loaded.workspaces["dissection"]
    before = ws.data.key  # (both models are called demo: the small world's has untrained weights)
    seen = []

    def on_change(slot: str) -> None:  # what is on screen the moment the new model is in the header
        if slot == "model":
            seen.append((ws.units.rowCount(), ws.data, ws.header.text(), len(ws.overlays),
                         ws.trace.topLevelItemCount()))

    loaded.state.changed.connect(on_change)
    with qtbot.waitSignal(loaded.opened, timeout=WAIT_MS):
        loaded.open(OpenRequest("model", "demo"))
    rows, data, header, overlays, steps = seen[0]
    assert (rows, data, overlays, steps) == (0, None, 0, 0)
    assert "demo" in header and "computing" in header
    qtbot.waitUntil(lambda: ws.data is not None and ws.data.result.complete and not loaded.pool.active(),
                    timeout=WAIT_MS)
    assert ws.data.key != before and ws.data.result.model["spec"] == "demo"


def test_the_dissection_runs_where_the_model_is(qtbot, loaded, monkeypatch):
    """The app's device (where models are loaded) is the dissection's, not always the CPU."""
    from probescope.app.dissection import layer_run as module

    ws = loaded.workspaces["dissection"]
    asked = []
    monkeypatch.setattr(module, "layer_data_job",
                        lambda ctx, **kw: asked.append(kw["request"].settings.device) or iter(()))
    model = ws._inputs[0]
    ws._inputs = (replace(model, value=replace(model.value, device="cuda:1")), *ws._inputs[1:])
    ws.run_settings(ws.settings)
    qtbot.waitUntil(lambda: bool(asked), timeout=WAIT_MS)
    assert asked == ["cuda:1"] and ws.settings.device == "cuda:1"


def _label_contrast(label: QLabel) -> float:
    """The contrast of a label's text with its background, read off the rendered label (at 3x, glyph cores)."""
    image = render_image(label, scale=3.0).convertToFormat(QImage.Format.Format_RGB888)
    arr = np.frombuffer(image.constBits(), np.uint8, image.bytesPerLine() * image.height())
    rgb = arr.reshape(image.height(), image.bytesPerLine())[:, : 3 * image.width()].reshape(-1, 3)
    colors, number = np.unique(rgb, axis=0, return_counts=True)
    background = QColor(*colors[number.argmax()].tolist())
    return max(contrast(QColor(*c.tolist()), background) for c in colors)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_text_and_plots_follow_the_theme_with_enough_contrast(qtbot, loaded, theme):
    apply_theme(QApplication.instance(), theme)
    try:
        for name in loaded.workspaces:  # each looked at: views hidden under another workspace recolour when shown
            loaded.set_workspace(name)
            for _ in range(3):
                QApplication.processEvents()
        for ws in loaded.workspaces.values():
            for label in ws.findChildren(QLabel):
                if label.isVisibleTo(loaded) and label.text().strip() and label.width() > 4:
                    assert _label_contrast(label) >= 4.5, (ws.name, label.text()[:60])
        base = loaded.palette().color(loaded.palette().ColorRole.Base)
        for plot in (loaded.workspaces["dissection"].charts.sweep.plot,
                     loaded.workspaces["similarity"].embedding.view.plot):
            assert plot.backgroundBrush().color() == base  # the plots follow the theme
            assert contrast(plot.getAxis("left").textPen().color(), base) >= 4.5
        for role in ("unit", "concept", "warning", "pick"):
            for background in (loaded.palette().color(r) for r in (loaded.palette().ColorRole.Window,
                                                                  loaded.palette().ColorRole.Base)):
                assert contrast(ink_color(role), background) >= 4.5, (role, background.name())
    finally:
        apply_theme(QApplication.instance(), "light")


def test_similarity_captions_never_run_over_the_next_tile(qtbot):
    from probescope.widgets.similarity.trial_grid import ModelView, TrialGrid

    grid = TrialGrid(124)
    qtbot.addWidget(grid)
    image = QImage(100, 100, QImage.Format.Format_RGB32)
    image.fill(QColor("#336699"))
    long = "snowy_forest-s #45, the mirrored catch stimulus of the query, with a long caption"
    grid.set_trial((image, "autumn_forest-s #51"), [(image, long)] * 8, [0, 1])
    grid.set_model_view(ModelView("demo · layer4", tuple(range(1, 9)), (0.5,) * 8, ((0, 2), (1, 3)), 10, 13))
    grid.show()
    qtbot.waitExposed(grid)

    def rect(widget):
        return widget.geometry().translated(widget.parentWidget().mapTo(grid, QPoint(0, 0)))

    pictures = [rect(cell.picture) for cell in grid._cells]
    for cell in grid._cells:
        for text in (cell.caption, cell.model):
            if text.isVisible():
                assert not any(rect(text).intersects(p) for p in pictures), text.text()[:40]


def test_the_status_bar_lets_go_of_the_last_task_as_it_ends(qtbot, window):
    """Progress is redrawn every PROGRESS_MS, but the end of the last running task clears the status bar at once: a
    whole-window screenshot taken as the pool fell idle showed "triplet accuracy of demo · layer4 · 6 s left"."""
    import threading

    gate = threading.Event()

    def task(ctx):
        ctx.progress(0.5, "item 10 (10/20)")
        gate.wait(WAIT_MS / 1000)

    window.pool.submit(task, name="a short task", key="test:short")
    qtbot.waitUntil(lambda: window.progress.isVisible(), timeout=WAIT_MS)
    assert window.progress.label.text().startswith("item 10 (10/20)")
    with qtbot.waitSignal(window.pool.finished, timeout=WAIT_MS):
        gate.set()
    assert not window.progress.isVisible() and window.progress.label.text() == ""  # (no event loop turn since)


def test_the_task_panel_says_stage_items_rate_and_time_left(qtbot, window):
    clock = [0.0]
    activity = Activity(clock=lambda: clock[0])
    assert counts("dissecting layer4: unit 17 (18/128)") == (18, 128) and counts("reading") is None
    first = activity.row(1, "dissect layer4", Progress(0.1, "unit 17 (18/128)"))
    assert (first.done, first.rate, first.left) == ("18 of 128 units", "", "")
    clock[0] = 10.0
    later = activity.row(1, "dissect layer4", Progress(0.5, "unit 63 (64/128)"))
    assert (later.done, later.rate, later.left) == ("64 of 128 units", "4.6 units/s", duration(64 / 4.6))
    # every count says what it counts, where the message says it (issue 45: "done 280 of 280")
    features = activity.row(2, "features", Progress(1.0, "layer4: 280/280 images"))
    assert features.done == "280 of 280 images"
    assert activity.row(3, "x", Progress(0.5, "layer4: 3/8")).done == "3 of 8"  # nothing said: no guess
    # in the window: a running task is listed with a cancel button, and cancelling stops it
    import threading

    gate = threading.Event()

    def task(ctx):
        ctx.progress(0.25, "item 5 (5/20)")
        while not ctx.cancelled():
            gate.wait(0.01)
        return None

    handle = window.pool.submit(task, name="a long task", key="test:long")
    qtbot.waitUntil(lambda: window.tasks.stages() == ["item 5 (5/20)"], timeout=WAIT_MS)
    assert "Tasks (1)" in window.progress.tasks_button.text()
    window.progress.tasks_button.click()
    assert window.tasks_dock.isVisible()
    shortcut = next(a for a in window.menus.actions if a.shortcut().toString() == "Ctrl+Shift+T")
    shortcut.trigger()  # the same action closes it (it only opened it)
    assert not window.tasks_dock.isVisible()
    shortcut.trigger()
    assert window.tasks_dock.isVisible()
    window.tasks.table.cellWidget(0, 6).click()
    qtbot.waitUntil(lambda: handle.done, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: window.tasks.stages() == [], timeout=WAIT_MS)
    # the status bar names the workspace on screen's oldest task, else the oldest: a lookup that starts after a
    # dissection does not take its place there
    long = window.pool.submit(task, name="dissect layer4", key="dissection:layer")
    qtbot.waitUntil(lambda: window.tasks.stages() == ["item 5 (5/20)"], timeout=WAIT_MS)

    def lookup(ctx):
        ctx.progress(0.0, "cached drawing of unit 5")
        while not ctx.cancelled():
            gate.wait(0.01)

    later = window.pool.submit(lookup, name="cached drawing", key="dissection:drawing-cache")
    qtbot.waitUntil(lambda: len(window.tasks.stages()) == 2, timeout=WAIT_MS)
    window.monitor.redraw()
    assert window.progress.label.text().startswith("item 5 (5/20)")
    window.pool.foreground = "gallery"  # another workspace on screen: still the oldest
    window.monitor.redraw()
    assert window.progress.label.text().startswith("item 5 (5/20)")
    for h in (long, later):
        h.cancel()
    qtbot.waitUntil(lambda: window.tasks.stages() == [], timeout=WAIT_MS)
    window.pool.foreground = "dissection"
    # a task stopped as a pause is listed as paused, not cancelled (the Gallery's Pause)
    import time

    started = time.monotonic()
    paused = window.pool.submit(task, name="a paused stream", key="test:stream")
    qtbot.waitUntil(lambda: window.tasks.stages() == ["item 5 (5/20)"] and time.monotonic() - started > 1.1,
                    timeout=WAIT_MS)
    window.pool.cancel("test:stream", ended_as="paused")
    qtbot.waitUntil(lambda: paused.done, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: any(name == "a paused stream" for name, _ in window.tasks.recent()), timeout=WAIT_MS)
    assert ("a paused stream", "paused") in window.tasks.recent()


def test_the_splash_is_on_screen_before_torch_and_closes_with_the_window():
    env = {"QT_QPA_PLATFORM": "offscreen", "PATH": "/usr/bin:/bin"}
    code = "import sys; from probescope.app.window import splash; sys.exit(splash.main())"
    proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
                            text=True)
    try:
        assert proc.stdout.readline().strip() == "shown"
        proc.stdin.close()  # the window is up
        assert proc.wait(timeout=30) == 0
    finally:
        proc.kill()
    code = "import sys, probescope.app.window.splash; print('torch' in sys.modules)"
    check = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert check.stdout.strip() == "False"


def test_small_things(qtbot, loaded, tmp_path):
    # the IS-against-N axis has whole-number ticks (after Reset it read 0 0 0 1 1 1)
    assert nice_ticks(0.0, 1.0, integer=True).tolist() == [0.0, 1.0]
    gallery = loaded.workspaces["gallery"]
    assert "sample order —" in gallery.caption.text() and "order order" not in gallery.caption.text()
    assert gallery.controls.source.itemText(0).startswith("Samples: ")
    # a formula clicked in the beam trace is named in the overlay box
    ws = loaded.workspaces["dissection"]
    ws.trace.click(1, 0)
    assert ws.view.controls.explanation.currentText().startswith("trace: ")
    # the command palette also finds units, concepts and sort orders
    palette = loaded.menus.show_command_palette()
    palette.search.setText(f"unit {ws.unit}")
    assert any(c.startswith(f"Unit {ws.unit}:") for c in palette.visible_commands())
    palette.search.setText("sort comp iou")
    assert "Sort units by comp IoU" in palette.visible_commands()
    palette.close()
    # the export dialog starts on the view in use and names the file after it
    from probescope.app.figures.export_dialog import ExportDialog

    loaded.activateWindow()
    qtbot.waitUntil(lambda: loaded.isActiveWindow(), timeout=WAIT_MS)
    ws.trace.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is ws.trace, timeout=WAIT_MS)
    loaded.figures.export_figure()
    dialog = next(w for w in QApplication.topLevelWidgets() if isinstance(w, ExportDialog) and w.isVisible())
    assert dialog.target.currentText() == "Beam-search trace" and "beam_search_trace" in dialog.path.text()
    dialog.target.setCurrentIndex(0)
    assert Path(dialog.path.text()).name.startswith("dissection")
    dialog.close()
    # with the keyboard on the unit table (where it starts), it offers the view exported last
    names = [t.name for t in ws.export_targets()]
    dialog.target.setCurrentIndex(names.index("Beam-search trace"))
    dialog.path.setText(str(tmp_path / "trace.png"))
    assert dialog.save() is not None
    ws.units.setFocus()
    qtbot.waitUntil(lambda: QApplication.focusWidget() is ws.units, timeout=WAIT_MS)
    loaded.figures.export_figure()
    dialog = next(w for w in QApplication.topLevelWidgets() if isinstance(w, ExportDialog) and w.isVisible())
    assert dialog.target.currentText() == "Beam-search trace"
    dialog.close()
    # every plot and the unit card answer a right click with their figure menu
    from probescope.app.figures.figure_menu import figure_menu

    assert ws.card.contextMenuPolicy() == Qt.ContextMenuPolicy.CustomContextMenu
    texts = [a.text() for a in figure_menu(ws.export_targets()[-1], lambda *a: None, ws).actions()]
    assert texts[0] == "Export Unit card…" and any("paper column" in t for t in texts)
    # the tally follows the table's filters
    ws.filters.specialised.setChecked(True)
    shown = ws.units.visible_units()
    ws.export_results("tally", tmp_path / "tally.csv")
    assert len((tmp_path / "tally.csv").read_text().splitlines()) == 1 + len(shown)
    ws.filters.specialised.setChecked(False)
    # the runs panel sets every search setting: beam limit 'all', the searches, the DA limit
    runs = ws.runs
    runs.fields["beam_limit"].setValue(0)
    runs.search_boxes["da-select"].setChecked(False)
    runs.fields["da_limit"].setValue(7)
    settings = runs.settings()
    assert (settings.beam_limit, settings.searches, settings.da_limit) == (0, ("iou", "da-stop"), 7)
    assert runs.fields["beam_limit"].text() == "all concepts"
    # Help: the guide's pages and the shortcuts
    guide = loaded.menus.show_guide()
    assert "probescope user guide" in guide.browser.toPlainText()
    shortcuts = loaded.menus.show_shortcuts()
    assert any(shortcuts.table.item(k, 1).text() == "Command Palette" for k in range(shortcuts.table.rowCount()))
    shortcuts.close()
    guide.close()
    # the GUI's message for a state dict without its architecture speaks of the dialog, not a spec
    bad = tmp_path / "weights.pt"
    torch.save({"conv.weight": torch.zeros(2, 2)}, bad)
    failures = []
    loaded.open_failed.connect(lambda _r, error: failures.append(error.message))
    loaded.open(OpenRequest("model", str(bad)))
    qtbot.waitUntil(lambda: bool(failures), timeout=WAIT_MS)
    assert "File > Open Model" in failures[0] and "'<arch>:<file>'" not in failures[0]
    assert QGuiApplication.clipboard() is not None


def test_more_small_things(qtbot, loaded, monkeypatch):
    # the Open Model dialog offers what was chosen last time
    from probescope.app.window.open_dialogs import OpenModelDialog
    from probescope.app.window.saved_settings import DIALOG_CHOICES

    loaded.settings.set(DIALOG_CHOICES, {"kind": "places365", "arch": "resnet18", "file": "/w/r.pth"}, "open_model")
    dialog = OpenModelDialog({"torchvision": ("alexnet", "resnet18")}, loaded)
    dialog.restore(loaded.settings.get(DIALOG_CHOICES, "open_model"))
    assert (dialog.kind.currentData(), dialog.arch.currentText(), dialog.file.text()) == (
        "places365", "resnet18", "/w/r.pth")
    assert dialog.request().spec == "places365:resnet18:/w/r.pth"
    # double-click (or Enter) in the gallery opens the large view
    gallery = loaded.workspaces["gallery"]
    gallery.open_image(0)
    qtbot.waitUntil(lambda: gallery.large.isVisible(), timeout=WAIT_MS)
    assert gallery.large.windowTitle() == "Sample #0" and gallery.large.labels.count() > 0
    gallery.large.close()
    # the embedding's hover names the stimulus
    view = loaded.workspaces["similarity"].embedding.view
    assert "#3" in view.tip(3)
    # a layer's listed rows keep their order while its units still arrive (new ones go in at their places in the
    # sort); the last block sorts them all
    from probescope.widgets.dissection.table import UnitTable

    table = UnitTable()
    qtbot.addWidget(table)
    table.set_rows(("unit", "IoU"), [(1, 0.2), (2, 0.5)])
    table.sortByColumn(1, Qt.SortOrder.DescendingOrder)
    assert table.visible_units() == [2, 1]
    table.set_rows(("unit", "IoU"), [(1, 0.9), (2, 0.5), (3, 0.7)], resort=False)
    assert table.visible_units() == [3, 2, 1]  # 3 by its place among the listed ones; 1's new value waits
    table.set_rows(("unit", "IoU"), [(1, 0.9), (2, 0.5), (3, 0.7), (4, 0.1)])
    assert table.visible_units() == [1, 3, 2, 4]
    # the accuracy correlation warns when the model is at its ceiling
    from probescope.app.dissection.layer_views import LayerViews

    layer = LayerViews()
    qtbot.addWidget(layer)
    rows = [{"method": "iou", "set": "union", "pearson_iou": 0.1, "pearson_da": 0.2, "units": 10,
             "mean_accuracy": 0.999}]
    import probescope.core.dissection.correlation as correlation

    monkeypatch.setattr(correlation, "accuracy_correlation", lambda result: rows)
    layer._show_correlation(type("R", (), {"complete": True})())
    assert "ceiling" in layer.correlation_caption.text()


def test_the_default_arrangement_is_made_at_the_size_the_workspace_gets(qtbot, settings_path):
    """A workspace's panel area is shown before the window's layout gives it its size (far larger at first): the
    default shares are taken of the final size, so the central view is not squeezed to its minimum."""
    from probescope.app.window.main_window import MainWindow
    from probescope.app.window.saved_settings import Settings

    window = MainWindow(Settings(settings_path), device="cpu")
    qtbot.addWidget(window)
    try:
        window.resize(1400, 900)
        window.set_workspace("dissection")
        window.show()
        area = window.workspaces["dissection"].area
        qtbot.waitUntil(lambda: area.default_state is not None, timeout=WAIT_MS)
        central = area.centralWidget().width()
        assert central >= 0.3 * area.width(), (central, area.width())
        assert area.panels["units"].width() <= 0.4 * area.width()
        # a panel with a width share and a height share keeps both (Similarity's right-hand column)
        window.set_workspace("similarity")
        area = window.workspaces["similarity"].area
        qtbot.waitUntil(lambda: area.default_state is not None, timeout=WAIT_MS)
        models, embedding = area.panels["models"], area.panels["embedding"]
        qtbot.waitUntil(lambda: models.width() <= 0.4 * area.width(), timeout=WAIT_MS)  # (docks resize at the next
        assert area.centralWidget().width() >= 0.25 * area.width()                      # layout pass)
        assert models.height() < embedding.height()
    finally:
        window.close()


def test_the_unit_cards_preset_buttons_and_the_tables_menu_reach_the_windows_figures(qtbot, loaded, tmp_path,
                                                                                   monkeypatch):
    """The unit card's paper-preset buttons write the figure, and the unit table's right-click menu offers the
    figure entries (both asked the window for a method it no longer had, and did nothing, when figures moved)."""
    from PySide6.QtWidgets import QFileDialog, QPushButton

    ws = loaded.workspaces["dissection"]
    out = tmp_path / "card.png"
    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(lambda *a, **k: (str(out), "")))
    ws.area.raise_panel("card")
    button = next(b for b in ws.area.panels["card"].findChildren(QPushButton) if "column" in b.text().lower())
    button.click()
    assert out.is_file() and out.stat().st_size > 0
    shown = []

    def read_and_close() -> None:
        popup = QApplication.activePopupWidget()
        if popup is None:
            QTimer.singleShot(50, read_and_close)
            return
        shown.append([action.text() for action in popup.actions()])
        popup.close()

    QTimer.singleShot(50, read_and_close)
    ws.selected.table_menu(ws.units.viewport().rect().center())  # (a modal popup until it is closed)
    assert shown and shown[0][0].startswith("Ablate") and any(t.startswith("Export Unit table") for t in shown[0])


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_check_boxes_and_radio_buttons_have_an_edge_of_3_to_1(qtbot, theme):
    """WCAG 2.1 non-text contrast: an unchecked check box's (and radio button's) edge against the window behind
    it and the field inside it. Fusion's own edge is 1.2:1 on the dark window (issue 45)."""
    from PySide6.QtWidgets import QApplication, QCheckBox, QRadioButton, QStyle, QStyleOptionButton

    from probescope.app.window.theme import apply_theme
    from probescope.widgets.ink import contrast

    app = QApplication.instance()
    apply_theme(app, theme)
    try:
        palette = app.palette()
        for cls, element in ((QCheckBox, QStyle.SubElement.SE_CheckBoxIndicator),
                             (QRadioButton, QStyle.SubElement.SE_RadioButtonIndicator)):
            box = cls("option")
            qtbot.addWidget(box)
            box.resize(box.sizeHint())
            image = box.grab().toImage()
            option = QStyleOptionButton()
            option.initFrom(box)
            rect = app.style().subElementRect(element, option, box)
            ratio = image.devicePixelRatio()
            y = round((rect.top() + rect.height() / 2) * ratio)
            row = [image.pixelColor(x, y) for x in range(round(rect.left() * ratio), round((rect.right() + 1) * ratio))]
            edge = max(row, key=lambda c: contrast(c, palette.window().color()))  # the edge's strongest pixel
            assert contrast(edge, palette.window().color()) >= 3.0, (cls.__name__, edge.name())
            assert contrast(edge, palette.base().color()) >= 3.0, (cls.__name__, edge.name())
    finally:
        apply_theme(app, "light")
