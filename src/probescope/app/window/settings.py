"""Settings that persist between runs: window geometry, panel arrangement, recent items, last workspace, device,
theme, export defaults, and the files the user trusts to run code (by SHA-256: a changed file is asked about again).

Backed by QSettings. `Settings(path)` uses an ini file at `path` (tests and `--screenshot` runs use a temporary
one, so they never read or write the user's settings); `Settings()` uses the user's normal location.

Every value is checked when it is read: one of the wrong type, or one this machine cannot honour (a `cuda:3` where
there is one GPU, an export folder that is gone), gives way to its default, and `notes` gets one line saying which
setting and why (the window shows them, `gui --screenshot` prints them): a settings file edited by hand or carried
from another machine never stops the app.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import TypeVar

from PySide6.QtCore import QByteArray, QSettings

from probescope.app.figures.export import FORMATS, PRESETS
from probescope.core.bounds import Bound
from probescope.core.environment import settings_file
from probescope.core.errors import InputError

RECENT_LIMIT = 10
THEMES = ("system", "light", "dark")
EXPORT_WIDTH = Bound(16, 20000)  # pixels of an exported PNG (the export dialog's range)
EXPORT_SCALE = Bound(0.25, 16.0, float)  # an exported PNG's size relative to the view on screen
_SHA256 = re.compile(r"[0-9a-f]{64}")
T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class RecentItem:
    """Something opened before: `kind` is a state slot ('model', 'dataset', ...), `spec` what reopens it."""

    kind: str
    spec: str
    label: str


@dataclass(frozen=True)
class TrustedFile:
    """A file content the user trusted to run code: its SHA-256, and where and what it was when trusted."""

    sha256: str
    path: str
    kind: str


@dataclass(frozen=True)
class ExportDefaults:
    """How figures are exported unless the user changes it in the export dialog (the last choices made there)."""

    format: str = "png"          # png | svg | pdf
    width: int | None = None     # PNG width in pixels with the custom size; None = use `scale`
    scale: float = 2.0           # PNG size relative to the view on screen, with the custom size
    margin_free: bool = False
    folder: str = ""             # the folder of the last figure written ("": the working folder)
    preset: str = "column"       # a figure preset's key (export.PRESETS) or "custom" (width or scale)
    follow_theme: bool = False   # figures in the window's theme instead of the light (paper) one
    view: str = ""               # the view exported last ("": none yet), offered again unless a panel is in use


class Settings:
    """Typed, checked access to the persisted settings; `notes` holds one line per saved value that was not used."""

    def __init__(self, path: str | Path | None = None):
        if path is None:
            path = settings_file()
        self._qs = QSettings(str(path), QSettings.Format.IniFormat)
        self.notes: list[str] = []
        self.recent = RecentItems(self)
        self.trusted = TrustedFiles(self)

    @property
    def path(self) -> str:
        return self._qs.fileName()

    def sync(self) -> None:
        self._qs.sync()

    def note(self, key: str, value: object, why: str) -> None:
        """Record that the saved `value` of `key` is not used, and why (once per setting and reason)."""
        shown = repr(value) if len(repr(value)) <= 60 else f"{repr(value)[:57]}..."
        note = f"saved setting {key} = {shown} not used: {why}"
        if note not in self.notes:
            self.notes.append(note)

    def _fallback(self, key: str, value: object, why: str, default: T) -> T:
        """`default` in place of the saved `value` of `key`, noted."""
        self.note(key, value, why)
        return default

    def _json(self, key: str, default: T, kind: type) -> T:
        """The saved JSON of `key` when it is a `kind` (dict or list); `default` (noted) otherwise."""
        raw = self._qs.value(key)
        if raw is None or raw == "":
            return default
        try:
            value = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            return self._fallback(key, raw, "not readable JSON", default)
        if not isinstance(value, kind):
            return self._fallback(key, raw, f"expected a JSON {'object' if kind is dict else kind.__name__}", default)
        return value

    def _bytes(self, key: str) -> QByteArray | None:
        value = self._qs.value(key)
        if value is None:
            return None
        if not isinstance(value, QByteArray):
            return self._fallback(key, value, "not a saved window state", None)
        return value if not value.isEmpty() else None

    def _text(self, key: str, default: str) -> str:
        value = self._qs.value(key, default)
        if not isinstance(value, str):
            return self._fallback(key, value, f"expected text, not {type(value).__name__}", default)
        return value

    def check_all(self, workspaces: Sequence[str] = ()) -> list[str]:
        """Read every setting once, so that `notes` tells at start what will not be used (also returned)."""
        self.geometry()
        for name in workspaces:
            self.panel_layout(name)
        self.last_workspace(workspaces)
        self.device()
        self.theme()
        self.recent.items()
        self.trusted.files()
        self.export_defaults()
        self.dialog_choices("open_model")
        return list(self.notes)

    # window
    def geometry(self) -> QByteArray | None:
        return self._bytes("window/geometry")

    def set_geometry(self, geometry: QByteArray) -> None:
        self._qs.setValue("window/geometry", geometry)

    def dialog_choices(self, dialog: str) -> dict:
        """What a dialog was set to when last accepted ({} before); text values only (the dialog ignores a choice
        it does not offer)."""
        key = f"dialogs/{dialog}"
        choices = {}
        for name, value in self._json(key, {}, dict).items():
            if isinstance(value, str):
                choices[name] = value
            else:
                self.note(f"{key} {name}", value, f"expected text, not {type(value).__name__}")
        return choices

    def set_dialog_choices(self, dialog: str, choices: dict) -> None:
        self._qs.setValue(f"dialogs/{dialog}", json.dumps(choices))

    def panel_layout(self, workspace: str) -> QByteArray | None:
        """The arrangement of a workspace's panels (QMainWindow.saveState), None before the first run."""
        return self._bytes(f"layout/{workspace}")

    def set_panel_layout(self, workspace: str, state: QByteArray) -> None:
        self._qs.setValue(f"layout/{workspace}", state)

    def last_workspace(self, known: Sequence[str] = ()) -> str | None:
        """The workspace shown last, when it is one of `known` (any name when `known` is empty)."""
        value = self._text("window/workspace", "")
        if value and known and value not in known:
            return self._fallback("window/workspace", value, f"no such workspace (there are {', '.join(known)})",
                                  None)
        return value or None

    def set_last_workspace(self, name: str) -> None:
        self._qs.setValue("window/workspace", name)

    # compute
    def device(self, here: bool = True) -> str:
        """The compute device, when this machine has it (probescope.core.devices decides; without `here`, when it
        is a device's name: a compute kernel checks it on its own machine); cpu otherwise."""
        from probescope.core.devices import device_problem

        value = self._qs.value("compute/device", "cpu")
        problem = device_problem(value, here=here)
        if problem is not None:
            return self._fallback("compute/device", value, f"{problem}; computing on cpu", "cpu")
        return value.strip()

    def set_device(self, device: str) -> None:
        self._qs.setValue("compute/device", device)

    # appearance
    def theme(self) -> str:
        value = self._text("appearance/theme", "system")
        if value not in THEMES:
            return self._fallback("appearance/theme", value, f"not a theme ({', '.join(THEMES)})", "system")
        return value

    def set_theme(self, theme: str) -> None:
        if theme not in THEMES:
            raise ValueError(f"unknown theme {theme!r}; choose one of {', '.join(THEMES)}")
        self._qs.setValue("appearance/theme", theme)

    # export
    def export_defaults(self) -> ExportDefaults:
        """The export dialog's defaults, each field checked on its own (a bad one takes its default, noted)."""
        saved = self._json("export/defaults", {}, dict)
        usable = {}
        for f in fields(ExportDefaults):
            if f.name in saved:
                problem = _export_problem(f.name, saved[f.name])
                if problem is None:
                    usable[f.name] = saved[f.name]
                else:
                    self._fallback(f"export/defaults {f.name}", saved[f.name], problem, None)
        return ExportDefaults(**usable)

    def set_export_defaults(self, defaults: ExportDefaults) -> None:
        self._qs.setValue("export/defaults", json.dumps(asdict(defaults)))



class RecentItems:
    """The File › Open Recent list, kept in the settings (most recent first, RECENT_LIMIT of them)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def items(self, kind: str | None = None) -> list[RecentItem]:
        """Most recent first; `kind` filters to one slot. An entry that is not three strings is left out (noted)."""
        s = self._settings
        items = []
        for entry in s._json("recent/items", [], list):  # noqa: SLF001  (the settings' own checked reader)
            item = _record(RecentItem, entry)
            problem = "not a recent item (kind, spec and label)" if item is None else _recent_problem(item)
            if problem is not None:
                s.note("recent/items", entry, problem)
            elif kind is None or item.kind == kind:
                items.append(item)
        return items

    def add(self, item: RecentItem) -> None:
        items = [item] + [old for old in self.items() if (old.kind, old.spec) != (item.kind, item.spec)]
        self._settings._qs.setValue("recent/items", json.dumps([asdict(i) for i in items[:RECENT_LIMIT]]))  # noqa: SLF001

    def clear(self) -> None:
        self._settings._qs.remove("recent/items")  # noqa: SLF001


class TrustedFiles:
    """The file contents the user trusted to run code, by SHA-256 (a changed file is asked about again)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def files(self) -> list[TrustedFile]:
        """Most recently trusted first. An entry that is not a SHA-256 with a path and a kind trusts nothing."""
        s = self._settings
        files = []
        for entry in s._json("trust/files", [], list):  # noqa: SLF001
            trusted = _record(TrustedFile, entry)
            if trusted is None or not _SHA256.fullmatch(trusted.sha256):
                s.note("trust/files", entry, "not a trusted file (a SHA-256, its path and kind)")
            else:
                files.append(trusted)
        return files

    def hashes(self) -> frozenset[str]:
        return frozenset(f.sha256 for f in self.files())

    def at(self, path: str) -> TrustedFile | None:
        """The last content trusted at `path` (to say a file changed since it was trusted), or None."""
        return next((f for f in self.files() if f.path == path), None)

    def add(self, trusted: TrustedFile) -> None:
        files = [trusted] + [f for f in self.files() if f.sha256 != trusted.sha256]
        qs = self._settings._qs  # noqa: SLF001
        qs.setValue("trust/files", json.dumps([asdict(f) for f in files]))
        qs.sync()

    def forget(self) -> None:
        self._settings._qs.remove("trust/files")  # noqa: SLF001


def _record(cls: type[R], entry: object) -> R | None:
    """`cls(**entry)` when `entry` holds exactly its fields, all strings; None otherwise."""
    names = sorted(f.name for f in fields(cls))
    if not isinstance(entry, dict) or sorted(entry) != names or not all(isinstance(entry[n], str) for n in names):
        return None
    return cls(**entry)


def _recent_problem(item: RecentItem) -> str | None:
    """Why a recent item cannot be reopened by this version (its request is unreadable or of an unknown kind), or
    None. A file that is gone stays listed (a drive may come back): opening it says so in one line."""
    from probescope.jobs.inputs import OpenRequest

    try:
        request = OpenRequest.from_json(item.spec)
    except (ValueError, TypeError, AttributeError):
        return "not a request this version can open"
    if request.kind != item.kind:
        return f"a {request.kind} request filed as {item.kind}"
    return None


def _export_problem(name: str, value: object) -> str | None:
    """Why `value` cannot be the export default `name`, or None."""
    if name == "format":
        return None if value in FORMATS else f"not a format ({', '.join(FORMATS)})"
    if name in ("margin_free", "follow_theme"):
        return None if isinstance(value, bool) else "expected true or false"
    if name == "preset":
        keys = [p.key for p in PRESETS] + ["custom"]
        return None if value in keys else f"not a size preset ({', '.join(keys)})"
    if name == "view":
        return None if isinstance(value, str) else "expected a view's name"
    if name == "folder":
        if not isinstance(value, str):
            return "expected a folder name"
        return None if not value or Path(value).is_dir() else "no such folder on this machine"
    try:
        if name == "width" and value is not None:
            EXPORT_WIDTH.check(value)
        elif name == "scale":
            EXPORT_SCALE.check(float(value) if type(value) is int else value)
    except InputError as exc:
        return str(exc)
    return None
