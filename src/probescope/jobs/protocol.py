"""The task protocol shared by the worker pool and the worker-side modules of every workspace; no Qt here.

A task is a callable taking a `TaskContext` and returning a generator: it yields `Progress` and `Partial` items
and `return`s its result (or returns a plain value). The context carries the cancel flag, set from the GUI thread,
and a throttled progress reporter; both have the signatures of core's callbacks (`probescope.core.tasks`), so a
task hands them to a long core function that runs between yields. A failed task becomes a `TaskError`.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from probescope.core.errors import InputError
from probescope.core.tasks import Cancelled
from probescope.core.trust import NO_TRUST, Trust, UntrustedFile

COMPUTE = "compute"  # the one thread that owns the model and the GPU (torch work is serialised there)
IO = "io"  # the small pool that reads and decodes files and builds images

_PROGRESS_INTERVAL_S = 0.05  # progress reaches the GUI at most this often per task


@dataclass(frozen=True)
class Progress:
    """How far a task has come: `fraction` in [0, 1], or None when the total is unknown."""

    fraction: float | None
    message: str = ""


@dataclass(frozen=True)
class Partial:
    """A result a view may show before the task is finished (e.g. the first thumbnails)."""

    value: Any


@dataclass(frozen=True)
class TaskError:
    """A failed task, ready to show: `message` is one line, `details` the full text (traceback for bugs).
    `untrusted` is the refused file when the task stopped at a file that runs code (the window asks about it)."""

    message: str
    details: str
    input_error: bool
    untrusted: UntrustedFile | None = None


class TaskContext:
    """What a running task gets: a cancel flag (set from the GUI thread), a progress reporter and the user's trust
    decisions when it was submitted (`trust`: which files may run code when loaded).

    `cancelled` and `progress` have the signatures of core's `CancelCheck` and `Progress` callbacks
    (`probescope.core.tasks`), so a task can hand them to a core function that runs for long between yields.
    """

    def __init__(self, emit: Callable[[Progress], None] | None = None, trust: Trust = NO_TRUST) -> None:
        self._event = threading.Event()
        self._emit = emit
        self._last_emit = 0.0
        self.trust = trust

    def cancel(self) -> None:
        self._event.set()

    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        """Stop here (raise `Cancelled`) when the task was cancelled."""
        if self._event.is_set():
            raise Cancelled("cancelled")

    def progress(self, fraction: float | None, message: str = "") -> None:
        """Report progress; reports closer together than 50 ms are dropped (the last step always gets through)."""
        now = time.monotonic()
        if self._emit is not None and (now - self._last_emit >= _PROGRESS_INTERVAL_S or fraction == 1.0):
            self._last_emit = now
            self._emit(Progress(fraction, message))


Task = Callable[[TaskContext], Any]


def describe_error(name: str, exc: BaseException) -> TaskError:
    """InputError messages are shown as they are; anything else is a bug: short message plus the traceback."""
    if isinstance(exc, InputError):
        return TaskError(str(exc), str(exc), True, exc if isinstance(exc, UntrustedFile) else None)
    details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    message = f"{name} failed: {type(exc).__name__}" + (f": {first}" if first else "")
    return TaskError(message, details, False)
