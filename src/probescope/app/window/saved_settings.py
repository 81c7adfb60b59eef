"""Settings that persist between runs: window geometry, panel arrangement, recent items, last workspace, device,
theme, export defaults, and the files the user trusts to run code (by SHA-256: a changed file is asked about again).

Backed by QSettings. `Settings(path)` uses an ini file at `path` (tests and `--screenshot` runs use a temporary
one, so they never read or write the user's settings); `Settings()` uses the user's normal location.

Each setting is declared once below (a `Setting`: its key, how it is stored, its default, its check), and read and
written through `Settings.get` and `Settings.set`. Every value is checked when it is read: one of the wrong type,
or one this machine cannot honour (a `cuda:3` where there is one GPU, an export folder that is gone), gives way to
its default, and `notes` gets one line saying which setting and why (the window shows them, `gui --screenshot`
prints them): a settings file edited by hand or carried from another machine never stops the app.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from PySide6.QtCore import QByteArray, QSettings

from probescope.app.figures.export import FORMATS, PRESETS
from probescope.core.bounds import Bound
from probescope.core.devices import device_problem
from probescope.core.environment import settings_file
from probescope.core.errors import InputError
from probescope.jobs.inputs import OpenRequest

RECENT_LIMIT = 10
THEMES = ("system", "light", "dark")
DIALOGS = ("open_model",)  # the dialogs whose last choices are kept (DIALOG_CHOICES)
EXPORT_WIDTH = Bound(16, 20000)  # pixels of an exported PNG (the export dialog's range)
EXPORT_SCALE = Bound(0.25, 16.0, float)  # an exported PNG's size relative to the view on screen
_SHA256 = re.compile(r"[0-9a-f]{64}")
T = TypeVar("T")
R = TypeVar("R")
Note = Callable[[str, object, str], None]  # (a part of the setting or "", the saved value, why it is not used)


class Unusable(ValueError):
    """Why a saved value cannot be used: its setting takes the default, and `Settings.notes` says why."""


@dataclass(frozen=True, eq=False)  # (each one is itself: compared and hashed by identity)
class Setting(Generic[T]):
    """One persisted setting: its QSettings key ("{}" where a name completes it: a workspace's panels, a dialog's
    choices), how it is stored, its default, the text values it allows (`choices`, checked on read and write) and
    `check(value, note, **context)`, the value to use (raises Unusable; `note`s a part it leaves out)."""

    key: str
    form: Literal["value", "text", "state", "json object", "json list"]  # "state": bytes Qt saved, empty = none
    default: T
    check: Callable[..., T] | None = None
    choices: tuple[str, ...] = ()
    encode: Callable[[T], object] | None = None  # a json setting's value as JSON-able data


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


def _one_of(values: Callable[[], Sequence[object]], what: str) -> Callable[[object], str | None]:
    return lambda value: None if value in values() else f"not a {what} ({', '.join(map(str, values()))})"


def _a(kind: type, what: str) -> Callable[[object], str | None]:
    return lambda value: None if isinstance(value, kind) else f"expected {what}"


def _bounded(bound: Bound, none: bool = False) -> Callable[[object], str | None]:
    def problem(value: object) -> str | None:
        if value is None and none:
            return None
        try:
            bound.check(float(value) if bound.kind is float and type(value) is int else value)
        except InputError as exc:
            return str(exc)
        return None
    return problem


def _folder(value: object) -> str | None:
    if not isinstance(value, str):
        return "expected a folder name"
    return None if not value or Path(value).is_dir() else "no such folder on this machine"


def _export(default: object, check: Callable[[object], str | None]) -> Any:
    """An ExportDefaults field: its default, and `check(saved value)`, why it cannot be used, or None."""
    return field(default=default, metadata={"check": check})


@dataclass(frozen=True)
class ExportDefaults:
    """How figures are exported unless the user changes it in the export dialog (the last choices made there)."""

    format: str = _export("png", _one_of(lambda: FORMATS, "format"))  # png | svg | pdf
    # PNG width in pixels with the custom size; None = use `scale`
    width: int | None = _export(None, _bounded(EXPORT_WIDTH, none=True))
    scale: float = _export(2.0, _bounded(EXPORT_SCALE))  # PNG size relative to the view on screen, with the custom size
    margin_free: bool = _export(False, _a(bool, "true or false"))
    folder: str = _export("", _folder)  # the folder of the last figure written ("": the working folder)
    # a figure preset's key (export.PRESETS) or "custom" (width or scale)
    preset: str = _export("column", _one_of(lambda: [p.key for p in PRESETS] + ["custom"], "size preset"))
    follow_theme: bool = _export(False, _a(bool, "true or false"))  # figures in the window's theme, not the paper one
    view: str = _export("", _a(str, "a view's name"))  # the view exported last ("": none yet), offered again


# ---- the settings ---------------------------------------------------------------------------------------------------

def _workspace(value: str, note: Note, known: Sequence[str] = (), **_: object) -> str | None:
    """The workspace shown last, when it is one of `known` (any name when `known` is empty)."""
    if value and known and value not in known:
        raise Unusable(f"no such workspace (there are {', '.join(known)})")
    return value or None


def _device(value: object, note: Note, here: bool = True, **_: object) -> str:
    """The compute device, when this machine has it (probescope.core.devices decides; without `here`, when it is a
    device's name: a compute kernel checks it on its own machine)."""
    problem = device_problem(value, here=here)
    if problem is not None:
        raise Unusable(f"{problem}; computing on cpu")
    return value.strip()


def _dialog_choices(saved: dict, note: Note, **_: object) -> dict:
    """Text values only (the dialog ignores a choice it does not offer)."""
    choices = {}
    for name, value in saved.items():
        if isinstance(value, str):
            choices[name] = value
        else:
            note(name, value, f"expected text, not {type(value).__name__}")
    return choices


def _export_defaults(saved: dict, note: Note, **_: object) -> ExportDefaults:
    """Each field checked on its own (a bad one takes its default, noted)."""
    usable = {}
    for f in fields(ExportDefaults):
        if f.name in saved:
            problem = f.metadata["check"](saved[f.name])
            if problem is None:
                usable[f.name] = saved[f.name]
            else:
                note(f.name, saved[f.name], problem)
    return ExportDefaults(**usable)


def _recent_items(saved: list, note: Note, **_: object) -> list[RecentItem]:
    """An entry that is not three strings, or that this version cannot reopen, is left out (noted)."""
    items = []
    for entry in saved:
        item = _record(RecentItem, entry)
        problem = "not a recent item (kind, spec and label)" if item is None else _recent_problem(item)
        if problem is not None:
            note("", entry, problem)
        else:
            items.append(item)
    return items


def _trusted_files(saved: list, note: Note, **_: object) -> list[TrustedFile]:
    """An entry that is not a SHA-256 with a path and a kind trusts nothing (noted)."""
    files = []
    for entry in saved:
        trusted = _record(TrustedFile, entry)
        if trusted is None or not _SHA256.fullmatch(trusted.sha256):
            note("", entry, "not a trusted file (a SHA-256, its path and kind)")
        else:
            files.append(trusted)
    return files


def _records(items: list) -> list[dict]:
    return [asdict(item) for item in items]


GEOMETRY: Setting[QByteArray | None] = Setting("window/geometry", "state", None)
PANEL_LAYOUT: Setting[QByteArray | None] = Setting("layout/{}", "state", None)  # QMainWindow.saveState, a workspace's
LAST_WORKSPACE: Setting[str | None] = Setting("window/workspace", "text", None, _workspace)
DIALOG_CHOICES: Setting[dict] = Setting("dialogs/{}", "json object", {}, _dialog_choices)  # when last accepted
DEVICE: Setting[str] = Setting("compute/device", "value", "cpu", _device)
THEME: Setting[str] = Setting("appearance/theme", "text", "system", choices=THEMES)
EXPORT_DEFAULTS: Setting[ExportDefaults] = Setting("export/defaults", "json object", ExportDefaults(),
                                                   _export_defaults, encode=asdict)
RECENT_ITEMS: Setting[list[RecentItem]] = Setting("recent/items", "json list", [], _recent_items, encode=_records)
TRUSTED_FILES: Setting[list[TrustedFile]] = Setting("trust/files", "json list", [], _trusted_files, encode=_records)
SETTINGS = (GEOMETRY, PANEL_LAYOUT, LAST_WORKSPACE, DIALOG_CHOICES, DEVICE, THEME, EXPORT_DEFAULTS, RECENT_ITEMS,
            TRUSTED_FILES)
_MISSING = object()


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

    def get(self, setting: Setting[T], name: str = "", **context: object) -> T:
        """`setting`'s saved value (of `name`'s, for a key with "{}"), or its default when there is none or it is
        unusable (noted). `context` goes to the check: `known` workspaces, `here` (the device is this machine's)."""
        key = setting.key.format(name)
        raw = self._qs.value(key)

        def note(part: str, value: object, why: str) -> None:
            self.note(f"{key} {part}" if part else key, value, why)

        try:
            value = _decoded(setting, raw)
            if value is _MISSING:
                return setting.default
            if setting.choices and value not in setting.choices:
                raise Unusable(f"not one of {', '.join(setting.choices)}")
            return value if setting.check is None else setting.check(value, note, **context)
        except Unusable as why:
            note("", raw, str(why))
            return setting.default

    def set(self, setting: Setting[T], value: T, name: str = "") -> None:
        """Save `value` as `setting` (of `name`, for a key with "{}"); ValueError for a value it does not allow."""
        if setting.choices and value not in setting.choices:
            raise ValueError(f"unknown {setting.key} {value!r}; choose one of {', '.join(setting.choices)}")
        if setting.form.startswith("json"):
            value = json.dumps(value if setting.encode is None else setting.encode(value))
        self._qs.setValue(setting.key.format(name), value)

    def forget(self, setting: Setting[T], name: str = "") -> None:
        """Remove the saved value: `setting` has its default again."""
        self._qs.remove(setting.key.format(name))

    def check_all(self, workspaces: Sequence[str] = ()) -> list[str]:
        """Read every setting once, so that `notes` tells at start what will not be used (also returned)."""
        names = {PANEL_LAYOUT: workspaces, DIALOG_CHOICES: DIALOGS}
        for setting in SETTINGS:
            for name in names.get(setting, ("",)):
                self.get(setting, name, known=workspaces)
        return list(self.notes)


def _decoded(setting: Setting, raw: object) -> object:
    """The saved `raw` value in `setting`'s form, _MISSING when there is none; Unusable when it is not that form."""
    if raw is None:
        return _MISSING
    if setting.form == "text" and not isinstance(raw, str):
        raise Unusable(f"expected text, not {type(raw).__name__}")
    if setting.form == "state":
        if not isinstance(raw, QByteArray):
            raise Unusable("not a saved window state")
        return raw if not raw.isEmpty() else _MISSING
    if setting.form.startswith("json"):
        if raw == "":
            return _MISSING
        try:
            value = json.loads(raw) if isinstance(raw, str) else raw
        except ValueError:
            raise Unusable("not readable JSON") from None
        kind = dict if setting.form == "json object" else list
        if not isinstance(value, kind):
            raise Unusable(f"expected a JSON {setting.form.removeprefix('json ')}")
        return value
    return raw


class RecentItems:
    """The File › Open Recent list, kept in the settings (most recent first, RECENT_LIMIT of them)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def items(self, kind: str | None = None) -> list[RecentItem]:
        """Most recent first; `kind` filters to one slot."""
        return [item for item in self._settings.get(RECENT_ITEMS) if kind is None or item.kind == kind]

    def add(self, item: RecentItem) -> None:
        items = [item] + [old for old in self.items() if (old.kind, old.spec) != (item.kind, item.spec)]
        self._settings.set(RECENT_ITEMS, items[:RECENT_LIMIT])

    def clear(self) -> None:
        self._settings.forget(RECENT_ITEMS)


class TrustedFiles:
    """The file contents the user trusted to run code, by SHA-256 (a changed file is asked about again)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def files(self) -> list[TrustedFile]:
        """Most recently trusted first."""
        return self._settings.get(TRUSTED_FILES)

    def hashes(self) -> frozenset[str]:
        return frozenset(f.sha256 for f in self.files())

    def at(self, path: str) -> TrustedFile | None:
        """The last content trusted at `path` (to say a file changed since it was trusted), or None."""
        return next((f for f in self.files() if f.path == path), None)

    def add(self, trusted: TrustedFile) -> None:
        files = [trusted] + [f for f in self.files() if f.sha256 != trusted.sha256]
        self._settings.set(TRUSTED_FILES, files)
        self._settings.sync()

    def forget(self) -> None:
        self._settings.forget(TRUSTED_FILES)


def _record(cls: type[R], entry: object) -> R | None:
    """`cls(**entry)` when `entry` holds exactly its fields, all strings; None otherwise."""
    names = sorted(f.name for f in fields(cls))
    if not isinstance(entry, dict) or sorted(entry) != names or not all(isinstance(entry[n], str) for n in names):
        return None
    return cls(**entry)


def _recent_problem(item: RecentItem) -> str | None:
    """Why a recent item cannot be reopened by this version (its request is unreadable or of an unknown kind), or
    None. A file that is gone stays listed (a drive may come back): opening it says so in one line."""
    try:
        request = OpenRequest.from_json(item.spec)
    except (ValueError, TypeError, AttributeError):
        return "not a request this version can open"
    if request.kind != item.kind:
        return f"a {request.kind} request filed as {item.kind}"
    return None
