"""Helpers for tests that drive the main window: make one, open the small world in it, wait for the workspaces."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator

from PySide6.QtWidgets import QApplication, QWidget

from probescope.app.window.main_window import MainWindow
from probescope.app.window.saved_settings import Settings
from probescope.core.demo.sampler import DemoSampler
from probescope.jobs.inputs import Loaded, OpenRequest, hold_model

WAIT_MS = 60_000


@contextlib.contextmanager
def held_after(monkeypatch, k: int) -> Iterator[Callable[[], None]]:
    """The demo sampler's image `k` and later wait until the caller releases them, or leaves, or WAIT_MS passes
    (so that a failing test ends)."""
    gate, sample = threading.Event(), DemoSampler.sample

    def held(self, i: int):
        if i >= k:
            gate.wait(WAIT_MS / 1000)
        return sample(self, i)

    monkeypatch.setattr(DemoSampler, "sample", held)
    try:
        yield gate.set
    finally:
        gate.set()


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


TURNS = 8  # event-loop turns between two looks at the geometry: a resize's chain of posted relayouts is shorter


def turns() -> None:
    """A few turns of the event loop (what a worker thread has finished is posted meanwhile)."""
    for _ in range(TURNS):
        QApplication.processEvents()
        time.sleep(0.001)


def settle(window=None) -> None:
    """The work a panel starts when shown (a trial sheet's images) done, and the layouts still: every visible
    widget's geometry the same across a round of event-loop turns with nothing computing (a resize travels up and
    down nested layouts over several turns; a result that comes in lays its panel out again). Without a window:
    a round of turns."""
    if window is None:
        turns()
        return
    deadline = time.monotonic() + WAIT_MS / 1000
    last, looks = None, 0
    while time.monotonic() < deadline and looks < 250:  # (still moving after that: the checks say what is wrong)
        turns()
        if window.pool.active():
            last = None
            continue
        now = [w.geometry().getRect() for w in window.findChildren(QWidget) if w.isVisible()]
        if now == last:
            return
        last, looks = now, looks + 1
