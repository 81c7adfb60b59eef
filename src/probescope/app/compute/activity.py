"""What the worker pool is doing, for the Tasks panel (like napari's activity dock): every running task with its
stage, how many items of how many (read from its progress message, e.g. 'unit 17 (18/128)'), its rate and the time
left, estimated from its progress so far. No Qt here: the panel shows `ActivityRow`s."""

from __future__ import annotations

import re
import time
from dataclasses import dataclass

from probescope.jobs.protocol import Progress

_COUNT = re.compile(r"(\d[\d,]*)\s*(?:/|of)\s*(\d[\d,]*)(?:\s+([A-Za-z][A-Za-z-]*))?")


@dataclass(frozen=True)
class ActivityRow:
    key: int  # the task's id
    name: str
    stage: str
    fraction: float | None
    done: str  # "18 of 128 units" when the stage names a count (with its noun when it says one), else ""
    rate: str  # "3.2 units/s" (items, or % when no count)
    left: str  # "1 min 20 s", "" when unknown


def counts(message: str) -> tuple[int, int] | None:
    """(done, total) named in a progress message ('unit 17 (18/128)', 'fc: 24/24 images'), or None."""
    found = _COUNT.findall(message)
    if not found:
        return None
    done, total = (int(v.replace(",", "")) for v in found[-1][:2])
    return (done, total) if total > 0 else None


def noun(message: str) -> str:
    """What the last count in a progress message counts: the word after it ('24/24 images'), else the item it
    follows made plural ('unit 17 (18/128)': units), else ''."""
    found = list(_COUNT.finditer(message))
    if not found:
        return ""
    last = found[-1]
    if last.group(3):
        return last.group(3)
    item = re.search(r"([A-Za-z]+)\s+\d[\d,]*\s*\(\s*$", message[: last.start()])
    if item is None:
        return ""
    return item.group(1) if item.group(1).endswith("s") else item.group(1) + "s"


def duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class Activity:
    """Progress history per task; `rows(tasks)` describes the running ones (name, progress) now."""

    def __init__(self, clock=time.monotonic) -> None:
        self._clock = clock
        self._first: dict[int, tuple[float, float, int | None]] = {}  # id -> (time, fraction, done) first seen

    def row(self, key: int, name: str, progress: Progress | None) -> ActivityRow:
        now = self._clock()
        message = progress.message if progress is not None and progress.message else ""
        fraction = progress.fraction if progress is not None else None
        count = counts(message)
        what = f" {noun(message)}".rstrip()
        first = self._first.setdefault(key, (now, fraction or 0.0, count[0] if count else None))
        elapsed = now - first[0]
        rate = left = ""
        if elapsed > 1.0:
            if count is not None and first[2] is not None and count[0] > first[2]:
                per_s = (count[0] - first[2]) / elapsed
                rate, left = f"{per_s:.3g}{what or ' '}/s", duration((count[1] - count[0]) / per_s)
            elif fraction is not None and fraction > first[1]:
                per_s = (fraction - first[1]) / elapsed
                rate, left = f"{100 * per_s:.2g} %/s", duration((1.0 - fraction) / per_s)
        done = f"{count[0]:,} of {count[1]:,}{what}" if count else ""
        return ActivityRow(key, name, message or name, fraction, done, rate, left)

    def forget(self, key: int) -> None:
        self._first.pop(key, None)
