"""The architecture names each named kind of model spec takes (what the Open Model dialog offers), for a process that
never imports torch: the window's. timm, OpenCLIP and torchvision list their models only once imported (torch with
them: seconds and hundreds of MB), so the names are asked of a child interpreter once and kept in the cache folder
under the versions of those packages, read from their metadata; an upgrade lists them again.
"""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from probescope.core.atomic import write_json
from probescope.core.cache import cache_dir
from probescope.core.child import NoAnswer, child_json
from probescope.core.errors import InputError

LISTED_BY = ("torch", "torchvision", "timm", "open_clip_torch")  # the packages whose versions decide the names
_CHILD = ("import json; from probescope.core.models.families import model_architectures; "
          "print(json.dumps(model_architectures()))")


def _versions() -> dict[str, str]:
    found = {}
    for package in LISTED_BY:
        try:
            found[package] = version(package)
        except PackageNotFoundError:
            found[package] = ""
    return found


def architecture_names(cache: Path | None = None) -> dict[str, tuple[str, ...]]:
    """{kind: names} as `families.model_architectures()` gives them, from the cache when it was listed with the
    packages installed now; listed by a child interpreter otherwise (and kept: an unwritable cache is no error)."""
    versions = _versions()
    try:
        path = (cache or cache_dir()) / "architecture_names.json"
    except InputError:
        path = None
    if path is not None:
        try:
            kept = json.loads(path.read_text(encoding="utf-8"))
            if kept.get("versions") == versions:
                return {kind: tuple(names) for kind, names in kept["names"].items()}
        except (OSError, ValueError, AttributeError, KeyError, TypeError):
            pass
    try:
        names = child_json(_CHILD, timeout=600)
    except NoAnswer as exc:
        raise InputError(f"could not list the model architectures ({exc})") from None
    if path is not None:
        try:
            write_json(path, {"versions": versions, "names": names}, indent=None)
        except OSError:
            pass
    return {kind: tuple(names) for kind, names in names.items()}
