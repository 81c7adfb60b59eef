"""Python's cycle collector, run only in the GUI thread while a worker pool runs Python threads beside the window.

The automatic collector runs in whichever thread's allocation crosses its threshold. A garbage cycle that holds a Qt
widget (pyqtgraph's context menus and their views hold each other) is then deleted in a worker thread while the GUI
thread walks the widget list (QApplication.topLevelWidgets, setStyle): a native crash, 3 runs in 30 of the window
tests. The test of every menu action alone saw 502 collections in the compute and I/O threads, 52 of them freeing
something. So while a pool runs, automatic collection is off and a timer in the GUI thread does what it would do:
collect the oldest generation whose count has passed its threshold.
"""

from __future__ import annotations

import gc

from PySide6.QtCore import QObject, QTimer

# measured at 50,000 Gallery samples: 259 collections in the whole run, 77 ms in all, the longest 13.9 ms (gen. 0)
CHECK_MS = 100

_holders = 0
_was_enabled = True


def collect_due() -> int | None:
    """Collect the oldest generation whose count has passed its threshold (and every younger one), as the automatic
    collector would at its next allocation; returns that generation, None when none is due. A first threshold of 0
    turns collection off, as it does the automatic collector's."""
    counts, thresholds = gc.get_count(), gc.get_threshold()
    if thresholds[0] == 0:
        return None
    due = [generation for generation in range(3) if counts[generation] > thresholds[generation]]
    if not due:
        return None
    gc.collect(due[-1])
    return due[-1]


class GuiThreadCollector(QObject):
    """Holds automatic collection off from `start` to `stop` (of every holder: the first `start` remembers whether it
    was on, the last `stop` puts it back) and collects on a timer of the thread it was made in, the GUI thread."""

    def __init__(self, parent: QObject | None = None):
        super().__init__(parent)
        self._timer = QTimer(self)
        self._timer.setInterval(CHECK_MS)
        self._timer.timeout.connect(collect_due)
        self._held = False

    def start(self) -> None:
        global _holders, _was_enabled
        if self._held:
            return
        if _holders == 0:
            _was_enabled = gc.isenabled()
            gc.disable()
        _holders += 1
        self._held = True
        self._timer.start()

    def stop(self) -> None:
        global _holders
        if not self._held:
            return
        self._timer.stop()
        self._held = False
        _holders -= 1
        if _holders == 0 and _was_enabled:
            gc.enable()
