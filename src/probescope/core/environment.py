"""Everything probescope reads from the environment, in one place: the variables' names and meanings, and the
platform's own folders for the cache and the settings (platformdirs: XDG on Linux, ~/Library on macOS, %LOCALAPPDATA%
on Windows), which the variables override.

- PROBESCOPE_CACHE: the cache folder (default: the platform's user cache folder, e.g. ~/.cache/probescope).
- PROBESCOPE_MAX_PIXELS: the largest image decoded, in pixels (core/data/images.py says why).
- PROBESCOPE_NO_SPLASH: set to anything, the window starts without its splash.
- QT_QPA_PLATFORM: "offscreen" (tests, --screenshot) also means no splash.
- OPENBLAS_NUM_THREADS: the user's own choice wins over the GUI process's default (app/window/launch.py).
"""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP = "probescope"
CACHE = "PROBESCOPE_CACHE"
MAX_PIXELS = "PROBESCOPE_MAX_PIXELS"
NO_SPLASH = "PROBESCOPE_NO_SPLASH"
QT_PLATFORM = "QT_QPA_PLATFORM"
BLAS_THREADS = "OPENBLAS_NUM_THREADS"


def cache_folder() -> Path:
    """$PROBESCOPE_CACHE, else the platform's user cache folder for probescope."""
    chosen = os.environ.get(CACHE)
    return Path(chosen) if chosen else platformdirs.user_cache_path(APP, appauthor=False)


def settings_file() -> Path:
    """The window's saved settings: probescope.ini in the platform's user config folder."""
    return platformdirs.user_config_path(APP, appauthor=False) / f"{APP}.ini"


def max_pixels_text() -> str:
    """PROBESCOPE_MAX_PIXELS as written ('' when unset); images.py reads it as a number."""
    return os.environ.get(MAX_PIXELS, "").strip()


def offscreen() -> bool:
    return os.environ.get(QT_PLATFORM, "") == "offscreen"


def splash_wanted() -> bool:
    return not offscreen() and not os.environ.get(NO_SPLASH)


def default(name: str, value: str) -> None:
    """Set `name` for this process and its children unless the user set it."""
    os.environ.setdefault(name, value)
