"""The task protocol of every workflow: how a job reports progress and partial results, is cancelled and fails.

A task is a callable taking a `TaskContext` and returning a generator: it yields `Progress` and `Partial` items
and `return`s its result (or returns a plain value). The context carries the cancel flag, a throttled progress
reporter (both with the signatures of core's callbacks, `probescope.core.tasks`, so a task hands them to a long core
function that runs between yields), the user's trust decisions and the `Session` of what its process has loaded.
A failed task becomes a `TaskError`.

A `Job` is a task that can run in another process (the window's compute kernel, a Ray actor): a module-level jobs
function and its keyword arguments, all picklable (requests, paths, settings, results), so it travels by name.
"""

from __future__ import annotations

import threading
import time
import traceback
import weakref
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from probescope.core.errors import InputError
from probescope.core.tasks import Cancelled
from probescope.core.trust import NO_TRUST, Trust, UntrustedFile
from probescope.jobs.session import Session

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


_FROZEN: weakref.WeakValueDictionary[int, Any] = weakref.WeakValueDictionary()


def frozen(array: Any) -> Any:
    """Mark a NumPy array that a task's partial results share as never changed again (it is made read-only): the
    compute kernel then sends it once per task, and later messages refer to it (jobs.kernel.transport). A layer's
    peak activations are 45 MB at 22,210 images, in every partial result."""
    array.setflags(write=False)
    _FROZEN[id(array)] = array
    return array


def is_frozen(obj: Any) -> bool:
    return _FROZEN.get(id(obj)) is obj


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

    def __init__(self, emit: Callable[[Progress], None] | None = None, trust: Trust = NO_TRUST,
                 session: Session | None = None) -> None:
        self._event = threading.Event()
        self._emit = emit
        self._last_emit = 0.0
        self.trust = trust
        self._session = session

    @property
    def session(self) -> Session:
        """What this process has loaded (models, datasets, layers), shared by the tasks it runs; a task run on its
        own gets a session of its own."""
        if self._session is None:
            self._session = Session()
        return self._session

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


@dataclass(frozen=True)
class Job:
    """A call of `function(ctx, **kwargs)` that may run in another process. `function` is a module-level function of
    the jobs layer (it pickles by its name) and `kwargs` hold plain, picklable values. `compute`: it needs torch or
    a model (it runs where they are: the compute kernel); otherwise it only reads files and arrays, and may run in
    any process that can read them."""

    function: Callable[..., Any]
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    compute: bool = True

    def __call__(self, ctx: TaskContext) -> Any:
        return self.function(ctx, **self.kwargs)

    @property
    def name(self) -> str:
        return f"{self.function.__module__}.{self.function.__qualname__}"


def describe_error(name: str, exc: BaseException) -> TaskError:
    """InputError messages are shown as they are; anything else is a bug: short message plus the traceback."""
    if isinstance(exc, InputError):
        return TaskError(str(exc), str(exc), True, exc if isinstance(exc, UntrustedFile) else None)
    details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    message = f"{name} failed: {type(exc).__name__}" + (f": {first}" if first else "")
    return TaskError(message, details, False)
