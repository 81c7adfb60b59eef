"""A model's class names from a text file: torch-free, so that the job modules the window's process imports read
them with an import at their top."""

from __future__ import annotations

import re
from pathlib import Path

from probescope.core.errors import InputError
from probescope.core.files import check_file

MAX_BYTES = 64 << 20  # ImageNet-21k's 21,843 names are about 500 KB; a larger file is not a list of names


def read_class_names(path: str | Path) -> list[str]:
    """One class per line; 'name index' lines (Places365's categories file) keep the name, '/a/abbey' -> 'abbey'."""
    path = check_file(path)
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise InputError(f"class names file is {size:,} bytes: not a list of names (at most {MAX_BYTES >> 20} MiB "
                         "is read)", path)
    try:
        lines = [line.strip() for line in path.read_text(encoding="utf-8").splitlines()]
    except UnicodeDecodeError:
        raise InputError("class names file is not UTF-8 text", path) from None
    names = []
    for line in filter(None, lines):
        parts = line.split()
        name = parts[0] if len(parts) == 2 and parts[1].isdigit() else line
        names.append(re.sub(r"^/[a-z]/", "", name))
    if not names:
        raise InputError("class names file is empty", path)
    return names
