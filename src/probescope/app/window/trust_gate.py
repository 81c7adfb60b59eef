"""Files that run code, asked about once: a task stopped at an untrusted file asks the user (the first such task
asks, the others stopped at the same file wait for its answer); trusted, the file's hash is remembered in the
settings and every task that stopped at it runs again."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QWidget

from probescope.app.compute.workers import TaskHandle, WorkerPool
from probescope.app.window.saved_settings import Settings, TrustedFile
from probescope.app.window.trust_dialog import TrustDialog
from probescope.core.trust import Trust, UntrustedFile
from probescope.jobs.protocol import TaskError


class TrustGate:
    """The trust `pool`'s tasks load with: the session's (`session`, the command line's --trust) and every hash
    trusted in `settings`. `ask` False (screenshot runs: nobody to ask) leaves an untrusted file a failure."""

    def __init__(self, window: QWidget, pool: WorkerPool, settings: Settings, session: Trust, ask: bool,
                 say: Callable[[str, int], None], notify: Callable[[str], None]):
        self._window, self._pool, self._settings, self._session, self._ask = window, pool, settings, session, ask
        self._say, self._notify = say, notify
        self._asking: dict[str, list[TaskHandle]] = {}  # tasks waiting for the answer about a file, by its hash
        self.update()

    def update(self) -> None:
        """What tasks may load from now on."""
        self._pool.trust = Trust(self._session.hashes | self._settings.trusted.hashes(), self._session.everything)

    def stopped(self, handle: TaskHandle, error: TaskError) -> bool:
        """Whether `handle`'s failure is an untrusted file the user is (or will be) asked about."""
        refused = error.untrusted
        if refused is None or not self._ask:
            return False
        waiting = self._asking.setdefault(refused.sha256, [])
        waiting.append(handle)
        if len(waiting) == 1:  # the first task stopped at this file asks; the others wait for its answer
            QTimer.singleShot(0, lambda: self._ask_about(refused))
        return True

    def _ask_about(self, refused: UntrustedFile) -> None:
        earlier = self._settings.trusted.at(str(refused.path))
        changed_from = earlier.sha256 if earlier is not None and earlier.sha256 != refused.sha256 else None
        trusted = TrustDialog(refused, changed_from, self._window).exec() == TrustDialog.DialogCode.Accepted
        waiting = self._asking.pop(refused.sha256, [])
        if not trusted:
            self._notify(f"Not opened: {refused.path} was not trusted to run code")
            return
        self._settings.trusted.add(TrustedFile(refused.sha256, str(refused.path), refused.kind))
        self.update()
        for handle in waiting:
            if not self._pool.is_shut_down:
                self._pool.resubmit(handle)

    def forget(self) -> None:
        self._settings.trusted.forget()
        self.update()
        self._say("Trusted files forgotten: files that run code are asked about again", 5000)
