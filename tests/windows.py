"""Helpers for tests that drive the main window: make one, open the small world in it, wait for the workspaces."""

from __future__ import annotations

from probescope.app.window.main_window import MainWindow
from probescope.app.window.saved_settings import Settings
from probescope.jobs.inputs import Loaded, OpenRequest, hold_model

WAIT_MS = 60_000


def on_screen(widget) -> bool:
    """Shown and not wholly covered or scrolled out of sight."""
    return widget.isVisible() and not widget.visibleRegion().isEmpty()


def widget_path(widget, depth: int = 5) -> str:
    """'Type#name < its parent < ...', `depth` widgets up: how a test names the widget it found wanting."""
    names = []
    while widget is not None and len(names) < depth:
        names.append(type(widget).__name__ + (f"#{widget.objectName()}" if widget.objectName() else ""))
        widget = widget.parentWidget()
    return " < ".join(names)


def make_window(qtbot, settings_path, kernel: str = "thread") -> MainWindow:
    window = MainWindow(Settings(settings_path), device="cpu", kernel=kernel)
    qtbot.addWidget(window)
    window.show()
    return window


def loaded_model(pool, model, spec: str = "demo") -> Loaded:
    """`model` (a LoadedModel made by the test) as the window holds an opened one: in the pool's session, the state
    holding its ModelInfo."""
    return Loaded("model", spec, model.name, hold_model(pool.session, OpenRequest("model", spec), "cpu", model))


def world_requests(world) -> list[OpenRequest]:
    return [
        OpenRequest("model", world["model"]),
        OpenRequest("dataset", str(world["dataset"])),
        OpenRequest("samples", str(world["samples"])),
        OpenRequest("judgments", str(world["judgments"]), str(world["catalog"]), str(world["image_root"])),
    ]


def open_all(qtbot, window, requests, workspaces=("dissection", "gallery", "similarity")) -> None:
    for request in requests:
        with qtbot.waitSignal(window.opened, timeout=WAIT_MS):
            window.open(request)
    qtbot.waitUntil(lambda: all(window.workspaces[name].is_initial_work_done for name in workspaces) and
                    not window.pool.active(), timeout=WAIT_MS)
