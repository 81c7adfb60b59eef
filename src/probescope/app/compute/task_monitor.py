"""What the window shows of running work: the status bar's progress of the newest task, and the Tasks panel with
every running task and the recent finished ones, each saying how it ended.

Progress is redrawn at most every PROGRESS_MS, not at every event of every task: hundreds of overlay and thumbnail
tasks starting and ending at once redrew the task table hundreds of times (1.4 s at a stretch).
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from dataclasses import astuple

from PySide6.QtCore import QObject, QTimer

from probescope.app.compute.activity import Activity, ActivityRow
from probescope.app.compute.workers import TaskHandle, WorkerPool
from probescope.jobs.runner import in_group
from probescope.widgets.task_panel import TaskPanel
from probescope.widgets.task_progress import TaskProgress

PROGRESS_MS = 100  # the status bar's progress and the Tasks panel are redrawn at most this often
RECENT_TASKS = 8  # finished tasks the Tasks panel keeps listed
RECENT_AFTER_S = 1.0  # a finished task is listed when it ran this long (not every thumbnail and overlay)


class TaskMonitor(QObject):
    """Follows `pool`'s tasks into `progress` (the status bar's) and `panel` (the Tasks panel); `say` shows a
    status message."""

    def __init__(self, pool: WorkerPool, progress: TaskProgress, panel: TaskPanel, say: Callable[[str, int], None],
                 parent: QObject | None = None):
        super().__init__(parent)
        self.pool, self.progress, self.panel, self._say = pool, progress, panel, say
        self.activity = Activity()
        self._recent: deque[ActivityRow] = deque(maxlen=RECENT_TASKS)  # newest first; stage: how it ended
        self._started_at: dict[int, float] = {}
        self._failures: dict[int, str] = {}
        self._shown: TaskHandle | None = None
        self._tick = QTimer(self)  # rates and times left move on while a task says nothing new
        self._tick.setInterval(1000)
        self._tick.timeout.connect(self.redraw)
        self._due = QTimer(self)
        self._due.setSingleShot(True)
        self._due.setInterval(PROGRESS_MS)
        self._due.timeout.connect(self.redraw)
        progress.cancel_requested.connect(self._cancel_shown)
        panel.cancel_requested.connect(self._cancel)
        pool.started.connect(lambda handle: self._started_at.setdefault(handle.id, time.monotonic()))
        for signal in (pool.started, pool.progress, pool.finished):
            signal.connect(self._changed)

    def failed(self, handle: TaskHandle, message: str) -> None:
        """`handle` failed with `message` (its row in the panel says so once it has ended)."""
        self._failures[handle.id] = message

    def _changed(self, *args) -> None:
        if args and isinstance(args[0], TaskHandle) and args[0].done:
            self._remember(args[0])
            self.activity.forget(args[0].id)
            if not self.pool.active():  # the last one: said at once, so that nothing on screen names a task that
                self._due.stop()  # has ended (a screenshot taken just after showed it with its time left)
                self.redraw()
                return
        if not self._due.isActive():
            self._due.start()

    def _remember(self, handle: TaskHandle) -> None:
        """A finished task that ran long enough to be seen stays in the Tasks panel, saying how it ended."""
        started = self._started_at.pop(handle.id, None)
        failure = self._failures.pop(handle.id, None)
        if started is None or time.monotonic() - started < RECENT_AFTER_S:
            return
        row = self.activity.row(handle.id, handle.name, handle.progress)
        ended = handle.ended_as if handle.cancelled else f"failed: {failure}" if failure is not None else "done"
        fraction = 1.0 if ended == "done" else row.fraction
        self._recent.appendleft(ActivityRow(row.key, row.name, ended, fraction, row.done, "", ""))

    def redraw(self) -> None:
        active = [h for h in self.pool.active() if not h.cancelled]
        rows = [self.activity.row(h.id, h.name, h.progress) for h in active]
        self.panel.show_rows([astuple(r) for r in rows], [astuple(r) for r in self._recent])
        if not active:
            self._shown = None
            self.progress.clear()
            self._tick.stop()
            return
        if not self._tick.isActive():
            self._tick.start()
        shown = self._headline(active)
        handle, row = active[shown], rows[shown]
        self._shown = handle
        left = f" · {row.left} left" if row.left else ""
        self.progress.show_progress(row.stage + left, row.fraction, len(active))

    def _headline(self, active: list[TaskHandle]) -> int:
        """Which running task the status bar names: the workspace on screen's oldest, else the oldest of all (a
        dissection, not the drawing lookup or thumbnail that started after it)."""
        return next((k for k, h in enumerate(active) if in_group(h.key, self.pool.foreground)), 0)

    def _cancel(self, key: int) -> None:
        for handle in self.pool.active():
            if handle.id == key:
                self._cancel_handle(handle)
        self.redraw()

    def _cancel_shown(self) -> None:
        if self._shown is not None:
            self._cancel_handle(self._shown)
            self.redraw()

    def _cancel_handle(self, handle: TaskHandle) -> None:
        handle.cancel()
        self._say(f"Cancelled {handle.name}", 3000)
