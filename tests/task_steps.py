"""Running a jobs task here, without a pool or a kernel: its generator driven to its end."""

from __future__ import annotations

from collections.abc import Iterator

from probescope.jobs.protocol import Partial


def run_task(steps):
    """(its Partials, its Progress, its result) of a task's `steps`; a task that returned a plain value has neither."""
    if not isinstance(steps, Iterator):
        return [], [], steps
    partials, progress = [], []
    try:
        while True:
            item = next(steps)
            (partials if isinstance(item, Partial) else progress).append(item)
    except StopIteration as done:
        return partials, progress, done.value
