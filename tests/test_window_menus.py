"""Every action of every menu, every command palette entry and every context menu of the views, triggered in each
workspace of a loaded window: file dialogs are answered by the test, modal dialogs closed by it, and the test fails
on any exception, including one raised inside a Qt slot (PySide prints those and carries on: File > Export
Figure failed that way with "'bool' object has no attribute 'widget'", the menu passing its checked flag as the
view)."""

from __future__ import annotations

import sys

import pytest
from PySide6.QtCore import QPoint, Qt, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QApplication, QDialog, QFileDialog, QMenu, QPushButton, QWidget
from shiboken6 import isValid
from windows import WAIT_MS, open_all, world_requests

from probescope.app.window.theme import apply_theme
from probescope.jobs import inputs

pytestmark = pytest.mark.usefixtures("isolated_cache")


@pytest.fixture
def slot_errors(monkeypatch):
    """Exceptions raised in Qt slots and virtual methods (PySide hands them to sys.excepthook, then goes on)."""
    seen: list[str] = []
    previous = sys.excepthook

    def hook(kind, value, tb):
        seen.append(f"{kind.__name__}: {value}")
        previous(kind, value, tb)

    monkeypatch.setattr(sys, "excepthook", hook)
    return seen


@pytest.fixture
def answered(monkeypatch, tmp_path):
    """File dialogs answered (a save goes to tmp_path/saved under the suggested name; an open is cancelled) and
    every modal dialog closed once its Browse buttons were pressed; yields the saved paths."""
    saved: list[str] = []
    (tmp_path / "saved").mkdir()

    def save(_parent=None, _caption="", suggested="", _filter="", *args, **kwargs):
        name = suggested.rsplit("/", 1)[-1] or "figure.png"
        saved.append(str(tmp_path / "saved" / name))
        return saved[-1], _filter

    monkeypatch.setattr(QFileDialog, "getSaveFileName", staticmethod(save))
    monkeypatch.setattr(QFileDialog, "getOpenFileName", staticmethod(lambda *a, **k: ("", "")))
    monkeypatch.setattr(QFileDialog, "getExistingDirectory", staticmethod(lambda *a, **k: ""))
    timer = QTimer()

    def close_modal() -> None:
        dialog = QApplication.activeModalWidget()
        if isinstance(dialog, QDialog):
            for button in dialog.findChildren(QPushButton):
                if button.text().startswith("Browse"):
                    button.click()
            dialog.reject()

    timer.timeout.connect(close_modal)
    timer.start(20)
    yield saved
    timer.stop()


@pytest.fixture
def menus_shown():
    """Each popup menu that opens (a context menu waits in its own event loop for a click) is recorded and
    closed; yields them."""
    shown: list[QMenu] = []
    timer = QTimer()

    def close_popup() -> None:
        popup = QApplication.activePopupWidget()
        if isinstance(popup, QMenu):
            shown.append(popup)
            popup.close()

    timer.timeout.connect(close_popup)
    timer.start(20)
    yield shown
    timer.stop()


def menu_actions(window) -> dict[str, QAction]:
    """Every action of the menu bar by its path ("File/Open Recent/model: demo"), submenus filled as when they open
    (Panels, Open Recent: they make their actions anew each time)."""
    out: dict[str, QAction] = {}

    def walk(menu: QMenu, path: str) -> None:
        menu.aboutToShow.emit()
        for action in menu.actions():
            if action.menu() is not None:
                walk(action.menu(), f"{path}/{action.text()}")
            elif not action.isSeparator() and action.text():
                out[f"{path}/{action.text()}"] = action

    for top in window.menuBar().actions():
        walk(top.menu(), top.text())
    return out


def settle(qtbot, window) -> None:
    qtbot.waitUntil(lambda: not window.pool.active(), timeout=WAIT_MS)


def close_windows(window) -> None:
    """The non-modal windows an action opened (guide, shortcuts, about, export, palette)."""
    for widget in QApplication.topLevelWidgets():
        if widget is not window and widget.isVisible() and isinstance(widget, QWidget) and widget.isWindow():
            widget.close()


def test_every_menu_action_palette_entry_and_context_menu_runs_without_an_exception(
        qtbot, window, small_world, monkeypatch, slot_errors, answered, menus_shown):
    monkeypatch.setattr(inputs, "DEMO_DATASET_IMAGES", 14)
    monkeypatch.setattr(inputs, "DEMO_SAMPLES", 20)
    failures: list[str] = []
    window.pool.failed.connect(lambda handle, error: failures.append(f"{handle.name}: {error.message}"))
    open_all(qtbot, window, world_requests(small_world))
    try:
        for name in window.workspaces:
            ran = []
            for path in menu_actions(window):
                window.set_workspace(name)
                action = menu_actions(window).get(path)  # (found again: an earlier action may have remade it)
                if action is None or path == "&File/&Quit" or not action.isEnabled():
                    continue
                action.trigger()  # what a click on the menu item does
                ran.append(path)
                QApplication.processEvents()
                assert not slot_errors, (name, path, slot_errors)
                close_windows(window)
            settle(qtbot, window)
            window.set_workspace(name)
            assert len(ran) >= 25, ran
            assert "&File/&Export Figure…" in ran and "&File/Open &Recent/Clear Recent Items" in ran
            run_palette(qtbot, window, name)
            run_context_menus(window, menus_shown)
            settle(qtbot, window)
            assert not slot_errors, (name, slot_errors)
        # (the walk's own tally export once met nothing dissected yet, on a loaded machine: 1 run in 45)
        qtbot.waitUntil(lambda: window.workspaces["dissection"].data is not None, timeout=WAIT_MS)
        menu_actions(window)["&File/Export Dissection &tally.csv…"].trigger()
        assert any(path.endswith("tally.csv") for path in answered)
        unexpected = [f for f in failures if "failed:" in f]  # a bug, not bad input
        assert not unexpected, unexpected
    finally:
        apply_theme(QApplication.instance(), "light")
    quit_action = menu_actions(window)["&File/&Quit"]
    quit_action.trigger()
    assert not window.isVisible() and not slot_errors


def run_palette(qtbot, window, name: str) -> None:
    """Every entry the palette lists for a few queries (the menu actions for none, the workspace's own items for
    words they contain), each run from the palette as Enter does."""
    workspace = window.workspaces[name]
    queries = {"dissection": ("sort units by", "concept", "unit"), "gallery": ("sort samples by", "show class"),
               "similarity": ("trial", "sort", "class")}[name]
    palette = window.menus.show_command_palette()
    menu_entries = palette.visible_commands()
    assert "Export Figure…" in menu_entries or "&Export Figure…" in menu_entries
    palette.close()
    for query in queries:
        count = len(workspace.palette_items(query))
        for k in range(count):
            window.set_workspace(name)
            palette = window.menus.show_command_palette()
            qtbot.keyClicks(palette.search, query)
            own = palette.list.count() - count  # menu actions matching the query come first
            palette.list.setCurrentRow(own + k)
            qtbot.keyClick(palette.search, Qt.Key.Key_Return)
            QApplication.processEvents()
        assert count or name == "similarity", (name, query)


def run_context_menus(window, shown: list[QMenu]) -> None:
    """Each view with a context menu of its own (the figure menus, the unit table's) asked for it, and each of its
    actions triggered; a paper preset's export once per workspace (every view at every preset is
    test_app_figures's: here it was 48 figure exports, half of this test's time)."""
    workspace = window.current_workspace()
    presets_run: set[str] = set()
    for widget in [workspace, *workspace.findChildren(QWidget)]:
        if not isValid(widget):  # (an earlier action rebuilt a part of the view)
            continue
        if widget.contextMenuPolicy() == Qt.ContextMenuPolicy.CustomContextMenu and widget.isVisibleTo(window):
            shown.clear()
            widget.customContextMenuRequested.emit(QPoint(5, 5))
            for menu in list(shown):
                for action in menu.actions():
                    if action.isSeparator() or not action.isEnabled() or action.menu() is not None:
                        continue
                    if action.text().startswith("Export for a "):
                        if action.text() in presets_run:
                            continue
                        presets_run.add(action.text())
                    action.trigger()
                    QApplication.processEvents()
                    close_windows(window)
