"""The one exception type for bad input: its message names the file (or value) and the problem in one line."""

from __future__ import annotations

from pathlib import Path


class InputError(Exception):
    """A file or value the user gave is missing, malformed or inconsistent.

    Front ends show the message as it is (one line, no traceback); nothing the user had is lost.
    """

    def __init__(self, message: str, path: str | Path | None = None):
        self.path = Path(path) if path is not None else None
        super().__init__(f"{path}: {message}" if path is not None else message)

    def __reduce__(self):
        """Travels between processes (the compute kernel) as it is, its path and a subclass's fields with it; not
        made again from its formatted message."""
        return _restore, (type(self), self.args, self.__dict__)


def _restore(cls: type[InputError], args: tuple, state: dict) -> InputError:
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


class Note(UserWarning):
    """Something probescope noticed and worked around (e.g. a damaged cache it rebuilds): front ends show it as one
    line, and the work goes on."""


def first_line(exc: BaseException) -> str:
    """An exception as a message quotes it: its type and the first line of its text, cut at 160 characters (a
    library's own message may span a page)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:160]}" if text else type(exc).__name__
