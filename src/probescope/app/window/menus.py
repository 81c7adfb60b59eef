"""The main window's menus: every action in one place, so the command palette can list them all.

File (open anything, recent items, exports, quit), View (workspaces, the current workspace's panels and their reset,
next/previous item, theme, compute device, command palette) and Help (the user guide, shortcuts, about).
"""

from __future__ import annotations

import importlib.util
import platform
import re
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from PySide6.QtCore import qVersion
from PySide6.QtGui import QAction, QActionGroup, QKeySequence
from PySide6.QtWidgets import QMainWindow, QMenu, QMessageBox

from probescope import __version__
from probescope.app.window.help import GuideWindow, ShortcutsDialog
from probescope.app.window.saved_settings import THEME, THEMES
from probescope.jobs.inputs import OpenRequest
from probescope.widgets.command_palette import CommandPalette


class Menus:
    """The menu bar of `window` (a MainWindow); `actions` lists every action, `recent` is File > Open Recent."""

    def __init__(self, window) -> None:
        self.window = window
        self.actions: list[QAction] = []
        self._palette: CommandPalette | None = None
        self._guide: GuideWindow | None = None
        w = window
        bar = w.menuBar()
        file_menu = bar.addMenu("&File")
        self.add(file_menu, "Open &Model…", lambda: w.browse("model"), QKeySequence.StandardKey.Open)
        self.add(file_menu, "Open Probing &Dataset…", lambda: w.browse("dataset"), "Ctrl+Shift+O")
        self.add(file_menu, "Open Generator &Samples…", lambda: w.browse("samples"))
        self.add(file_menu, "Open Similarity &Judgments…", lambda: w.browse("judgments"))
        self.add(file_menu, "Open Dissection &Batch Folder…", w.browse_batch)
        self.add(file_menu, "Open Demo &World", w.open_demo_world)
        self.recent: QMenu = file_menu.addMenu("Open &Recent")
        self.fill_recent()
        self.add(file_menu, "Forget Trusted Files", w.trust.forget)
        file_menu.addSeparator()
        self.add(file_menu, "&Export Figure…", lambda: w.figures.export_figure(), "Ctrl+E")  # (not the checked flag)
        self.add(file_menu, "&Copy Figure to Clipboard", w.figures.copy_figure, "Ctrl+Shift+C")
        self.add(file_menu, "Export Dissection &tally.csv…",
                 lambda: w.workspaces["dissection"].export_results_dialog("tally"))
        self.add(file_menu, "Export Dissection Results (&JSON)…",
                 lambda: w.workspaces["dissection"].export_results_dialog("json"))
        file_menu.addSeparator()
        self.add(file_menu, "&Quit", w.close, QKeySequence.StandardKey.Quit)

        view = bar.addMenu("&View")
        for k, workspace in enumerate(w.workspaces.values(), start=1):
            self.add(view, f"{workspace.title} Workspace", lambda n=workspace.name: w.set_workspace(n),
                     f"Ctrl+{k}")
        view.addSeparator()
        self.panels = view.addMenu("&Panels")
        self.panels.aboutToShow.connect(self._fill_panels)
        self.add(view, "&Reset Layout", w.reset_layout, "Ctrl+Shift+R")
        self.add(view, "&Tasks", w.toggle_tasks, "Ctrl+Shift+T")
        view.addSeparator()
        self.add(view, "&Next Item", lambda: w.current_workspace().next_item(), "Ctrl+]")
        self.add(view, "&Previous Item", lambda: w.current_workspace().previous_item(), "Ctrl+[")
        view.addSeparator()
        self.choices(view.addMenu("&Theme"), [(f"{t.capitalize()} Theme", t) for t in THEMES],
                     w.settings.get(THEME), w.set_theme)
        self.devices = view.addMenu("Compute &Device")
        self.fill_devices(w.pool.devices())
        w.pool.devices_known.connect(self.fill_devices)
        view.addSeparator()
        self.add(view, "Command &Palette…", self.show_command_palette, "Ctrl+Shift+P")

        help_menu = bar.addMenu("&Help")
        self.add(help_menu, "User &Guide", lambda: self.show_guide(), QKeySequence.StandardKey.HelpContents)
        self.add(help_menu, "Guide to This &Workspace", lambda: self.show_guide(f"{w.current_workspace().name}.md"),
                 "Shift+F1")
        self.add(help_menu, "&Keyboard Shortcuts", self.show_shortcuts, "Ctrl+/")
        help_menu.addSeparator()
        self.add(help_menu, "&About probescope", lambda: about_box(w))

    def add(self, menu: QMenu, text: str, slot: Callable[[], object],
            shortcut: str | QKeySequence.StandardKey | None = None) -> QAction:
        """An action that calls `slot()` with no arguments: `triggered` carries a `checked` flag that Qt would pass
        to any slot taking an argument (Export Figure's `view` received False)."""
        action = menu.addAction(text)
        action.triggered.connect(lambda _checked=False: slot())
        if shortcut is not None:
            action.setShortcut(QKeySequence(shortcut))
        self.actions.append(action)
        return action

    def choices(self, menu: QMenu, items: list[tuple[str, str]], current: str, choose: Callable[[str], None]) -> None:
        """Exclusive checkable actions, one per (text, value)."""
        group = QActionGroup(menu)
        for text, value in items:
            action = self.add(menu, text, lambda v=value: choose(v))
            action.setCheckable(True)
            action.setChecked(value == current)
            group.addAction(action)

    def fill_devices(self, devices: list[str] | None) -> None:
        """One choice per device of the machine that computes (the kernel's: until it has said, the device set)."""
        w = self.window
        for action in self.devices.actions():
            self.actions.remove(action)
        self.devices.clear()
        device = w.state.device
        known = devices if devices is not None else sorted({"cpu", device})
        self.choices(self.devices, [(f"Compute on {d}", d) for d in known], device, w.compute.choose)

    def _fill_panels(self) -> None:
        """The current workspace's panels, each shown or hidden by its check mark."""
        self.panels.clear()
        for action in self.window.current_workspace().area.toggles():
            self.panels.addAction(action)

    def fill_recent(self) -> None:
        settings = self.window.settings
        self.recent.clear()
        items = settings.recent.items()
        for item in items:
            request = OpenRequest.from_json(item.spec)
            action = self.recent.addAction(f"{item.kind}: {item.label}")
            action.setToolTip(request.spec)
            action.triggered.connect(lambda _=False, r=request: self.window.open(r))
        if items:
            self.recent.addSeparator()
            self.recent.addAction("Clear Recent Items").triggered.connect(self._clear_recent)
        self.recent.setEnabled(bool(items))

    def _clear_recent(self) -> None:
        self.window.settings.recent.clear()
        self.fill_recent()


    def show_guide(self, page: str = "README.md") -> GuideWindow:
        """The user guide's window (one), at `page`."""
        if self._guide is None:
            self._guide = GuideWindow(self.window)
        self._guide.show_page(page)
        return self._guide

    def show_shortcuts(self) -> ShortcutsDialog:
        dialog = ShortcutsDialog(list(self.actions), self.window)
        dialog.show()
        return dialog

    def show_command_palette(self) -> CommandPalette:
        """Every action and the workspace's own items, searched by name (one palette at a time)."""
        if self._palette is not None:
            self._palette.close()
        w = self.window
        self._palette = CommandPalette(list(self.actions), w, w.current_workspace().palette_items)
        self._palette.show()
        self._palette.search.setFocus()
        return self._palette

def about_box(window: QMainWindow) -> QMessageBox:
    """The version, and the versions a bug report needs (torch, Qt, Python)."""
    torch = installed_torch_version()

    box = QMessageBox(QMessageBox.Icon.Information, "About probescope",
                      f"probescope {__version__}\nLook inside vision models and score them.\n\n"
                      f"torch {torch}, Qt {qVersion()}, Python {platform.python_version()}",
                      QMessageBox.StandardButton.Ok, window)
    if not window.windowIcon().isNull():
        box.setIconPixmap(window.windowIcon().pixmap(64, 64))
    box.setModal(False)
    box.show()
    return box


def installed_torch_version() -> str:
    """torch's version with its build (2.14.1+cu130: which CUDA, for a bug report), read from its version file: the
    window's process never imports torch (the kernel does)."""
    spec = importlib.util.find_spec("torch")  # (finds the package without running it)
    if spec is None or spec.origin is None:
        return "not installed"
    try:
        text = Path(spec.origin).with_name("version.py").read_text(encoding="utf-8")
        return re.search(r"^__version__\s*=\s*['\"]([^'\"]+)['\"]", text, re.M).group(1)
    except (OSError, AttributeError):
        try:
            return version("torch")
        except PackageNotFoundError:
            return "not installed"
