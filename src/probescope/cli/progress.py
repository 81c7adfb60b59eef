"""Progress of a command on stderr: one line rewritten in place.

Commands report progress(fraction, message) through `stderr_progress`; whatever they print next starts a line of its
own after `end_progress_line`.
"""

from __future__ import annotations

import sys

from probescope.core.tasks import ProgressCallback

_progress_line = [False]  # a progress line is on stderr, not yet ended


def stderr_progress(prefix: str = "") -> ProgressCallback:
    """A progress(fraction, message) for commands: rewrites one stderr line, only when the shown text changes."""
    shown = [""]
    lead = f"{prefix} " if prefix else ""

    def progress(fraction: float, message: str) -> None:
        text = f"\r{lead}{fraction:6.1%} {message:<40}"
        if text != shown[0]:
            shown[0] = text
            _progress_line[0] = True
            print(text, end="", file=sys.stderr, flush=True)

    return progress


def end_progress_line() -> None:
    """End the progress line, if one is open, so what is printed next starts a line of its own."""
    if _progress_line[0]:
        _progress_line[0] = False
        print(file=sys.stderr, flush=True)
