"""Advisory locks that a running process holds on an open file: the operating system drops them when the process
ends, however it ends (SIGKILL included), so a lock left behind by a killed run never blocks the next one.

Two uses: an output folder that one run writes at a time (`folder_lock`), and temporary files a writer is still
filling (`try_lock` tells a cleaner whether anybody holds one).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from probescope.core.errors import InputError

LOCK_FILE = ".probescope.lock"
_WINDOWS_LOCK_OFFSET = 2**40  # msvcrt locks byte ranges: one far past the data never blocks the holder's writes

if sys.platform == "win32":
    import msvcrt

    def try_lock(fd: int) -> bool:
        """Take the exclusive lock of the open file `fd` without waiting; False when another process holds it."""
        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
else:
    import fcntl

    def try_lock(fd: int) -> bool:
        """Take the exclusive lock of the open file `fd` without waiting; False when another process holds it."""
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return False
        return True


@contextlib.contextmanager
def folder_lock(folder: Path, holder: str) -> Iterator[None]:
    """Hold `folder`'s lock while the block runs (the folder is created if needed). A second holder is refused with
    an InputError naming the one that has it (`holder` text, process id, host, start time). The lock file is
    removed when the block ends, while still locked; a run that opened it just before checks, once it holds the
    lock, that the file is still the one at the path, and opens the new one otherwise."""
    path = folder / LOCK_FILE
    if folder.exists() and not folder.is_dir():
        raise InputError("is a file, not a folder", folder)
    fd = _locked_file(folder, path)
    try:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, f"{holder} (process {os.getpid()} on {socket.gethostname()}, since {stamp})\n".encode())
        except OSError as exc:  # a full disk (ENOSPC) or quota: nothing can be written there
            raise InputError(f"cannot write in the output folder ({exc.strerror or exc})", folder) from None
        yield
    finally:
        with contextlib.suppress(OSError):  # (Windows cannot remove an open file: it stays, which is harmless)
            path.unlink()
        os.close(fd)  # releases the lock


def _locked_file(folder: Path, path: Path) -> int:
    """The open, locked lock file at `path` (InputError naming the holder when another process has it)."""
    while True:
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except OSError as exc:
            raise InputError(f"cannot use the output folder ({exc.strerror or exc})", folder) from None
        if not try_lock(fd):
            os.close(fd)
            raise InputError(f"in use by {_holder(path)}: wait until it finishes, or choose another output folder",
                             folder)
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(path))
        except OSError:  # removed by the holder that just finished
            same = False
        if same:
            return fd
        os.close(fd)


def _holder(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip() or "another process"
    except OSError:
        return "another process"
