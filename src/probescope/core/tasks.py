"""Callback types shared by long-running core tasks, so the GUI, the CLI and workers drive them the same way."""

from __future__ import annotations

from collections.abc import Callable

ProgressCallback = Callable[[float, str], None]
"""progress(fraction in [0, 1], message): called from the worker thread; must be cheap and never raise."""

CancelCheck = Callable[[], bool]
"""cancel() -> True asks the task to stop at its next safe point (between batches)."""


class Cancelled(Exception):
    """A task stopped because its cancel callback returned True; it left no partial results behind."""


def check_cancel(cancel: CancelCheck | None) -> None:
    """Raise Cancelled when the caller asked to stop."""
    if cancel is not None and cancel():
        raise Cancelled("cancelled")


def report(progress: ProgressCallback | None, fraction: float, message: str) -> None:
    """Call progress if one was given (fraction clipped to [0, 1])."""
    if progress is not None:
        progress(min(1.0, max(0.0, fraction)), message)
