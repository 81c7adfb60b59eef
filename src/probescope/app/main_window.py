"""The main window: the three workspaces as tabs, menus, the bar of loaded inputs, progress and notifications.

It owns the `AppState`, the `WorkerPool` and the `Settings`; workspaces bind to the state and submit their own
tasks. Opening anything (menu, recent item, drag and drop, command line) goes through `open()`, which loads in a
worker and updates the state only on success, so a failed open leaves everything on screen as it was.

A task that stops at a file that runs code when loaded (TorchScript, a whole-model pickle; whether opened here, by a
workspace, or named in a saved batch result) makes the window ask the user (TrustDialog, with the file's SHA-256);
trusted, the hash is remembered in the settings and the same task runs again. Nothing else grants that trust.
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import astuple, replace
from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QGuiApplication
from PySide6.QtWidgets import QApplication, QDockWidget, QFileDialog, QMainWindow, QTabWidget, QVBoxLayout, QWidget

from probescope.app.activity import Activity, ActivityRow
from probescope.app.export import ExportTarget, Preset, copy_to_clipboard, export_preset, figure_colours, format_of
from probescope.app.export_dialog import FILTERS, ExportDialog, default_folder, file_name
from probescope.app.figure_menu import install_figure_menu
from probescope.app.help import GuideWindow, ShortcutsDialog
from probescope.app.menus import Menus
from probescope.app.open_dialogs import ask_request
from probescope.app.settings import RecentItem, Settings, TrustedFile
from probescope.app.source_bar import SourceBar
from probescope.app.state import AppState
from probescope.app.theme import apply_theme
from probescope.app.trust_dialog import TrustDialog
from probescope.app.workers import TaskHandle, WorkerPool
from probescope.app.workspace import Workspace
from probescope.app.workspaces import WORKSPACES
from probescope.core.errors import InputError
from probescope.core.trust import NO_TRUST, Trust, UntrustedFile
from probescope.jobs.inputs import (
    DEMO,
    KINDS,
    Loaded,
    OpenRequest,
    batch_folder,
    classify_path,
    executor_for,
    open_task,
)
from probescope.jobs.protocol import COMPUTE, TaskError
from probescope.widgets.command_palette import CommandPalette
from probescope.widgets.notification import Notification
from probescope.widgets.task_panel import TaskPanel
from probescope.widgets.task_progress import TaskProgress

PROGRESS_MS = 100  # the status bar's progress and the Tasks panel are redrawn at most this often
RECENT_TASKS = 8  # finished tasks the Tasks panel keeps listed
RECENT_AFTER_S = 1.0  # a finished task is listed when it ran this long (not every thumbnail and overlay)

class MainWindow(QMainWindow):
    """`opened(Loaded)` after an open succeeds; `open_failed(OpenRequest, TaskError)` after it fails.

    `trust` is this session's extra trust (the command line's --trust); `ask_trust` False (screenshot runs) reports
    an untrusted file as a failure instead of asking."""

    opened = Signal(object)
    open_failed = Signal(object, object)

    def __init__(self, settings: Settings, device: str | None = None, parent: QWidget | None = None, *,
                 trust: Trust = NO_TRUST, ask_trust: bool = True, kernel: str = "thread"):
        super().__init__(parent)
        self.setWindowTitle("probescope")
        self.setAcceptDrops(True)
        self.settings = settings
        self.device = device or settings.device()
        self.state = AppState(self)
        self.pool = WorkerPool(parent=self, kernel=kernel)  # `kernel`: where compute Jobs run (workers.KERNELS)
        self.session_trust = trust
        self.ask_trust = ask_trust
        self._asking: dict[str, list[TaskHandle]] = {}  # tasks waiting for the answer about a file, by its hash
        self._update_trust()
        self._palette: CommandPalette | None = None
        self._guide: GuideWindow | None = None
        self._opened: dict[str, OpenRequest] = {}  # what each loaded input was opened from

        self.source_bar = SourceBar(self.state, settings, self)
        self.addToolBar(self.source_bar)
        self.source_bar.open_requested.connect(self.open)
        self.source_bar.browse_requested.connect(self.browse)

        self.tabs = QTabWidget()
        self.tabs.setDocumentMode(True)
        self.workspaces: dict[str, Workspace] = {}
        for cls in WORKSPACES:
            workspace = cls(self.pool)
            self.workspaces[workspace.name] = workspace
            self.tabs.addTab(workspace, workspace.title)
            workspace.load_state(self.state)
            for view in workspace.export_targets()[1:]:  # right click: the view's figure menu
                if view.widget.contextMenuPolicy() != Qt.ContextMenuPolicy.CustomContextMenu:  # (or its own)
                    install_figure_menu(view.widget, lambda w=workspace, v=view.widget: target_of(w, v),
                                        self.figure_request)
        self.tabs.currentChanged.connect(self._workspace_shown)
        self._workspace_shown()
        self.notification = Notification()
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(4, 4, 4, 0)
        layout.addWidget(self.notification)
        layout.addWidget(self.tabs, 1)
        self.setCentralWidget(central)

        self.progress = TaskProgress()
        self.statusBar().addPermanentWidget(self.progress)
        self.progress.cancel_requested.connect(self._cancel_shown_task)
        self.progress.details_requested.connect(lambda: self.tasks_dock.show())
        self._shown_task: TaskHandle | None = None
        self.activity = Activity()
        self._recent: deque[ActivityRow] = deque(maxlen=RECENT_TASKS)  # newest first; stage: how it ended
        self._started_at: dict[int, float] = {}
        self._failures: dict[int, str] = {}
        self.tasks = TaskPanel()
        self.tasks_dock = QDockWidget("Tasks", self)
        self.tasks_dock.setObjectName("window/tasks")
        self.tasks_dock.setWidget(self.tasks)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.tasks_dock)
        self.tasks_dock.hide()  # opened from the status bar's Tasks button or View > Tasks
        self.tasks.cancel_requested.connect(self._cancel_task)
        self._tick = QTimer(self)  # rates and times left move on while a task says nothing new
        self._tick.setInterval(1000)
        self._tick.timeout.connect(self._update_progress)
        # Progress is redrawn at most every PROGRESS_MS, not at every event of every task: hundreds of overlay and
        # thumbnail tasks starting and ending at once redrew the task table hundreds of times (1.4 s at a stretch)
        self._progress_due = QTimer(self)
        self._progress_due.setSingleShot(True)
        self._progress_due.setInterval(PROGRESS_MS)
        self._progress_due.timeout.connect(self._update_progress)
        self.pool.started.connect(self._progress_changed)
        self.pool.progress.connect(self._progress_changed)
        self.pool.finished.connect(self._progress_changed)
        self.pool.failed.connect(self._task_failed)
        self.pool.notice.connect(self.notify)  # the compute kernel died and was restarted: what happened, one line
        self.pool.started.connect(lambda handle: self._started_at.setdefault(handle.id, time.monotonic()))

        self.menus = Menus(self)
        self._restore_settings()
        self._note_unused_settings()
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._system_scheme_changed)

    # -- opening --------------------------------------------------------------------------------------------------
    def open(self, request: OpenRequest) -> TaskHandle:
        """Load `request` in a worker; the state changes only when it succeeds (a newer open of the kind wins)."""
        self.source_bar.set_loading(request.kind, request.label)

        def loaded(result: Loaded) -> None:
            self._opened[request.kind] = request
            self.state.set(result)
            if request.spec != DEMO:
                self.settings.add_recent(RecentItem(request.kind, request.to_json(), result.label))
                self.menus.fill_recent()
            self.statusBar().showMessage(f"Opened {request.kind}: {result.label}", 5000)
            self.opened.emit(result)

        def failed(error: TaskError) -> None:
            self.source_bar.show_slot(request.kind)  # back to what is still loaded
            self.open_failed.emit(request, error)

        return self.pool.submit(open_task(request, self.device), name=f"open {request.kind} {request.label}",
                                key=f"open:{request.kind}", executor=executor_for(request),
                                on_result=loaded, on_partial=self.state.set, on_error=failed)

    def open_demo_world(self) -> None:
        for kind in KINDS:
            self.open(OpenRequest(kind, DEMO))

    def open_path(self, path: str | Path) -> TaskHandle | None:
        """Open a dropped file or folder by what it is (a batch output folder, or its status.json, opens in the
        Dissection workspace's Batch tab); unknown things give a notification."""
        folder = batch_folder(path)
        if folder is not None:
            self.open_batch(folder)
            return None
        try:
            request = classify_path(path)
        except InputError as exc:
            self.notify(str(exc))
            return None
        return self.open(request)

    def browse(self, kind: str) -> None:
        """Ask for a file or folder of `kind` and open it."""
        request = ask_request(kind, self, self.settings)
        if request is not None:
            self.open(request)

    def open_batch(self, folder: str | Path) -> None:
        """Browse a `probescope batch` output folder in the Dissection workspace."""
        self.set_workspace("dissection")
        self.workspaces["dissection"].open_batch(folder)

    def browse_batch(self) -> None:
        self.set_workspace("dissection")
        self.workspaces["dissection"].open_batch_dialog()

    # -- workspaces -----------------------------------------------------------------------------------------------
    def current_workspace(self) -> Workspace:
        return self.tabs.currentWidget()

    def _workspace_shown(self) -> None:
        self.pool.foreground = self.current_workspace().name  # its compute tasks go first

    def set_workspace(self, name: str) -> None:
        if name not in self.workspaces:
            raise InputError(f"unknown workspace {name!r} (choose one of {', '.join(self.workspaces)})")
        self.tabs.setCurrentWidget(self.workspaces[name])

    # -- export ---------------------------------------------------------------------------------------------------
    def export_figure(self, view: ExportTarget | None = None) -> None:
        """The export dialog, on `view` or else on the view that has the keyboard focus (the panel in use)."""
        targets = self.current_workspace().export_targets()
        focus = view.widget if view is not None else QApplication.focusWidget()
        current = next((k for k, target in reversed(list(enumerate(targets)))
                        if focus is not None and (focus is target.widget or target.widget.isAncestorOf(focus))), 0)
        dialog = ExportDialog(targets, self.settings, self, current)
        dialog.exported.connect(lambda path: self.statusBar().showMessage(f"Exported {path}", 5000))
        dialog.failed.connect(self.notify)
        dialog.show()

    def figure_request(self, view: ExportTarget, preset: Preset | None, copy: bool) -> None:
        """A view's figure menu: the export dialog, a paper preset (asks where), or the clipboard."""
        defaults = self.settings.export_defaults()
        if copy:
            with figure_colours(defaults.follow_theme):
                copy_to_clipboard(view.widget, margin_free=defaults.margin_free)
            self.statusBar().showMessage(f"Copied {view.name} to the clipboard", 5000)
        elif preset is None:
            self.export_figure(view)
        else:
            name = file_name(view, preset, defaults.format)
            path, _ = QFileDialog.getSaveFileName(self, f"Export {view.name} for a {preset.name.lower()}",
                                                  str(default_folder(defaults) / name), FILTERS)
            if path:
                try:
                    export_preset(view.widget, path, preset, margin_free=defaults.margin_free,
                                  follow_theme=defaults.follow_theme)
                except (InputError, OSError) as exc:
                    self.notify(str(exc))
                    return
                self.settings.set_export_defaults(replace(defaults, format=format_of(path),
                                                          folder=str(Path(path).parent)))
                self.statusBar().showMessage(f"Exported {path}", 5000)

    def copy_figure(self) -> None:
        self.figure_request(self.current_workspace().export_targets()[0], None, True)

    # -- notifications and progress ---------------------------------------------------------------------------------
    def notify(self, message: str, details: str = "") -> None:
        self.notification.show_message(message, details)

    def _task_failed(self, handle: TaskHandle, error: TaskError) -> None:
        self._failures[handle.id] = error.message
        if error.untrusted is not None and self.ask_trust:
            refused = error.untrusted
            waiting = self._asking.setdefault(refused.sha256, [])
            waiting.append(handle)
            if len(waiting) == 1:  # the first task stopped at this file asks; the others wait for its answer
                QTimer.singleShot(0, lambda: self._ask_trust(refused))
            return
        self.notify(error.message, error.details)

    # -- trust ----------------------------------------------------------------------------------------------------
    def _update_trust(self) -> None:
        """What tasks may load from now on: the session's trust and every hash trusted in the settings."""
        self.pool.trust = Trust(self.session_trust.hashes | self.settings.trusted_hashes(),
                                self.session_trust.everything)

    def _ask_trust(self, refused: UntrustedFile) -> None:
        """Ask about `refused`; trusted, remember its hash and run the tasks that stopped at it again."""
        earlier = self.settings.trusted_at(str(refused.path))
        changed_from = earlier.sha256 if earlier is not None and earlier.sha256 != refused.sha256 else None
        trusted = TrustDialog(refused, changed_from, self).exec() == TrustDialog.DialogCode.Accepted
        waiting = self._asking.pop(refused.sha256, [])
        if not trusted:
            self.notify(f"Not opened: {refused.path} was not trusted to run code")
            return
        self.settings.trust_file(TrustedFile(refused.sha256, str(refused.path), refused.kind))
        self._update_trust()
        for handle in waiting:
            if not self.pool.is_shut_down:
                self.pool.resubmit(handle)

    def forget_trusted_files(self) -> None:
        self.settings.forget_trusted_files()
        self._update_trust()
        self.statusBar().showMessage("Trusted files forgotten: files that run code are asked about again", 5000)

    def _progress_changed(self, *args) -> None:
        if args and isinstance(args[0], TaskHandle) and args[0].done:
            self._remember(args[0])
            self.activity.forget(args[0].id)
        if not self._progress_due.isActive():
            self._progress_due.start()

    def _remember(self, handle: TaskHandle) -> None:
        """A finished task that ran long enough to be seen stays in the Tasks panel, saying how it ended."""
        started = self._started_at.pop(handle.id, None)
        failure = self._failures.pop(handle.id, None)
        if started is None or time.monotonic() - started < RECENT_AFTER_S:
            return
        row = self.activity.row(handle.id, handle.name, handle.progress)
        ended = "cancelled" if handle.cancelled else f"failed: {failure}" if failure is not None else "done"
        fraction = 1.0 if ended == "done" else row.fraction
        self._recent.appendleft(ActivityRow(row.key, row.name, ended, fraction, row.done, "", ""))

    def _update_progress(self) -> None:
        active = [h for h in self.pool.active() if not h.cancelled]
        rows = [self.activity.row(h.id, h.name, h.progress) for h in active]
        self.tasks.show_rows([astuple(r) for r in rows], [astuple(r) for r in self._recent])
        if not active:
            self._shown_task = None
            self.progress.clear()
            self._tick.stop()
            return
        if not self._tick.isActive():
            self._tick.start()
        handle, row = active[-1], rows[-1]
        self._shown_task = handle
        left = f" · {row.left} left" if row.left else ""
        self.progress.show_progress(row.stage + left, row.fraction, len(active))

    def _cancel_task(self, key: int) -> None:
        for handle in self.pool.active():
            if handle.id == key:
                handle.cancel()
                self.statusBar().showMessage(f"Cancelled {handle.name}", 3000)
        self._update_progress()

    def _cancel_shown_task(self) -> None:
        if self._shown_task is not None:
            self._shown_task.cancel()
            self.statusBar().showMessage(f"Cancelled {self._shown_task.name}", 3000)
            self._update_progress()

    # -- menus, settings ---------------------------------------------------------------------------------------------
    def command_actions(self) -> list[QAction]:
        return list(self.menus.actions)

    @property
    def recent_menu(self):
        return self.menus.recent

    def show_guide(self, page: str = "README.md") -> GuideWindow:
        if self._guide is None:
            self._guide = GuideWindow(self)
        self._guide.show_page(page)
        return self._guide

    def show_shortcuts(self) -> ShortcutsDialog:
        dialog = ShortcutsDialog(self.command_actions(), self)
        dialog.show()
        return dialog

    def show_command_palette(self) -> CommandPalette:
        if self._palette is not None:
            self._palette.close()
        self._palette = CommandPalette(self.command_actions(), self, self.current_workspace().palette_items)
        self._palette.show()
        self._palette.search.setFocus()
        return self._palette

    def set_theme(self, theme: str) -> None:
        self.settings.set_theme(theme)
        apply_theme(QApplication.instance(), theme)

    def _system_scheme_changed(self, *_args) -> None:
        if self.settings.theme() == "system":
            apply_theme(QApplication.instance(), "system")

    def set_device(self, device: str) -> None:
        """Switch the compute device; the loaded model (and a generator) are reloaded there."""
        self.device = device
        self.settings.set_device(device)
        for request in list(self._opened.values()):
            if executor_for(request) == COMPUTE:
                self.open(request)

    def _restore_settings(self) -> None:
        geometry = self.settings.geometry()
        restored = geometry is not None and self.restoreGeometry(geometry)
        if geometry is not None and not restored:
            self.settings.note("window/geometry", bytes(geometry.data()), "not a window geometry Qt can restore; the "
                               "window fits the screen")
        if not restored:
            self.fit_screen()
        for workspace in self.workspaces.values():
            workspace.area.restore(self.settings.panel_layout(workspace.name))
        last = self.settings.last_workspace(list(self.workspaces))
        if last is not None:
            self.set_workspace(last)

    def _note_unused_settings(self) -> None:
        """Saved values that were not used (the wrong type, a device this machine lacks), as one notification."""
        notes = self.settings.check_all(list(self.workspaces))
        if notes:
            more = f" (and {len(notes) - 1} more: see Details)" if len(notes) > 1 else ""
            self.notify(notes[0] + more, "\n".join(notes))

    def fit_screen(self) -> None:
        """The first window: 90% of the screen's available area, centred (the views are made for room)."""
        screen = self.screen() or QGuiApplication.primaryScreen()
        available = screen.availableGeometry()
        size = available.size() * 0.9
        self.resize(size)
        self.move(available.center() - self.rect().center())

    def reset_layout(self) -> None:
        """Every panel of the current workspace back where it started, shown."""
        self.current_workspace().area.reset()

    def save_settings(self) -> None:
        self.settings.set_geometry(self.saveGeometry())
        for workspace in self.workspaces.values():
            self.settings.set_panel_layout(workspace.name, workspace.area.saveState())
        self.settings.set_last_workspace(self.current_workspace().name)
        self.settings.sync()

    # -- events ---------------------------------------------------------------------------------------------------
    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802
        self.save_settings()
        self.pool.shutdown()
        super().closeEvent(event)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802
        if event.mimeData().hasUrls() and all(url.isLocalFile() for url in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802
        for url in event.mimeData().urls():
            self.open_path(url.toLocalFile())
        event.acceptProposedAction()


def target_of(workspace: Workspace, widget: QWidget) -> ExportTarget:
    """The export target of `workspace` that is `widget`, as it is now (what it shows names its file)."""
    return next(t for t in workspace.export_targets() if t.widget is widget)
