"""Advisory locks that a running process holds on an open file (filelock's native flock / LockFileEx): the operating
system drops them when the process ends, however it ends (SIGKILL included), so a lock left behind by a killed run
never blocks the next one.

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

import filelock

from probescope.core.errors import InputError

LOCK_FILE = ".probescope.lock"
_LOOKS = 3  # attempts at a folder's lock before it counts as held (see folder_lock)

if sys.platform == "win32":
    import msvcrt

    # Not filelock.lock_descriptor: it locks byte 0, and a Windows byte-range lock also stops the holder's own other
    # handles (the memory map that fills the file) from writing there; a byte far past the data blocks nothing.
    _WINDOWS_LOCK_OFFSET = 2**40

    def try_lock(fd: int) -> bool:
        """Take the exclusive lock of the open file `fd` without waiting; False when another process holds it."""
        os.lseek(fd, _WINDOWS_LOCK_OFFSET, os.SEEK_SET)
        try:
            msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
else:
    def try_lock(fd: int) -> bool:
        """Take the exclusive lock of the open file `fd` without waiting; False when another process holds it, or
        when the file system cannot lock (filelock raises there: a cleaner then leaves the file alone)."""
        try:
            return filelock.lock_descriptor(fd, blocking=False)
        except OSError:
            return False


@contextlib.contextmanager
def folder_lock(folder: Path, holder: str) -> Iterator[None]:
    """Hold `folder`'s lock while the block runs (the folder is created if needed). A second holder is refused with
    an InputError naming the one that has it (`holder` text, process id, host, start time). The lock file is
    removed when the block ends, while still locked; a run that opened it just before finds, once it holds the lock,
    that the file is gone (filelock checks the link count) and opens the new one."""
    path = folder / LOCK_FILE
    if folder.exists() and not folder.is_dir():
        raise InputError("is a file, not a folder", folder)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot use the output folder ({exc.strerror or exc})", folder) from None
    unwritten: list[OSError] = []

    def write_holder(fd: int) -> None:  # filelock's on_acquired: the locked descriptor, before acquire returns
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        try:
            os.ftruncate(fd, 0)
            os.lseek(fd, 0, os.SEEK_SET)
            os.write(fd, f"{holder} (process {os.getpid()} on {socket.gethostname()}, since {stamp})\n".encode())
        except OSError as exc:  # a full disk (ENOSPC) or quota: reported below, while the lock still holds the file
            unwritten.append(exc)

    # No soft (marker file) fallback: on_acquired rules it out, and without flock the holder could not be told.
    lock = filelock.FileLock(path, blocking=False, thread_local=False, on_acquired=write_holder)
    for _ in range(_LOOKS):
        try:
            lock.acquire()
            break
        except filelock.Timeout:  # (a TimeoutError, so an OSError: caught first) held, or see below
            continue
        except OSError as exc:
            raise InputError(f"cannot use the output folder ({exc.strerror or exc})", folder) from None
    else:
        # filelock also gives up at once when the file it locked had just been removed by its finishing holder;
        # another look then opens the new file, while a live holder refuses every look.
        raise InputError(f"in use by {_holder(path)}: wait until it finishes, or choose another output folder", folder)
    try:
        if unwritten:
            exc = unwritten[0]
            raise InputError(f"cannot write in the output folder ({exc.strerror or exc})", folder) from None
        yield
    finally:
        with contextlib.suppress(OSError):  # (Windows cannot remove an open file: filelock does after its release)
            path.unlink()
        lock.release()


def _holder(path: Path) -> str:
    """The holder's text in the lock file. Windows locks its byte 0 (filelock's LockFileEx), so other processes
    cannot read it there: "another process" then, as when the holder has not written it yet."""
    try:
        return path.read_text(encoding="utf-8", errors="replace").strip() or "another process"
    except OSError:
        return "another process"
