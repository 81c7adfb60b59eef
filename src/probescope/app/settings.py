"""Settings that persist between runs: window geometry, panel arrangement, recent items, last workspace, device,
theme, export defaults, and the files the user trusts to run code (by SHA-256: a changed file is asked about again).

Backed by QSettings. `Settings(path)` uses an ini file at `path` (tests and `--screenshot` runs use a temporary
one, so they never read or write the user's settings); `Settings()` uses the user's normal location.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings

RECENT_LIMIT = 10
THEMES = ("system", "light", "dark")


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


class Settings:
    """Typed access to the persisted settings."""

    def __init__(self, path: str | Path | None = None):
        if path is None:
            self._qs = QSettings(QSettings.Format.IniFormat, QSettings.Scope.UserScope, "probescope", "probescope")
        else:
            self._qs = QSettings(str(path), QSettings.Format.IniFormat)

    @property
    def path(self) -> str:
        return self._qs.fileName()

    def sync(self) -> None:
        self._qs.sync()

    # window
    def geometry(self) -> QByteArray | None:
        value = self._qs.value("window/geometry")
        return value if isinstance(value, QByteArray) and not value.isEmpty() else None

    def set_geometry(self, geometry: QByteArray) -> None:
        self._qs.setValue("window/geometry", geometry)

    def dialog_choices(self, dialog: str) -> dict:
        """What a dialog was set to when last accepted ({} before)."""
        try:
            value = json.loads(str(self._qs.value(f"dialogs/{dialog}", "{}")))
        except ValueError:
            return {}
        return value if isinstance(value, dict) else {}

    def set_dialog_choices(self, dialog: str, choices: dict) -> None:
        self._qs.setValue(f"dialogs/{dialog}", json.dumps(choices))

    def panel_layout(self, workspace: str) -> QByteArray | None:
        """The arrangement of a workspace's panels (QMainWindow.saveState), None before the first run."""
        value = self._qs.value(f"layout/{workspace}")
        return value if isinstance(value, QByteArray) and not value.isEmpty() else None

    def set_panel_layout(self, workspace: str, state: QByteArray) -> None:
        self._qs.setValue(f"layout/{workspace}", state)

    def last_workspace(self) -> str | None:
        value = self._qs.value("window/workspace")
        return str(value) if value else None

    def set_last_workspace(self, name: str) -> None:
        self._qs.setValue("window/workspace", name)

    # compute
    def device(self) -> str:
        return str(self._qs.value("compute/device", "cpu"))

    def set_device(self, device: str) -> None:
        self._qs.setValue("compute/device", device)

    # appearance
    def theme(self) -> str:
        value = str(self._qs.value("appearance/theme", "system"))
        return value if value in THEMES else "system"

    def set_theme(self, theme: str) -> None:
        if theme not in THEMES:
            raise ValueError(f"unknown theme {theme!r}; choose one of {', '.join(THEMES)}")
        self._qs.setValue("appearance/theme", theme)

    # recent items
    def recent(self, kind: str | None = None) -> list[RecentItem]:
        """Most recent first; `kind` filters to one slot."""
        raw = self._qs.value("recent/items", "[]")
        try:
            items = [RecentItem(**entry) for entry in json.loads(str(raw))]
        except (ValueError, TypeError):
            items = []  # an unreadable entry is forgotten, never fatal
        return [item for item in items if kind is None or item.kind == kind]

    def add_recent(self, item: RecentItem) -> None:
        items = [item] + [old for old in self.recent() if (old.kind, old.spec) != (item.kind, item.spec)]
        self._qs.setValue("recent/items", json.dumps([asdict(i) for i in items[:RECENT_LIMIT]]))

    def clear_recent(self) -> None:
        self._qs.remove("recent/items")

    # trusted files
    def trusted_files(self) -> list[TrustedFile]:
        """Most recently trusted first."""
        raw = self._qs.value("trust/files", "[]")
        try:
            return [TrustedFile(**entry) for entry in json.loads(str(raw))]
        except (ValueError, TypeError):
            return []  # an unreadable list trusts nothing

    def trusted_hashes(self) -> frozenset[str]:
        return frozenset(f.sha256 for f in self.trusted_files())

    def trusted_at(self, path: str) -> TrustedFile | None:
        """The last content trusted at `path` (to say a file changed since it was trusted), or None."""
        return next((f for f in self.trusted_files() if f.path == path), None)

    def trust_file(self, trusted: TrustedFile) -> None:
        files = [trusted] + [f for f in self.trusted_files() if f.sha256 != trusted.sha256]
        self._qs.setValue("trust/files", json.dumps([asdict(f) for f in files]))
        self._qs.sync()

    def forget_trusted_files(self) -> None:
        self._qs.remove("trust/files")

    # export
    def export_defaults(self) -> ExportDefaults:
        raw = self._qs.value("export/defaults", "")
        try:
            return ExportDefaults(**json.loads(str(raw))) if raw else ExportDefaults()
        except (ValueError, TypeError):
            return ExportDefaults()

    def set_export_defaults(self, defaults: ExportDefaults) -> None:
        self._qs.setValue("export/defaults", json.dumps(asdict(defaults)))
