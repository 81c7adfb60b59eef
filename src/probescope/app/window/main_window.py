"""The main window: the three workspaces as tabs, menus, the bar of loaded inputs, progress and notifications.

It owns the `AppState`, the `WorkerPool` and the `Settings`; workspaces bind to the state and submit their own
tasks. Opening anything (menu, recent item, drag and drop, command line) goes through `open()`, which loads in a
worker and updates the state only on success, so a failed open leaves everything on screen as it was.

A task that stops at a file that runs code when loaded (TorchScript, a whole-model pickle; whether opened here, by a
workspace, or named in a saved batch result) makes the window ask the user (TrustDialog, with the file's SHA-256);
trusted, the hash is remembered in the settings and the same task runs again. Nothing else grants that trust.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer, Signal
from PySide6.QtGui import QCloseEvent, QDragEnterEvent, QDropEvent, QGuiApplication, QShowEvent
from PySide6.QtWidgets import QApplication, QDockWidget, QMainWindow, QTabWidget, QVBoxLayout, QWidget

from probescope.app.compute.compute_device import ComputeDevice
from probescope.app.compute.task_monitor import TaskMonitor
from probescope.app.compute.workers import TaskHandle, WorkerPool
from probescope.app.figures.figure_actions import FigureActions, target_of
from probescope.app.figures.figure_menu import install_figure_menu
from probescope.app.window.layout_question import ask_layout
from probescope.app.window.menus import Menus
from probescope.app.window.open_dialogs import ask_request
from probescope.app.window.saved_settings import DEVICE, THEME, RecentItem, Settings
from probescope.app.window.source_bar import SourceBar
from probescope.app.window.state import AppState
from probescope.app.window.theme import apply_theme
from probescope.app.window.trust_gate import TrustGate
from probescope.app.window.window_layout import WindowLayout
from probescope.app.window.workspace import Workspace
from probescope.app.window.workspaces import WORKSPACES
from probescope.core.errors import InputError
from probescope.core.models.architecture_names import architecture_names
from probescope.core.trust import NO_TRUST, Trust
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
from probescope.jobs.kernel.spec import KernelSpec, as_spec, on_device
from probescope.jobs.protocol import COMPUTE, IO, TaskError
from probescope.widgets.identifiers import whole_items_everywhere
from probescope.widgets.notification import Notification
from probescope.widgets.task_panel import TaskPanel
from probescope.widgets.task_progress import TaskProgress


class MainWindow(QMainWindow):
    """`opened(Loaded)` after an open succeeds; `open_failed(OpenRequest, TaskError)` after it fails.

    `trust` is this session's extra trust (the command line's --trust); `ask_trust` False (screenshot runs) reports
    an untrusted file as a failure instead of asking."""

    opened = Signal(object)
    open_failed = Signal(object, object)

    def __init__(self, settings: Settings, device: str | None = None, parent: QWidget | None = None, *,
                 trust: Trust = NO_TRUST, ask_trust: bool = True, kernel: str | KernelSpec = "thread"):
        super().__init__(parent)
        self.setWindowTitle("probescope")
        self.setAcceptDrops(True)
        self.settings = settings
        # a kernel's machine has its own devices: the saved one is checked when the kernel has started
        self.state = AppState(self)
        self.state.device = device or settings.get(DEVICE, here=as_spec(kernel).kind == "thread")
        # `kernel`: where compute Jobs run (jobs.kernel.spec); a Ray kernel asks for a GPU when computing on CUDA
        self.pool = WorkerPool(parent=self, kernel=on_device(as_spec(kernel), self.state.device))
        self.compute = ComputeDevice(self.state, settings, self.notify, self._reopen_compute_inputs)
        self.pool.devices_known.connect(self.compute.check)
        self.trust = TrustGate(self, self.pool, settings, trust, ask_trust, self.statusBar().showMessage,
                               self.notify)  # before any task: they load with its trust
        self.figures = FigureActions(self, settings, self.current_workspace, self.statusBar().showMessage,
                                     self.notify)
        self._opened: dict[str, OpenRequest] = {}  # what each loaded input was opened from
        self._asked: dict[str, OpenRequest] = {}  # what each input was last asked to open from
        self._deferred: list[str] = []  # demo inputs opened once the workspace on screen shows its first results

        self.source_bar = SourceBar(self.state, settings, self)
        self.addToolBar(self.source_bar)
        self.source_bar.open_requested.connect(self.open)
        self.source_bar.browse_requested.connect(self.browse)
        self.source_bar.layout_requested.connect(lambda layer: ask_layout(self, layer))

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
                                        self.figures.figure_request)
        self.tabs.currentChanged.connect(self._workspace_shown)
        self._workspace_shown()
        self.notification = Notification()
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(4, 4, 4, 0)
        layout.addWidget(self.notification)
        layout.addWidget(self.tabs, 1)
        self.setCentralWidget(central)
        whole_items_everywhere(self)  # no combo box measures its items once only: those that come later are cut

        self.progress = TaskProgress()
        self.statusBar().addPermanentWidget(self.progress)
        self.progress.details_requested.connect(self.toggle_tasks)
        self.tasks = TaskPanel()
        self.tasks_dock = QDockWidget("Tasks", self)
        self.tasks_dock.setObjectName("window/tasks")
        self.tasks_dock.setWidget(self.tasks)
        self.addDockWidget(Qt.DockWidgetArea.BottomDockWidgetArea, self.tasks_dock)
        self.tasks_dock.hide()  # opened and closed by the status bar's Tasks button, View > Tasks, Ctrl+Shift+T
        self.monitor = TaskMonitor(self.pool, self.progress, self.tasks, self.statusBar().showMessage, self)
        self.pool.failed.connect(self._task_failed)
        self.pool.notice.connect(self.notify)  # the compute kernel died and was restarted: what happened, one line

        self._architectures: dict[str, tuple[str, ...]] | None = None  # the Open Model dialog's, once listed
        self.menus = Menus(self)
        self.arrangement = WindowLayout(self, settings, self.workspaces)
        self.arrangement.restore(self.set_workspace)
        unused = self.arrangement.unused_settings()
        if unused is not None:
            self.notify(*unused)
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._system_scheme_changed)

    # -- opening --------------------------------------------------------------------------------------------------
    def open(self, request: OpenRequest) -> TaskHandle:
        """Load `request` in a worker; the state changes only when it succeeds (a newer open of the kind wins)."""
        self.source_bar.set_loading(request.kind, request.label)
        self._asked[request.kind] = request

        def loaded(result: Loaded) -> None:
            self._opened[request.kind] = request
            self.state.set(result)
            if request.spec != DEMO:
                self.settings.recent.add(RecentItem(request.kind, request.to_json(), result.label))
                self.menus.fill_recent()
            self.statusBar().showMessage(f"Opened {request.kind}: {result.label}", 5000)
            self.opened.emit(result)

        def failed(error: TaskError) -> None:
            self.source_bar.show_slot(request.kind)  # back to what is still loaded
            self.open_failed.emit(request, error)

        task = open_task(request, self.state.device)  # (a compute Job loads where compute runs: its executor says so)
        return self.pool.submit(task, name=f"open {request.kind} {request.label}", key=f"open:{request.kind}",
                                executor=COMPUTE if task.compute else IO,
                                on_result=loaded, on_partial=self.state.set, on_error=failed)

    def open_demo_world(self) -> None:
        """The demo world's inputs: those the workspace on screen needs at once, the others once it shows its first
        results (or a workspace that needs them is shown, or an input it needs fails to open), so no other
        workspace's work competes with its first results on a busy machine."""
        first = self.current_workspace()
        now = [kind for kind in KINDS if kind in first.needs]
        self._deferred = [kind for kind in KINDS if kind not in now]
        for kind in now:
            self.open(OpenRequest(kind, DEMO))
        if self._deferred:
            first.first_results.connect(self._open_deferred)
            self.open_failed.connect(self._open_deferred)

    def _open_deferred(self, *_args: object, needed: tuple[str, ...] | None = None) -> None:
        """Open the deferred demo inputs (only those in `needed` when given)."""
        kinds = [kind for kind in self._deferred if needed is None or kind in needed]
        self._deferred = [kind for kind in self._deferred if kind not in kinds]
        for kind in kinds:
            if kind not in self._asked:  # (the user may have opened another since)
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
        """Ask for a file or folder of `kind` and open it. The model dialog's architecture names are listed first,
        in a pool thread (a child interpreter lists them once: the window never imports torch, timm or OpenCLIP)."""
        if kind == "model" and self._architectures is None:
            self.pool.submit(lambda _ctx: architecture_names(), name="listing the model architectures",
                             key="window/architectures", executor=IO, on_result=self._architectures_listed)
            return
        request = ask_request(kind, self, self.settings, self._architectures)
        if request is not None:
            self.open(request)

    def _architectures_listed(self, names: dict[str, tuple[str, ...]]) -> None:
        self._architectures = names
        self.browse("model")

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
        workspace = self.current_workspace()
        self.pool.foreground = workspace.name  # its compute tasks go first
        if self._deferred:
            self._open_deferred(needed=workspace.needs)
        # the keys browse its items, never the layer box (a layer is chosen); once the switch is over (hiding the
        # previous page moves the focus on to the tab bar)
        QTimer.singleShot(0, workspace.focus_view.setFocus)

    def set_workspace(self, name: str) -> None:
        if name not in self.workspaces:
            raise InputError(f"unknown workspace {name!r} (choose one of {', '.join(self.workspaces)})")
        self.tabs.setCurrentWidget(self.workspaces[name])

    # -- notifications and progress ---------------------------------------------------------------------------------
    def notify(self, message: str, details: str = "") -> None:
        self.notification.show_message(message, details)

    def _task_failed(self, handle: TaskHandle, error: TaskError) -> None:
        self.monitor.failed(handle, error.message)
        if not self.trust.stopped(handle, error):
            self.notify(error.message, error.details)

    # -- menus, settings ---------------------------------------------------------------------------------------------
    def toggle_tasks(self) -> None:
        """The Tasks panel shown, or hidden when it is shown (View > Tasks, Ctrl+Shift+T, the status bar's button)."""
        self.tasks_dock.setVisible(not self.tasks_dock.isVisible())

    def set_theme(self, theme: str) -> None:
        self.settings.set(THEME, theme)
        apply_theme(QApplication.instance(), theme)

    def _system_scheme_changed(self, *_args) -> None:
        if self.settings.get(THEME) == "system":
            apply_theme(QApplication.instance(), "system")

    def _reopen_compute_inputs(self) -> None:
        """The inputs loaded on the compute device, and those still loading, opened again on the one set now."""
        loading = {kind: r for kind, r in self._asked.items() if self.pool.is_running(f"open:{kind}")}
        for request in list({**self._opened, **loading}.values()):
            if executor_for(request) == COMPUTE:
                self.open(request)

    def reset_layout(self) -> None:
        """Every panel of the current workspace back where it started, shown."""
        self.current_workspace().area.reset()

    # -- events ---------------------------------------------------------------------------------------------------
    def showEvent(self, event: QShowEvent) -> None:  # noqa: N802
        """The shown workspace's items get the keyboard when the window first appears (a widget hidden when told to
        take the focus does not keep it: Qt gives it to the first widget of the tab chain, the source bar's)."""
        super().showEvent(event)
        if not event.spontaneous():
            self.current_workspace().focus_view.setFocus()

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802
        self.arrangement.save(self.current_workspace().name)
        self.pool.shutdown()
        super().closeEvent(event)

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:  # noqa: N802
        if event.mimeData().hasUrls() and all(url.isLocalFile() for url in event.mimeData().urls()):
            event.acceptProposedAction()

    def dropEvent(self, event: QDropEvent) -> None:  # noqa: N802
        for url in event.mimeData().urls():
            self.open_path(url.toLocalFile())
        event.acceptProposedAction()

