"""The window's figure actions: File > Export Figure (the dialog on the view in use), Copy Figure, and each view's
right-click figure menu (the dialog, a paper preset straight to a file, or the clipboard)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from PySide6.QtWidgets import QApplication, QFileDialog, QWidget

from probescope.app.figures.export import (
    ExportTarget,
    Preset,
    copy_to_clipboard,
    export_preset,
    figure_colours,
    format_of,
)
from probescope.app.figures.export_dialog import FILTERS, ExportDialog, default_folder, file_name
from probescope.app.window.saved_settings import EXPORT_DEFAULTS, Settings
from probescope.app.window.workspace import Workspace
from probescope.core.errors import InputError


class FigureActions:
    """Figures of `workspace()`'s views, written with `settings`' export defaults; `say` shows a status message,
    `notify` a failure."""

    def __init__(self, window: QWidget, settings: Settings, workspace: Callable[[], Workspace],
                 say: Callable[[str, int], None], notify: Callable[[str], None]):
        self._window, self._settings, self._workspace, self._say, self._notify = (window, settings, workspace, say,
                                                                                 notify)

    def export_figure(self, view: ExportTarget | None = None) -> None:
        """The export dialog, on `view`, else on the view that has the keyboard focus (the panel in use), else on
        the view exported last (the focus on the workspace's own list, where it starts, is no choice)."""
        workspace = self._workspace()
        targets = workspace.export_targets()
        focus = view.widget if view is not None else QApplication.focusWidget()
        if view is None and focus is workspace.focus_view:
            focus = None
        exported = self._settings.get(EXPORT_DEFAULTS).view
        last = next((k for k, target in enumerate(targets) if target.name == exported), 0)
        current = next((k for k, target in reversed(list(enumerate(targets)))
                        if focus is not None and (focus is target.widget or target.widget.isAncestorOf(focus))), last)
        dialog = ExportDialog(targets, self._settings, self._window, current)
        dialog.exported.connect(lambda path: self._say(f"Exported {path}", 5000))
        dialog.failed.connect(self._notify)
        dialog.show()

    def figure_request(self, view: ExportTarget, preset: Preset | None, copy: bool) -> None:
        """A view's figure menu: the export dialog, a paper preset (asks where), or the clipboard."""
        defaults = self._settings.get(EXPORT_DEFAULTS)
        if copy:
            with figure_colours(defaults.follow_theme):
                copy_to_clipboard(view.widget, margin_free=defaults.margin_free)
            self._say(f"Copied {view.name} to the clipboard", 5000)
        elif preset is None:
            self.export_figure(view)
        else:
            name = file_name(view, preset, defaults.format)
            path, _ = QFileDialog.getSaveFileName(self._window, f"Export {view.name} for a {preset.name.lower()}",
                                                  str(default_folder(defaults) / name), FILTERS)
            if path:
                try:
                    export_preset(view.widget, path, preset, margin_free=defaults.margin_free,
                                  follow_theme=defaults.follow_theme)
                except (InputError, OSError) as exc:
                    self._notify(str(exc))
                    return
                self._settings.set(EXPORT_DEFAULTS, replace(defaults, format=format_of(path),
                                                           folder=str(Path(path).parent)))
                self._say(f"Exported {path}", 5000)

    def copy_figure(self) -> None:
        self.figure_request(self._workspace().export_targets()[0], None, True)


def target_of(workspace: Workspace, widget: QWidget) -> ExportTarget:
    """The export target of `workspace` that is `widget`, as it is now (what it shows names its file)."""
    return next(t for t in workspace.export_targets() if t.widget is widget)
