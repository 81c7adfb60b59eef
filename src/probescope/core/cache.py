"""Where probescope keeps what it can rebuild: the demo world, activation caches, dissection results."""

from __future__ import annotations

import tempfile
from pathlib import Path

from probescope.core.environment import CACHE, cache_folder
from probescope.core.errors import InputError


def cache_dir(create: bool = True) -> Path:
    """The user cache folder: $PROBESCOPE_CACHE, else the platform's (on Linux $XDG_CACHE_HOME/probescope, else
    ~/.cache/probescope).

    Raises InputError when it cannot be created or written, naming the folder and how to choose another.
    """
    path = cache_folder()
    if create:
        ensure_writable(path)
    return path


def ensure_writable(path: Path) -> Path:
    """Create `path` if needed and prove it is writable (a probe file), or raise InputError."""
    try:
        path.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise InputError(f"cache folder is not writable ({exc.strerror or exc}); set {CACHE} to another folder",
                         path) from None
    return path
