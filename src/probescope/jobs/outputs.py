"""Outputs that are inputs: a command refuses to write where it reads.

An output option given one of the command's input files would replace that input (`score --images DIR
--per-image DIR/p03.png` once overwrote a sample image with the CSV); one given a path inside an input folder would
be read as an input the next time. `check_outputs` refuses both, in one line naming the option and the file, before
anything is loaded or written.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from probescope.core.errors import InputError

Named = tuple[str, "str | os.PathLike[str] | None"]  # (option, its value)


def _resolved(path: Path) -> Path:
    try:
        return path.expanduser().resolve()
    except (OSError, RuntimeError):  # a symbolic link loop, an unreadable parent: compared as written
        return Path(os.path.abspath(path.expanduser()))


def _same(a: Path, b: Path) -> bool:
    """`a` and `b` are one file: the same resolved path, or the same inode (a hard link, another mount)."""
    if _resolved(a) == _resolved(b):
        return True
    try:
        return os.path.samefile(a, b)
    except (OSError, ValueError):  # one of them does not exist (yet): not the same file
        return False


def spec_paths(value: str | os.PathLike[str] | None) -> list[Path]:
    """The existing files or folders an input option's value names: the value itself, or for a spec such as
    'inception-tf:weights.pth' or 'torchscript:model.pt' the part after any of its colons."""
    if value is None or value == "":
        return []
    text = os.fspath(value)
    candidates = [text] + [text[i + 1:] for i, c in enumerate(text) if c == ":"]
    found = []
    for candidate in candidates:
        if candidate and os.path.exists(os.path.expanduser(candidate)):
            found.append(Path(candidate))
    return found


def check_outputs(outputs: Iterable[Named], inputs: Iterable[Named]) -> None:
    """Refuse (InputError, one line) an output path that is one of the input files or folders, or lies inside an
    input folder. `outputs` and `inputs` are (option, value) pairs; values that are None are skipped, an input's
    value may be a spec naming a file after a colon (see `spec_paths`), and inputs that name no existing path
    ('demo') are skipped."""
    named_inputs = [(option, path) for option, value in inputs for path in spec_paths(value)]
    for out_option, out_value in outputs:
        if out_value is None or os.fspath(out_value) == "":
            continue
        out = Path(out_value)
        resolved = _resolved(out)
        for in_option, path in named_inputs:
            if _same(out, path):
                kind = "folder" if path.is_dir() else "file"
                raise InputError(f"this is the {in_option} input {kind} {path}: writing {out_option} there would "
                                 "replace it (choose another path)", f"{out_option} {out}")
            if path.is_dir() and resolved.is_relative_to(_resolved(path)):
                raise InputError(f"inside the {in_option} input folder {path}, where it would be read as an input "
                                 f"(choose a path outside it)", f"{out_option} {out}")
