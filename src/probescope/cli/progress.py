# Not tqdm (4.70): off a terminal it still writes each update as '\r'+bar: measured, a 500-step stage to a pipe was
# 14 updates on one line. Not rich (15.0, a test tool's): off a terminal it wrote 0 bytes until the end, then all.
"""Progress of a command on stderr: one live line on a terminal, a few whole lines anywhere else.

Commands report progress(fraction, message) through `stderr_progress`; whatever they print next starts a line of its
own after `end_progress_line`. On a terminal the line is rewritten in place. A log file, a pipe or a cluster job's
output gets whole lines instead (a carriage-return line is thousands of updates in one line there): one when a new
stage begins (a message that differs in more than its numbers), one every LOG_INTERVAL_S within a stage, and the
stage's end.
"""

from __future__ import annotations

import re
import sys
import time
from typing import TextIO

from probescope.core.tasks import ProgressCallback

LOG_INTERVAL_S = 10.0  # between two lines of one stage when stderr is not a terminal
_NUMBERS = re.compile(r"\d+(?:[.,]\d+)*")
_open_line: list[TextIO | None] = [None]  # the stream whose live progress line is not yet ended


def stderr_progress(prefix: str = "", stream: TextIO | None = None) -> ProgressCallback:
    """A progress(fraction, message) for commands, on `stream` (default sys.stderr), live or logged as it suits."""
    lead = f"{prefix} " if prefix else ""
    out = sys.stderr if stream is None else stream
    return _live(lead, out) if _is_terminal(out) else _logged(lead, out)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or file-less stream
        return False


def _live(lead: str, out: TextIO) -> ProgressCallback:
    shown = [""]

    def progress(fraction: float, message: str) -> None:
        text = f"\r{lead}{fraction:6.1%} {message:<40}"
        if text != shown[0]:  # only when the shown text changes
            shown[0] = text
            _open_line[0] = out
            print(text, end="", file=out, flush=True)

    return progress


def _logged(lead: str, out: TextIO) -> ProgressCallback:
    last = {"stage": None, "at": 0.0, "done": False}

    def progress(fraction: float, message: str) -> None:
        stage, now = _NUMBERS.sub("#", message), time.monotonic()
        finished = fraction >= 1.0 and not last["done"]  # (a new stage prints anyway)
        if stage != last["stage"] or finished or now - last["at"] >= LOG_INTERVAL_S:
            last.update(stage=stage, at=now, done=fraction >= 1.0)
            print(f"{lead}{fraction:6.1%} {message}", file=out, flush=True)

    return progress


def end_progress_line() -> None:
    """End the live progress line, if one is open, so what is printed next starts a line of its own."""
    out, _open_line[0] = _open_line[0], None
    if out is not None:
        print(file=out, flush=True)
