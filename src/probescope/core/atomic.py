"""Atomic writes: write to a temporary file in the target folder, then rename over the target.

A crash or a cancelled task never leaves a half-written file where a complete one is expected.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any

import numpy as np

from probescope.core.errors import InputError


@contextlib.contextmanager
def atomic_open(path: str | Path, mode: str = "w", **kwargs: Any) -> Iterator[IO]:
    """Open a temporary file beside `path`; on success it replaces `path`, on error it is removed and `path` is as it
    was. A file system error (disk full, read-only, a file where a folder should be) is an InputError naming `path`."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise InputError(f"cannot write here ({exc.strerror or exc})", path) from None
    try:
        with os.fdopen(fd, mode, **kwargs) as fh:
            yield fh
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp makes 0600 files; give the user's usual permissions
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise InputError(f"could not write ({exc.strerror or exc}); the previous version, if any, is kept",
                             path) from None
        raise


def _read_umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_UMASK = _read_umask()  # read once at import: os.umask is process-wide, so not toggled while threads write


def sync_files(paths: Iterable[Path]) -> None:
    """Make files written without `atomic_open` durable before a marker that says they are complete is written: one
    `os.sync()` where the platform has it (measured 0.15 s after 6,300 small files, against 11 s for a sync per
    file on a shared disk), else a sync of each file."""
    if hasattr(os, "sync"):
        os.sync()
        return
    for path in paths:
        with open(path, "rb+") as fh:
            os.fsync(fh.fileno())


def write_text(path: str | Path, text: str) -> None:
    with atomic_open(path, "w", encoding="utf-8", newline="") as fh:
        fh.write(text)


def write_bytes(path: str | Path, data: bytes) -> None:
    with atomic_open(path, "wb") as fh:
        fh.write(data)


def write_json(path: str | Path, obj: Any, indent: int | None = 1) -> None:
    write_text(path, json.dumps(obj, indent=indent, allow_nan=False) + "\n")


def save_npy(path: str | Path, array: np.ndarray) -> None:
    with atomic_open(path, "wb") as fh:
        np.save(fh, array)
