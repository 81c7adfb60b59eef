"""Asking a child interpreter: what needs torch (or timm, OpenCLIP) to answer is asked of a fresh Python, so the
window's process never imports them (hundreds of MB and seconds on a busy machine)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any


class NoAnswer(Exception):
    """The child gave no JSON line (it could not start, failed or ran out of time); the message says why."""


def child_json(code: str, timeout: float) -> Any:
    """What `code`, run by a child interpreter, prints as JSON on its last line of output."""
    try:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.SubprocessError) as exc:
        raise NoAnswer(str(exc)) from None
    try:
        return json.loads(done.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise NoAnswer((done.stderr.strip().splitlines() or ["no output"])[-1]) from None
