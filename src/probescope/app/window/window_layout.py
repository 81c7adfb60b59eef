"""The window's arrangement kept between sessions: its geometry, each workspace's panels and the last workspace,
restored at start (a saved value Qt cannot use is noted, never fatal) and saved on close."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtGui import QGuiApplication
from PySide6.QtWidgets import QMainWindow

from probescope.app.window.saved_settings import GEOMETRY, LAST_WORKSPACE, PANEL_LAYOUT, Settings
from probescope.app.window.workspace import Workspace


class WindowLayout:
    def __init__(self, window: QMainWindow, settings: Settings, workspaces: dict[str, Workspace]):
        self._window, self._settings, self._workspaces = window, settings, workspaces

    def restore(self, show: Callable[[str], None]) -> None:
        """Geometry, panels and the last workspace (`show(name)` raises it) as saved; the screen fitted without."""
        geometry = self._settings.get(GEOMETRY)
        restored = geometry is not None and self._window.restoreGeometry(geometry)
        if geometry is not None and not restored:
            self._settings.note("window/geometry", bytes(geometry.data()), "not a window geometry Qt can restore; "
                                "the window fits the screen")
        if not restored:
            self.fit_screen()
        for workspace in self._workspaces.values():
            workspace.area.restore(self._settings.get(PANEL_LAYOUT, workspace.name))
        last = self._settings.get(LAST_WORKSPACE, known=list(self._workspaces))
        if last is not None:
            show(last)

    def unused_settings(self) -> tuple[str, str] | None:
        """Saved values that were not used (the wrong type, a device this machine lacks), as one notification's
        message and details."""
        notes = self._settings.check_all(list(self._workspaces))
        if not notes:
            return None
        more = f" (and {len(notes) - 1} more: see Details)" if len(notes) > 1 else ""
        return notes[0] + more, "\n".join(notes)

    def fit_screen(self) -> None:
        """The first window: 90% of the screen's available area, centred (the views are made for room)."""
        screen = self._window.screen() or QGuiApplication.primaryScreen()
        available = screen.availableGeometry()
        self._window.resize(available.size() * 0.9)
        self._window.move(available.center() - self._window.rect().center())

    def save(self, current: str) -> None:
        """Everything above, with `current` the last workspace."""
        self._settings.set(GEOMETRY, self._window.saveGeometry())
        for workspace in self._workspaces.values():
            self._settings.set(PANEL_LAYOUT, workspace.area.saveState(), workspace.name)
        self._settings.set(LAST_WORKSPACE, current)
        self._settings.sync()
