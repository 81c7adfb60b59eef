"""The small interface every workspace implements, so the window (and later work) can swap workspaces freely.

A workspace is a widget that binds to `AppState`, names the inputs it needs, refreshes itself in the worker pool
when they change, tells when its first content is on screen (`initial_work_done`, used by `--screenshot`), lists
its exportable views, and moves through its items (next/previous). Its views sit in a `PanelArea`: a central view
and dockable panels, arranged by the user and remembered.
"""

from __future__ import annotations

from typing import ClassVar

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QVBoxLayout, QWidget

from probescope.app.compute.workers import WorkerPool
from probescope.app.figures.export import ExportTarget
from probescope.app.window.panel_area import PanelArea
from probescope.app.window.state import AppState


class Workspace(QWidget):
    """Base class: subclasses set `name`, `title`, `needs` and implement `refresh()` (start worker tasks)."""

    name: ClassVar[str] = ""
    title: ClassVar[str] = ""
    needs: ClassVar[tuple[str, ...]] = ()  # AppState slots (and 'layer') whose change triggers refresh()
    reads: ClassVar[tuple[str, ...]] = ()  # the inputs its views show something of (a view's screenshot opens these)

    initial_work_done = Signal()
    first_results = Signal()  # its first results are on screen (or its first work failed): others' work may start

    def __init__(self, pool: WorkerPool, parent: QWidget | None = None):
        super().__init__(parent)
        self.pool = pool
        self.state: AppState | None = None
        self._initial_done = False
        self._first_shown = False
        self.area = PanelArea(self.name)  # the central view and the panels around it
        self.focus_view: QWidget = self  # what has the keyboard when the workspace is shown (its list of items)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.area)

    # -- the interface the window uses ------------------------------------------------------------------------------
    def load_state(self, state: AppState) -> None:
        """Bind to `state` and show what it holds now."""
        self.state = state
        state.changed.connect(self._on_state_changed)
        if self.ready():
            self.refresh()

    def export_targets(self) -> list[ExportTarget]:
        """Exportable views, the whole workspace first."""
        return [ExportTarget(self.title, self)]

    def palette_items(self, query: str) -> list[tuple[str, object]]:
        """The command palette's entries of this workspace matching `query` (title, what choosing it does)."""
        return []

    def next_item(self) -> None:
        self.step(1)

    def previous_item(self) -> None:
        self.step(-1)

    @property
    def is_initial_work_done(self) -> bool:
        return self._initial_done

    # -- for subclasses ---------------------------------------------------------------------------------------------
    def ready(self) -> bool:
        """All needed inputs are loaded."""
        if self.state is None:
            return False
        return all((self.state.layer if slot == "layer" else self.state.get(slot)) is not None for slot in self.needs)

    def refresh(self) -> None:
        raise NotImplementedError

    def step(self, offset: int) -> None:
        """Move to the item `offset` away in the workspace's main list."""

    def task_key(self, view: str = "main") -> str:
        """Key for latest-request-wins: a new task for the same view replaces the running one."""
        return f"{self.name}:{view}"

    def mark_initial_work_done(self) -> None:
        self.mark_first_results()
        if not self._initial_done:
            self._initial_done = True
            self.initial_work_done.emit()

    def mark_first_results(self) -> None:
        """The first results are on screen (or will not come): said once."""
        if not self._first_shown:
            self._first_shown = True
            self.first_results.emit()

    def _on_state_changed(self, slot: str) -> None:
        if slot in self.needs and self.ready():
            self.refresh()
