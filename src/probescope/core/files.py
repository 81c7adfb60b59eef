"""Whether a path the user named can be read as a file, and if not, the one line that says why.

Folders of images come with symbolic links (datasets assembled by linking), and a link can fail in several ways
that Python reports each differently: a loop (`self.png -> self.png`, ELOOP), a dangling target (ENOENT), a target
behind a folder the user may not enter (EACCES), a FIFO or device that would block the reader forever. Every
reader that lists a folder or opens a named file asks here first, so each failure gets the same answer (the
guide's "a broken link or a FIFO is an error") naming the entry, never an OSError traceback or a hang.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
import zipfile
import zlib
from collections.abc import Callable
from pathlib import Path

from probescope.core.errors import InputError

LOOP = "broken symbolic link (a loop: it leads back to itself)"
DANGLING = "broken symbolic link (its target does not exist)"
UNREADABLE = "cannot be read (permission denied)"
NOT_FOUND = "not found"
SPECIAL = "not a regular file (a FIFO, socket or device: reading it would hang or never end)"


def _is_link(path: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(path).st_mode)
    except OSError:
        return False


def _through(path: str) -> str:
    """' (through LINK)' when a folder above `path` is the broken link, so the message names where to look."""
    parent = os.path.dirname(path)
    while parent and parent != os.path.dirname(parent):
        try:
            os.stat(parent)
            return ""
        except OSError:
            if _is_link(parent):
                return f" (through {parent})"
        parent = os.path.dirname(parent)
    return ""


def stat_problem(exc: OSError, path: str | Path) -> str:
    """The one-line reason an os.stat/open of `path` failed with `exc`."""
    path = os.fspath(path)
    if exc.errno == errno.ELOOP:
        return LOOP + _through(path)
    if exc.errno == errno.ENOENT:
        return DANGLING if _is_link(path) else NOT_FOUND + _through(path)
    if exc.errno in (errno.EACCES, errno.EPERM):
        return UNREADABLE
    if exc.errno == errno.ENOTDIR:
        return "not found (a part of the path is a file, not a folder)"
    return f"cannot be read ({exc.strerror or exc})"


def file_problem(path: str | Path, mode: int | None = None) -> str | None:
    """Why `path` (links followed) is not a regular file this process can read, or None when it is. `mode` is its
    st_mode when the caller already has it."""
    if mode is None:
        try:
            mode = os.stat(path).st_mode
        except OSError as exc:
            return stat_problem(exc, path)
    if stat.S_ISDIR(mode):
        return "is a folder, not a file"
    if not stat.S_ISREG(mode):
        return SPECIAL
    if not os.access(path, os.R_OK):
        return UNREADABLE
    return None


def check_file(path: str | Path) -> Path:
    """A file the user named (`~` expanded) when it can be read; InputError naming it and the problem otherwise."""
    return readable_file(Path(path).expanduser(), "no such file")


def readable_file(path: str | Path, missing: str = "file not found") -> Path:
    """`path` when it is a regular file that can be read; InputError naming it and the problem otherwise (`missing`
    when nothing is there at all and no link is to blame)."""
    problem = file_problem(path)
    if problem == NOT_FOUND:
        problem = missing
    if problem is not None:
        raise InputError(problem, path)
    return Path(path)


def folder_problem(path: str | Path) -> str | None:
    """Why `path` (links followed) is not a folder whose entries can be listed, or None."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return stat_problem(exc, path)
    if not stat.S_ISDIR(mode):
        return "not a folder"
    if not os.access(path, os.R_OK | os.X_OK):
        return "cannot be listed (permission denied)"
    return None


def folder_entries(root: str | Path) -> list[os.DirEntry]:
    """The entries directly inside `root`, in no particular order; InputError naming `root` when it cannot be
    listed."""
    problem = folder_problem(root)
    if problem is not None:
        raise InputError(problem, root)
    try:
        with os.scandir(root) as entries:
            return list(entries)
    except OSError as exc:
        raise InputError(stat_problem(exc, root), root) from None


def entry_mode(entry: os.DirEntry) -> int:
    """The st_mode of what a folder entry leads to (links followed); InputError naming the entry when a link cannot
    be resolved or the entry cannot be reached."""
    try:
        return entry.stat().st_mode
    except OSError as exc:
        raise InputError(stat_problem(exc, entry.path), entry.path) from None


def walk_files(root: str | Path, wanted: Callable[[str], bool]) -> list[Path]:
    """The files below `root` whose name is `wanted` (links to files followed, links to folders not entered: no
    cycles), each checked readable; InputError naming the first wanted entry that is not."""
    found: list[Path] = []
    pending = [Path(root)]
    while pending:
        folder = pending.pop()
        for entry in sorted(folder_entries(folder), key=lambda e: e.name):
            if entry.is_dir(follow_symlinks=False):
                pending.append(Path(entry.path))
                continue
            if not wanted(entry.name):
                continue
            mode = entry_mode(entry)
            if stat.S_ISDIR(mode):
                continue  # a link to a folder
            problem = file_problem(entry.path, mode)
            if problem is not None:
                raise InputError(problem, entry.path)
            found.append(Path(entry.path))
    return found


READABLE_ZIP_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED, zipfile.ZIP_BZIP2, zipfile.ZIP_LZMA)


def zip_member_problem(info: zipfile.ZipInfo, max_inflated: int | None = None) -> str | None:
    """Why a zip member cannot be read safely, told from the archive's directory without inflating anything: it is
    encrypted, it uses a compression method Python cannot read, or (with `max_inflated`) it is compressed and
    declares more bytes than that (a bomb)."""
    if info.flag_bits & 0x1:
        return f"its member {info.filename!r} is encrypted"
    if info.compress_type not in READABLE_ZIP_METHODS:
        return f"its member {info.filename!r} uses an unknown compression method ({info.compress_type})"
    if max_inflated is not None and info.compress_type != zipfile.ZIP_STORED and info.file_size > max_inflated:
        return f"its member {info.filename!r} inflates to {info.file_size} bytes from {info.compress_size}"
    return None


# what a zip archive's directory can raise on a crafted file besides BadZipFile, and what opening or reading a
# member raises: encrypted (RuntimeError), an unknown compression method (NotImplementedError), a damaged deflate
# stream (zlib.error), a truncated one (EOFError)
ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError, KeyError, RuntimeError,
              NotImplementedError, zlib.error, struct.error)
MAX_NPZ_INFLATED = 16 << 30  # bytes a compressed .npz member may declare (50,000 128x128 samples: 2.4 GB)
# what np.load of a damaged .npy or .npz raises, at load or at a member's read: a damaged deflate stream
# (zlib.error), an encrypted member (RuntimeError), an unknown compression method (NotImplementedError), a truncated
# one (EOFError), a missing member (KeyError)
NUMPY_FILE_ERRORS = (ValueError, OSError, EOFError, KeyError, RuntimeError, NotImplementedError, zlib.error,
                     zipfile.BadZipFile)


def zip_problem(path: str | Path, max_inflated: int | None = None) -> str | None:
    """Why the members of a zip archive (a .npz, a torch archive) cannot be read safely, told from its directory
    alone (nothing is inflated): an encrypted member, an unknown compression method, a compressed member declared to
    inflate past `max_inflated` (default MAX_NPZ_INFLATED); None for a file that is no zip (a .npy, a pickle) or
    whose members are fine (a damaged stream or directory is the reader's to find and say)."""
    limit = MAX_NPZ_INFLATED if max_inflated is None else max_inflated
    infos = zip_directory(path)
    return next(filter(None, (zip_member_problem(info, limit) for info in infos or ())), None)


def zip_directory(path: str | Path) -> list[zipfile.ZipInfo] | None:
    """A zip archive's members as its directory lists them (nothing is inflated); None for a file that is no zip
    or whose directory cannot be read."""
    try:
        if not zipfile.is_zipfile(path):
            return None
        with zipfile.ZipFile(path) as archive:
            return archive.infolist()
    except ZIP_ERRORS:
        return None
