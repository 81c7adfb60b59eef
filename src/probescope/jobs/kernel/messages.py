"""The messages between the window and its compute kernel: frames of (kind, task id, payload) whose kind is a `Kind`
and whose structured payloads are records (`Submit`, `Ready`), not positional tuples; the other payloads are the
task protocol's own objects (Progress, a partial or final result, TaskError) or a line of text (a fault).

A kernel says it is ready with the protocol version it speaks (`PROTOCOL`); the window refuses a kernel that speaks
another one (a Ray kernel on a cluster with another probescope installed) in one line, instead of failing on the
first message it misreads. Raise `PROTOCOL` whenever a kind, a record or what a payload holds changes.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

PROTOCOL = 1


class Kind(StrEnum):
    """What a message is (str values: a kind compares equal to its name, as the task protocol's events are named)."""

    # the window to the kernel
    SUBMIT = "submit"  # payload: Submit
    CANCEL = "cancel"
    FOREGROUND = "foreground"  # payload: the key group whose compute tasks go first
    STOP = "stop"
    # the kernel to the window
    READY = "ready"  # payload: Ready
    STARTED = "started"
    PROGRESS = "progress"  # payload: Progress
    PARTIAL = "partial"
    RESULT = "result"
    ERROR = "error"  # payload: TaskError
    CANCELLED = "cancelled"
    FAULT = "fault"  # payload: what is about to end the kernel (a line), sent just before it exits
    # the window's own: its reader found the connection gone (payload: what the connection said, or None)
    DIED = "died"


ENDS = (Kind.RESULT, Kind.ERROR, Kind.CANCELLED)  # a task's last message: what was held for it is let go
HELD_FROM = (Kind.PARTIAL,)  # the kinds from which a task's records are sent once


@dataclass(frozen=True)
class Submit:
    """A Job to run: its name (in notices and errors), executor (COMPUTE or IO), key (latest request wins) and the
    trust the window gives the files it opens."""

    job: Any
    name: str
    executor: str
    key: str | None
    trust: Any


@dataclass(frozen=True)
class Ready:
    """A kernel has started: its process id and its machine's compute devices (the window knows them only from
    here), and the protocol it speaks."""

    pid: int
    devices: tuple[str, ...]
    protocol: int = PROTOCOL


def protocol_problem(ready: Ready) -> str | None:
    """Why the window cannot talk to a kernel that said `ready`, or None."""
    if ready.protocol == PROTOCOL:
        return None
    return (f"speaks protocol {ready.protocol} and this window {PROTOCOL}: install the same probescope version where "
            "the kernel runs")
