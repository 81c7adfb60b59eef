"""The window's side of the compute kernel (`probescope.jobs.kernel`): it starts the kernel when the first Job comes,
sends it Jobs and cancels, and turns what comes back into Qt signals in the GUI thread. `KernelSide` is what every
kind of kernel shares; `KernelClient` starts the kernel as a process of this machine (`app.ray_kernel_client`: as a
Ray actor on a cluster).

When the kernel dies (killed, a native crash, out of memory) the window stays: the client says in one line what
happened (`notice`), starts a new kernel and sends it the interrupted tasks again, whose models the new kernel loads
again on demand. A task that was running each time the kernel died twice fails with that line instead of being
sent a third time; no task is dropped silently. A task the user cancelled that has not stopped within
`cancel_deadline_s` (it is inside a long C call) is stopped by restarting the kernel, and the notice says so; a
superseded one (a newer request of its key) is left to stop at its next step.

This module and what it imports stay free of torch: the window needs no torch to use a kernel.
"""

from __future__ import annotations

import atexit
import multiprocessing.util  # noqa: F401  (its exit handler, which joins child processes, registered before ours)
import signal
import time
import weakref
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

from PySide6.QtCore import QObject, QThread, QTimer, Signal

from probescope.app.compute.threads import run_named
from probescope.core.trust import Trust
from probescope.jobs.kernel import local
from probescope.jobs.kernel.messages import ENDS, Kind, Ready, Submit, protocol_problem
from probescope.jobs.kernel.process import EXIT_OUT_OF_MEMORY, KernelConfig
from probescope.jobs.kernel.transport import Channel, Traffic, Undecodable, sweep
from probescope.jobs.protocol import Job, TaskError, describe_error
from probescope.jobs.session import Session

CANCEL_DEADLINE_S = 0.08  # then killed: its cancel has taken effect within 100 ms (measured: benchmarks/kernel_bench)
RUNS = 2  # times a task may be running when the kernel dies before it fails
STARTS = 2  # kernels in a row that may die before they are ready before the waiting tasks fail
_RUNNING: weakref.WeakSet[KernelClient] = weakref.WeakSet()  # clients whose kernel may be running, stopped at exit


@dataclass
class _Sent:
    job: Job
    name: str
    executor: str
    key: str | None
    trust: Trust
    started: bool = False
    interrupted: int = 0
    cancelled: bool = False


class _Reader(QThread):
    """Reads the connection; each message reaches the client through a queued signal, the end as ('died', 0, what
    the connection said of it, or None). Ends are also noted in `ended` at once, so a cancel's deadline sees them
    before the GUI thread has."""

    message = Signal(object)

    def __init__(self, channel: Channel, ended: set[int], parent: QObject) -> None:
        super().__init__(parent)
        self.setObjectName("probescope-kernel-reader")
        self._channel = channel
        self._ended = ended

    def run(self) -> None:
        run_named("probescope-kernel-reader", self._read)

    def _read(self) -> None:
        while True:
            try:
                message = self._channel.receive()
            except (EOFError, OSError) as exc:
                self.message.emit((Kind.DIED, 0, str(exc) or None))
                return
            except Undecodable as exc:
                message = (Kind.ERROR, exc.task_id, describe_error("reading a task's result from the compute kernel",
                                                                exc))
            if message[0] in ENDS:
                self._ended.add(message[1])
            self.message.emit(message)


class KernelSide(QObject):
    """Signals (GUI thread): `event(task id, kind, payload)` with the kinds of `jobs.runner.run_task` (plus
    'progress'), `notice(line)` when the kernel died or was restarted, `ready(seconds)` when a kernel started
    (`devices` is then its machine's compute devices: the window knows them only from the kernel).

    The bookkeeping of every kind of kernel: what was sent, cancels and their deadline, restarts and their notice.
    A kind starts its kernel (`_launch`: the kernel and the connection to it), kills it (`_kill`), stops it
    (`_stop`) and tells, once it is gone, why (`_reap`). `LOCAL`: the kernel is on this machine (transport.Channel).
    """

    event = Signal(int, str, object)
    notice = Signal(str)
    ready = Signal(float)
    LOCAL = True

    def __init__(self, config: KernelConfig | None, cancel_deadline_s: float, parent: QObject | None) -> None:
        super().__init__(parent)
        self.config = config or KernelConfig()
        self.cancel_deadline_s = cancel_deadline_s
        self._sent: dict[int, _Sent] = {}
        self._ended: set[int] = set()
        self._foreground = ""
        self._kernel: Any = None  # the kernel running now (what `_launch` made), None before the first Job
        self._pid: int | None = None
        self._channel: Channel | None = None
        self._reader: _Reader | None = None
        self._cause = ""  # why the kernel is going down, when this side knows before it is gone
        self._failed_starts = 0
        self._ready = False  # the kernel running now has started (a cancel's deadline counts from then)
        self._refusing = False  # the kernel running now speaks another protocol: nothing it sends is read
        self._deadlines: list[int] = []  # tasks cancelled before it had
        self._started_at = 0.0
        self._closed = False
        self.restarts = 0
        self.devices: list[str] | None = None  # the kernel's compute devices, once one has started
        self.session = Session()  # where what the kernel sends by name is found (the pool gives its own)
        self.sent: defaultdict[str, Traffic] = defaultdict(Traffic)  # the traffic with every kernel so far
        self.received: defaultdict[str, Traffic] = defaultdict(Traffic)

    @property
    def pid(self) -> int | None:
        """The kernel's process id (on the machine it runs on), once it is ready."""
        return self._pid

    def submit(self, task_id: int, job: Job, *, name: str, executor: str, key: str | None, trust: Trust) -> None:
        self._sent[task_id] = _Sent(job, name, executor, key, trust)
        if self._kernel is None:
            self._start()
        else:
            self._send_task(task_id)

    def cancel(self, task_id: int, restart_if_stuck: bool = True) -> None:
        """Ask the kernel to stop the task; with `restart_if_stuck`, restart the kernel if it has not stopped by
        the deadline."""
        sent = self._sent.get(task_id)
        if sent is None or sent.cancelled:
            return
        sent.cancelled = True
        self._send((Kind.CANCEL, task_id, None))
        if not restart_if_stuck:
            return
        if self._ready:
            self._start_deadline(task_id)
        else:
            self._deadlines.append(task_id)

    def _start_deadline(self, task_id: int) -> None:
        kernel = self._kernel
        QTimer.singleShot(round(self.cancel_deadline_s * 1000), lambda: self._check_cancelled(task_id, kernel))

    def set_foreground(self, group: str) -> None:
        self._foreground = group
        if self._kernel is not None:
            self._send((Kind.FOREGROUND, 0, group))

    def kill(self, cause: str) -> None:
        """Kill the kernel (it restarts), saying `cause` as what happened."""
        if self._kernel is not None and self._alive():
            self._cause = self._cause or cause
            self._kill()

    def shutdown(self, timeout: float = 5.0) -> None:
        """Stop the kernel (asking first, then killing it) and the reader; tasks not ended are the pool's to end."""
        self._closed = True
        if self._kernel is None:
            return
        self._stop(timeout)
        self._channel.close_writer()
        self._reader.wait()
        self._reap(self._kernel, None)

    # -- what each kind of kernel does ------------------------------------------------------------------------
    def _launch(self) -> tuple[Any, Any]:
        """Start a kernel: (the kernel, the connection to it: send_bytes and recv_bytes)."""
        raise NotImplementedError

    def _alive(self) -> bool:
        raise NotImplementedError

    def _kill(self) -> None:
        raise NotImplementedError

    def _stop(self, timeout: float) -> None:
        """Ask the kernel to stop, and end it if it has not within `timeout` seconds."""
        raise NotImplementedError

    def _reap(self, kernel: Any, said: str | None) -> str:
        """Once `kernel` is gone (`said`: what its connection said): clean up after it and tell how it ended, in
        the words of the notice ("was killed ...")."""
        raise NotImplementedError

    # -- the kernel -------------------------------------------------------------------------------------------
    def _start(self) -> None:
        self._started_at = time.monotonic()
        self._kernel, conn = self._launch()
        # the GUI thread only pickles: a writer thread waits for the connection (full while a kernel starts)
        self._channel = Channel(conn, self.sent, self.received, local=self.LOCAL, writer=True, session=self.session)
        self._ready = False
        self._refusing = False
        self._pid = None
        self._ended.clear()
        self._reader = _Reader(self._channel, self._ended, self)
        self._reader.message.connect(self._on_message)
        self._reader.start()
        if self._foreground:
            self._send((Kind.FOREGROUND, 0, self._foreground))
        for task_id in list(self._sent):
            self._send_task(task_id)

    def _send_task(self, task_id: int) -> None:
        sent = self._sent[task_id]
        try:
            self._channel.send((Kind.SUBMIT, task_id, Submit(sent.job, sent.name, sent.executor, sent.key, sent.trust)))
        except (OSError, EOFError):
            pass  # the kernel is going down: the task is sent again to the next one
        except Exception as exc:  # noqa: BLE001  (a Job that cannot be pickled fails as a task)
            del self._sent[task_id]
            error = describe_error(f"sending {sent.name} to the compute kernel", exc)
            QTimer.singleShot(0, lambda: self.event.emit(task_id, Kind.ERROR, error))

    def _send(self, message: tuple) -> None:
        try:
            self._channel.send(message)
        except (OSError, EOFError):
            pass  # the kernel is going down; its death is handled when the reader sees it

    def _check_cancelled(self, task_id: int, kernel: Any) -> None:
        sent = self._sent.get(task_id)
        if sent is not None and task_id not in self._ended and kernel is self._kernel and not self._closed:
            ms = round(self.cancel_deadline_s * 1000)
            self.kill(f"did not stop {sent.name} within {ms} ms of its cancel (inside a long call)")

    def _on_message(self, message: tuple) -> None:
        kind, task_id, payload = message
        if self._refusing and kind != Kind.DIED:
            return  # (what it sent before its kill, queued already: a result read by another protocol)
        if kind == Kind.READY:
            if self._refused(payload):
                return
            self._ready = True
            self._pid = payload.pid
            self._failed_starts = 0
            for waiting in self._deadlines:
                self._start_deadline(waiting)
            self._deadlines.clear()
            self.devices = list(payload.devices)
            self.ready.emit(time.monotonic() - self._started_at)
            return
        if kind == Kind.FAULT:
            self._cause = payload
            return
        if kind == Kind.DIED:
            self._died(payload)
            return
        sent = self._sent.get(task_id)
        if sent is None:
            return  # a task this side has ended already
        if kind == Kind.STARTED:
            sent.started = True
        elif kind in ENDS:
            del self._sent[task_id]
            self._ended.discard(task_id)
        self.event.emit(task_id, kind, payload)

    def _refused(self, ready: Ready) -> bool:
        """A kernel that speaks another protocol is killed, its cause said: it counts as a kernel that could not
        start, so after STARTS of them the tasks fail with that line (`_died`)."""
        problem = protocol_problem(ready)
        if problem is not None:
            self._cause, self._refusing = problem, True
            self._kill()
        return problem is not None

    def _died(self, said: str | None) -> None:
        self._channel.close_writer()  # its connection is gone: the writer ends at once
        self._reader.wait()
        self._reader.deleteLater()  # a new kernel gets a new reader
        ended = self._reap(self._kernel, said)
        if self._closed:
            return
        cause = self._cause or ended
        self._cause = ""
        self._failed_starts += not self._ready
        if self._failed_starts >= STARTS:  # it cannot start (broken install, no memory): the tasks fail, said so
            failed = [(task_id, Kind.ERROR, TaskError(f"{sent.name} failed: the compute kernel could not start (it "
                                                   f"{cause})", cause, False)) for task_id, sent in self._sent.items()]
            self._sent.clear()
            self._kernel = None  # the next Job tries again
            self._failed_starts = 0
            self.notice.emit(f"The compute kernel could not start (it {cause}).")
            self._end(failed)
            return
        running = [sent.name for sent in self._sent.values() if sent.started and not sent.cancelled]
        ends: list[tuple[int, str, Any]] = []
        for task_id, sent in list(self._sent.items()):
            sent.interrupted += sent.started
            if sent.cancelled:
                ends.append((task_id, Kind.CANCELLED, None))
            elif sent.interrupted >= RUNS:
                ends.append((task_id, Kind.ERROR, TaskError(f"{sent.name} failed: the compute kernel {cause} each time "
                                                         "it ran", cause, False)))
            else:
                sent.started = False
                continue
            del self._sent[task_id]
        self.restarts += 1
        self._start()
        again = len(self._sent)
        line = f"The compute kernel {cause}" + (f" while running {', '.join(running)}" if running else "")
        line += "; restarted it" + (f" and running {again} interrupted task{'s' * (again != 1)} again" if again
                                    else "") + "."
        self.notice.emit(line)
        self._end(ends)

    def _end(self, ends: list[tuple[int, str, Any]]) -> None:
        for task_id, kind, payload in ends:
            self.event.emit(task_id, kind, payload)


class KernelClient(KernelSide):
    """The kernel as a process of this machine (multiprocessing's spawn, a pipe); see `KernelSide`."""

    def __init__(self, config: KernelConfig | None = None, cancel_deadline_s: float = CANCEL_DEADLINE_S,
                 parent: QObject | None = None) -> None:
        super().__init__(config, cancel_deadline_s, parent)

    @property
    def process(self) -> Any:
        """The kernel process running now (multiprocessing's), None before the first Job."""
        return self._kernel

    @property
    def pid(self) -> int | None:
        return None if self._kernel is None else self._kernel.pid

    def _launch(self) -> tuple[Any, Any]:
        process, conn = local.take_early(self.config) or local.spawn(self.config)
        _RUNNING.add(self)
        return process, conn

    def _alive(self) -> bool:
        return self._kernel.is_alive()

    def _kill(self) -> None:
        self._kernel.kill()

    def _stop(self, timeout: float) -> None:
        self._send((Kind.STOP, 0, None))
        self._kernel.join(timeout)
        if self._kernel.is_alive():
            self._kernel.kill()
            self._kernel.join()
        _RUNNING.discard(self)

    def _reap(self, kernel: Any, said: str | None) -> str:
        kernel.join(5)
        sweep(kernel.pid)  # what it sent and this side never read
        return _exit_cause(kernel.exitcode)


@atexit.register  # after multiprocessing's exit handler, so it runs before it
def _stop_at_exit() -> None:
    """At the window's exit (the pool not shut down): each kernel still running is told to stop, then killed."""
    for client in list(_RUNNING):
        process = client.process
        if process is not None and process.is_alive():
            client._send((Kind.STOP, 0, None))  # noqa: SLF001
            process.join(2)
            if process.is_alive():
                process.kill()


def _exit_cause(code: int | None) -> str:
    """What a kernel's exit status says happened to it, in the words of the notice."""
    if code == -signal.SIGKILL:
        return "was killed (SIGKILL: out of memory, or kill -9)"
    if code is not None and code < 0:
        return f"crashed ({signal.Signals(-code).name})"
    if code == EXIT_OUT_OF_MEMORY:
        return "ran out of memory"
    return f"exited (status {code})"

