"""Running tasks, wherever they run (the window's in-process threads, the compute kernel): stepping a task's
generator to its end, and the compute queue where the workspace on screen goes first.

Both the worker pool and the kernel process use these, so a task behaves the same in either: it is checked for
cancel before each step, its partial results and result are handed to `emit`, and a failure becomes a `TaskError`.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable, Iterator
from typing import Any, Generic, TypeVar

from probescope.core.tasks import Cancelled
from probescope.jobs.kernel.messages import Kind
from probescope.jobs.protocol import Partial, Progress, Task, TaskContext, describe_error

T = TypeVar("T")

Emit = Callable[[str, Any], None]  # (kind, payload): started, partial, result, error, cancelled


def compute_threads() -> int:
    """Threads torch may use inside the compute thread: all cores but one, which stays free for the GUI thread.

    Set once, early (`torch.set_num_threads(compute_threads())`), before the first torch operation.
    """
    return max(1, (os.cpu_count() or 2) - 1)


def run_task(task: Task, ctx: TaskContext, name: str, emit: Emit, step_aside: Callable[[], None] | None = None,
             fatal: tuple[type[BaseException], ...] = ()) -> None:
    """Run `task` to its end, telling `emit` what happened: 'started', then 'partial's, and one of 'result',
    'error' (a TaskError) or 'cancelled'. `step_aside` runs before each step (the foreground's tasks go first);
    exceptions of a `fatal` type are raised, not reported (the kernel dies of an out-of-memory error)."""
    if ctx.cancelled():
        emit(Kind.CANCELLED, None)
        return
    emit(Kind.STARTED, None)
    try:
        produced = task(ctx)
        if not isinstance(produced, Iterator):
            emit(Kind.RESULT, produced)
            return
        while True:
            if step_aside is not None:
                step_aside()
            if ctx.cancelled():
                produced.close()
                emit(Kind.CANCELLED, None)
                return
            try:
                item = next(produced)
            except StopIteration as stop:
                emit(Kind.RESULT, stop.value)
                return
            if isinstance(item, Partial):
                emit(Kind.PARTIAL, item.value)
            elif isinstance(item, Progress):
                ctx.progress(item.fraction, item.message)
    except Cancelled:
        emit(Kind.CANCELLED, None)
    except fatal:
        raise
    except Exception as exc:  # noqa: BLE001  (a task's failure is reported, never kills the thread running it)
        emit(Kind.ERROR, describe_error(name, exc))


def in_group(key: str | None, group: str) -> bool:
    """`key` is `group` or one of its `group:` keys."""
    return bool(group) and key is not None and (key == group or key.startswith(group + ":"))


class ComputeQueue(Generic[T]):
    """The compute thread's queue: `take` gives the first queued item of the `foreground` key group, else the oldest;
    None (put by whoever stops the thread) ends it. `key_of` tells an item's key."""

    def __init__(self, key_of: Callable[[T], str | None]) -> None:
        self._items: deque[T | None] = deque()
        self._ready = threading.Condition()
        self._key_of = key_of
        self.foreground = ""

    def put(self, item: T | None) -> None:
        with self._ready:
            self._items.append(item)
            self._ready.notify()

    def remove(self, item: T) -> bool:
        """Take `item` out before it runs (cancelled while queued); False when it was taken already."""
        with self._ready:
            try:
                self._items.remove(item)
            except ValueError:
                return False
            return True

    def in_foreground(self, item: T) -> bool:
        return in_group(self._key_of(item), self.foreground)

    def take(self, foreground_only: bool = False) -> T | None:
        """The next item, waiting for one; with `foreground_only`, the first of the foreground or None at once."""
        with self._ready:
            while not self._items and not foreground_only:
                self._ready.wait()
            for item in self._items:
                if item is not None and self.in_foreground(item):
                    self._items.remove(item)
                    return item
            return None if foreground_only else self._items.popleft()

    def serve(self, run: Callable[[T], None]) -> None:
        """The compute thread's loop: run each item taken, until None is. An item that has run is let go before the
        next is waited for (held, its task's inputs and results stayed in memory until the next task came)."""
        while (item := self.take()) is not None:
            run(item)
            del item

    def step_aside(self, item: T, run: Callable[[T], None]) -> None:
        """Between two steps of `item`, a compute task outside the foreground: run the foreground's queued ones."""
        if not self.in_foreground(item):
            while (first := self.take(foreground_only=True)) is not None:
                run(first)
