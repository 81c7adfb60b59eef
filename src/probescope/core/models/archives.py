"""Telling a model file's kind from its zip directory, without loading it (and without torch): a TorchScript
archive has a `code/` folder, a torch.export program (`.pt2`) an `archive_format` member that says pt2. Only the
directory and a member's first bytes are read, never a whole member (it may inflate to gigabytes). The loaders
(probescope.core.models.checkpoint, .exported) ask here before they load, and name the other kind in their refusal.
"""

from __future__ import annotations

import zipfile
from pathlib import Path

from probescope.core.errors import InputError, first_line
from probescope.core.files import ZIP_ERRORS, zip_directory, zip_member_problem

ZIP_HEAD = 64  # bytes of a member read to tell a file's kind: never the whole member (it may inflate to gigabytes)
_LEGACY_ENTRY = "serialized_exported_program.json"  # the torch.export archive layout of torch 2.1-2.5


def zip_member_head(zf: zipfile.ZipFile, name: str, path: Path, size: int = ZIP_HEAD) -> bytes:
    """The first `size` bytes of a zip member (inflating only those), or InputError naming the file and the
    problem: an encrypted member, an unknown compression method, a damaged compressed stream."""
    try:
        info = zf.getinfo(name)
        problem = zip_member_problem(info)
        if problem is None:
            with zf.open(info) as member:
                return member.read(size)
    except ZIP_ERRORS as exc:
        problem = f"its member {name!r} cannot be read: {first_line(exc)}"
    raise InputError(f"damaged zip archive ({problem})", path)


def is_torchscript(path: Path) -> bool:
    """TorchScript archives are zip files with a `code/` folder (plain torch.save zips have none): only the zip's
    directory is read, never a member."""
    try:
        if not zipfile.is_zipfile(path):
            return False
        with zipfile.ZipFile(path) as zf:
            return any("/code/" in name or name.startswith("code/") for name in zf.namelist())
    except ZIP_ERRORS:
        return False


def is_exported_program(path: Path) -> bool:
    """A torch.export archive: a zip whose `archive_format` member says pt2 (or the older layout's JSON). Only the
    zip's directory and the first bytes of `archive_format` are read; InputError naming the file when that member
    cannot be read (encrypted, an unknown compression method, a damaged compressed stream)."""
    infos = zip_directory(path)
    if infos is None:
        return False
    names = [info.filename for info in infos]
    if any(name.endswith(_LEGACY_ENTRY) for name in names):
        return True
    formats = [name for name in names if name.endswith("archive_format")]
    if not formats:
        return False
    try:
        with zipfile.ZipFile(path) as zf:
            return any(zip_member_head(zf, name, path).strip() == b"pt2" for name in formats)
    except ZIP_ERRORS:  # the file changed since its directory was read
        return False
