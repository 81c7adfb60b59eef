"""Background work: one compute thread that owns the model and the GPU, and a small pool that decodes images.

Tasks follow the protocol of `probescope.jobs.protocol`. The runner checks the cancel flag between steps, so every task
stops at its next yield once cancelled. Results reach the GUI thread through a queued Qt signal, so callbacks always
run in the GUI thread, and a cancelled task's callbacks never run: this is the app's one guard against stale
results. Tasks submitted under the same key replace each other (latest request wins), and `cancel_group` drops
every task of a key group at once (a workspace's tasks when its inputs change).

The compute thread runs every task under `torch.inference_mode()` (grad mode is per thread, so it is set there,
not in the GUI thread); torch work is serialised because there is one such thread. The workspace on screen goes
first there (`foreground`): its queued tasks run before the others, and a running task of another workspace steps
aside for them at its next yield (on a fresh launch the Gallery's sample stream and the Similarity fits otherwise
held the thread while the Dissection's first units waited).

Where the computation runs is the pool's `kernel` (`jobs.kernel.spec`): 'thread' (every task in this process, in the
threads above), 'local' (compute Jobs go to the compute kernel, a process of their own: `app.kernel_client`) or a Ray
address (they go to the kernel as an actor on that cluster: `app.ray_kernel_client`); every other task still runs
here. Either way the callbacks, keys, cancel groups and foreground behave the same. The threads are QThreads.

The decode pool is given plain callables, not QRunnable subclasses: PySide keeps a reference from the QThreadPool to
some Python runnables after they have run (measured at 50,000 gallery samples: 486 of them, each holding its task
and a snapshot of the live scores, and the full garbage collections walking them took 50-120 ms holding the GIL).
"""

from __future__ import annotations

import functools
import itertools
import weakref
from collections.abc import Callable
from typing import Any

from PySide6.QtCore import QObject, QThread, QThreadPool, Signal

from probescope.app.compute.gui_collector import GuiThreadCollector
from probescope.app.compute.kernel_client import KernelClient
from probescope.app.compute.ray_kernel_client import RayKernelClient
from probescope.app.compute.threads import lower_thread_priority, run_named
from probescope.core.devices import available_devices
from probescope.core.trust import NO_TRUST, Trust
from probescope.jobs.kernel.spec import KernelSpec, as_spec
from probescope.jobs.protocol import COMPUTE, IO, Job, Progress, Task, TaskContext, TaskError, describe_error
from probescope.jobs.runner import ComputeQueue, in_group, run_task
from probescope.jobs.runner import compute_threads as compute_threads  # where the app and benchmarks find it
from probescope.jobs.session import Session


class TaskHandle:
    """One submitted task. Callbacks run in the GUI thread and never for a cancelled or superseded task."""

    _ids = itertools.count(1)

    def __init__(self, task: Task, name: str, key: str | None, executor: str,
                 on_result: Callable[[Any], None] | None, on_partial: Callable[[Any], None] | None,
                 on_error: Callable[[TaskError], None] | None,
                 emit_progress: Callable[[TaskHandle, Progress], None] | None = None, trust: Trust = NO_TRUST,
                 session: Session | None = None):
        self.id = next(self._ids)
        self.task = task
        self.name = name
        self.key = key
        self.executor = executor
        self.context = TaskContext(None if emit_progress is None else _progress_of(weakref.ref(self), emit_progress),
                                   trust, session)
        self.on_result = on_result
        self.on_partial = on_partial
        self.on_error = on_error
        self.progress: Progress | None = None
        self.done = False
        self.ended_as = "cancelled"  # what a stop is called where it is listed ('paused' for a paused stream)
        self.on_cancel: Callable[[bool], None] | None = None  # set when the task runs in the kernel: tells it

    def cancel(self, superseded: bool = False) -> None:
        """Stop the task at its next step. A task the user cancels that runs in the kernel and is stuck in a long
        call gets the kernel restarted; one `superseded` (a newer request of its key, its workspace's inputs
        changed) is left to stop by itself: its result is dropped either way, and restarting the kernel (torch
        again, the models reloaded) at every unit switch would cost far more than the step it waits for."""
        if not self.context.cancelled() and self.on_cancel is not None:
            self.context.cancel()
            self.on_cancel(not superseded)
        self.context.cancel()

    @property
    def cancelled(self) -> bool:
        return self.context.cancelled()

    def __repr__(self) -> str:
        return f"TaskHandle({self.id}, {self.name!r}, key={self.key!r})"


def _progress_of(handle: weakref.ref[TaskHandle], emit: Callable[[TaskHandle, Progress], None]):
    """The context's progress reporter: it names its handle weakly. A closure over the handle made each handle a
    reference cycle with its context, freed only by full collections (see `keep_gui_responsive`)."""

    def report(progress: Progress) -> None:
        owner = handle()
        if owner is not None:
            emit(owner, progress)

    return report


class _Bridge(QObject):
    """Lives in the GUI thread; worker threads emit on it, so delivery is queued into the GUI thread."""

    event = Signal(object, str, object)


class _ComputeThread(QThread):
    def __init__(self, loop: Callable[[], None], parent: QObject) -> None:
        super().__init__(parent)
        self.setObjectName("probescope-compute")
        self._loop = loop

    def run(self) -> None:
        run_named("probescope-compute", self._loop)


class WorkerPool(QObject):
    """The compute thread and the decode pool (or the compute kernel), with latest-request-wins bookkeeping per key.

    Signals (GUI thread): `started(handle)`, `progress(handle, Progress)`, `failed(handle, TaskError)`,
    `finished(handle)` (every task ends with exactly one `finished`, whether done, failed or cancelled), and
    `notice(line)` when the compute kernel died or was restarted (what happened, in one line), `devices_known(list)`
    when a kernel has started and said which compute devices its machine has.
    `trust` (set by the window) is handed to every task submitted after it is set, in its TaskContext.
    `kernel`: where compute Jobs run (a KernelSpec, or its `--kernel` text); `kernel_config` is the kernel's
    (jobs.kernel.process.KernelConfig: tests make small ones).
    """

    started = Signal(object)
    progress = Signal(object, object)
    failed = Signal(object, object)
    finished = Signal(object)
    notice = Signal(str)
    devices_known = Signal(list)

    def __init__(self, io_threads: int = 2, parent: QObject | None = None, *, kernel: str | KernelSpec = "thread",
                 kernel_config: Any = None):
        super().__init__(parent)
        spec = as_spec(kernel)
        self._bridge = _Bridge()
        self._bridge.event.connect(self._deliver)
        self._queue: ComputeQueue[TaskHandle] = ComputeQueue(lambda handle: handle.key)
        self._compute: _ComputeThread | None = None  # started with the first compute task run in this process
        # the Qt threads are the pool's children: destroyed with it in the GUI thread, never by a garbage
        # collection that happens to run in one of them
        self._io = QThreadPool(self)
        self._io.setMaxThreadCount(io_threads)
        # nor does a garbage collection run in them (it deletes the Qt widgets a cycle holds): see gui_collector
        self._collector = GuiThreadCollector(self)
        self._collector.start()
        self._active: dict[int, TaskHandle] = {}
        self._by_key: dict[str, TaskHandle] = {}
        self._closed = False
        self.trust: Trust = NO_TRUST
        self.session = Session()  # what the pool's tasks have loaded (Jobs name their inputs; see jobs.session)
        self.kernel = None
        if spec.kind == "local":
            self.kernel = KernelClient(kernel_config, parent=self)
        elif spec.is_remote:
            self.kernel = RayKernelClient(spec, kernel_config, parent=self)
        if self.kernel is not None:
            self.kernel.session = self.session  # a dataset comes back from the kernel as the one opened here
            self.kernel.event.connect(self._kernel_event)
            self.kernel.notice.connect(self.notice)
            self.kernel.ready.connect(lambda _seconds: self.devices_known.emit(self.kernel.devices))

    @property
    def foreground(self) -> str:
        """The key group whose compute tasks go first (the window sets the workspace on screen)."""
        return self._queue.foreground

    @foreground.setter
    def foreground(self, group: str) -> None:
        self._queue.foreground = group
        if self.kernel is not None:
            self.kernel.set_foreground(group)

    def devices(self) -> list[str] | None:
        """The compute devices of the machine where compute Jobs run: this one's, or the kernel's once it has
        started (None until then: the window's process does not import torch to ask)."""
        if self.kernel is None:
            return available_devices()
        return self.kernel.devices

    # -- GUI-thread API -------------------------------------------------------------------------------------------
    def submit(self, task: Task, *, name: str, key: str | None = None, executor: str = COMPUTE,
               on_result: Callable[[Any], None] | None = None, on_partial: Callable[[Any], None] | None = None,
               on_error: Callable[[TaskError], None] | None = None) -> TaskHandle:
        """Queue `task`; a running task with the same `key` is cancelled and its late results dropped."""
        if self._closed:
            raise RuntimeError("the worker pool is shut down")
        if executor not in (COMPUTE, IO):
            raise ValueError(f"unknown executor {executor!r}")
        handle = TaskHandle(task, name, key, executor, on_result, on_partial, on_error,
                            emit_progress=lambda h, p: self._emit(h, "progress", p), trust=self.trust,
                            session=self.session)
        if key is not None:
            previous = self._by_key.get(key)
            if previous is not None:
                previous.cancel(superseded=True)
            self._by_key[key] = handle
        self._active[handle.id] = handle
        if self.kernel is not None and isinstance(task, Job) and task.compute:
            handle.on_cancel = functools.partial(self.kernel.cancel, handle.id)  # (a lambda over handle: a cycle)
            self.kernel.submit(handle.id, task, name=name, executor=executor, key=key, trust=handle.context.trust)
        elif executor == COMPUTE:
            if self._compute is None:
                self._compute = _ComputeThread(self._compute_loop, self)
                self._compute.start()
            self._queue.put(handle)
        else:
            self._io.start(functools.partial(self._run_io, handle))  # (module docstring: no QRunnable)
        return handle

    def resubmit(self, handle: TaskHandle) -> TaskHandle:
        """Submit a finished task again, with its name, key, executor and callbacks (after the user trusted a file
        it stopped at)."""
        return self.submit(handle.task, name=handle.name, key=handle.key, executor=handle.executor,
                           on_result=handle.on_result, on_partial=handle.on_partial, on_error=handle.on_error)

    def is_running(self, key: str) -> bool:
        """A task submitted under `key` has not finished yet."""
        return key in self._by_key

    def cancel(self, key: str, ended_as: str = "cancelled", *, superseded: bool = False) -> None:
        """Cancel the task of `key`: the user's Cancel by default (a kernel task stuck in a long call gets the kernel
        restarted), or `superseded`, what the window drops because its inputs changed (left to stop at its next
        step, never killed); `ended_as` names the stop where it is listed (a paused stream: 'paused')."""
        handle = self._by_key.get(key)
        if handle is not None:
            handle.ended_as = ended_as
            handle.cancel(superseded=superseded)

    def cancel_group(self, group: str) -> None:
        """Cancel every task whose key is `group` or starts with `group:` (their results are dropped)."""
        for handle in list(self._active.values()):
            if in_group(handle.key, group):
                handle.cancel(superseded=True)

    def cancel_all(self) -> None:
        for handle in list(self._active.values()):
            handle.cancel()

    def active(self) -> list[TaskHandle]:
        """Tasks submitted and not yet finished, oldest first."""
        return list(self._active.values())

    def shutdown(self, timeout: float = 30.0) -> None:
        """Cancel everything, stop the kernel and join every thread; called when the window closes."""
        if self._closed:
            return
        self._closed = True
        self.cancel_all()
        if self._compute is not None:
            self._queue.put(None)
            self._compute.wait(round(timeout * 1000))
        self._io.clear()
        self._io.waitForDone(round(timeout * 1000))
        if self.kernel is not None:
            self.kernel.shutdown()
        for handle in list(self._active.values()):
            self._finish(handle)
        self._collector.stop()

    @property
    def is_shut_down(self) -> bool:
        return self._closed

    # -- worker side ----------------------------------------------------------------------------------------------
    def _compute_loop(self) -> None:
        if self.kernel is not None:  # what runs here then needs no torch (Jobs that do go to the kernel)
            self._queue.serve(self._run)
            return
        import torch  # (torch: only a pool without a kernel computes in the window's process)

        with torch.inference_mode():
            self._queue.serve(self._run)

    def _step_aside(self, handle: TaskHandle) -> None:
        if handle.executor == COMPUTE:
            self._queue.step_aside(handle, self._run)

    def _emit(self, handle: TaskHandle, kind: str, payload: Any = None) -> None:
        self._bridge.event.emit(handle, kind, payload)

    def _run_io(self, handle: TaskHandle) -> None:
        lower_thread_priority()
        run_named("probescope-io", lambda: self._run(handle))

    def _run(self, handle: TaskHandle) -> None:
        run_task(handle.task, handle.context, handle.name, lambda kind, payload: self._emit(handle, kind, payload),
                 lambda: self._step_aside(handle))

    def _kernel_event(self, task_id: int, kind: str, payload: Any) -> None:
        handle = self._active.get(task_id)
        if handle is not None:
            self._deliver(handle, kind, payload)

    # -- delivery in the GUI thread -------------------------------------------------------------------------------
    def _deliver(self, handle: TaskHandle, kind: str, payload: Any) -> None:
        if handle.done:
            return
        if kind == "started":
            self.started.emit(handle)
            return
        stale = handle.cancelled or self._closed
        if kind == "progress":
            if not stale:
                handle.progress = payload
                self.progress.emit(handle, payload)
            return
        if kind == "partial":
            if not stale and handle.on_partial is not None and not self._call(handle, handle.on_partial, payload):
                handle.cancel()  # a view that cannot show partial results does not want the rest
            return
        if not stale and kind == "result" and handle.on_result is not None:
            self._call(handle, handle.on_result, payload)
        elif not stale and kind == "error":
            self._fail(handle, payload)
        self._finish(handle)

    def _call(self, handle: TaskHandle, callback: Callable[[Any], None], payload: Any) -> bool:
        """Run a view's callback; a bug in it is reported like a failed task instead of escaping into Qt."""
        try:
            callback(payload)
            return True
        except Exception as exc:  # noqa: BLE001  (a view's bug is reported, never escapes into Qt)
            self._fail(handle, describe_error(f"showing the result of {handle.name}", exc))
            return False

    def _fail(self, handle: TaskHandle, error: TaskError) -> None:
        if handle.on_error is not None:
            try:
                handle.on_error(error)
            except Exception as exc:  # noqa: BLE001  (as above)
                error = describe_error(f"handling the failure of {handle.name}", exc)
        self.failed.emit(handle, error)

    def _finish(self, handle: TaskHandle) -> None:
        if handle.done:
            return
        handle.done = True
        self._active.pop(handle.id, None)
        if handle.key is not None and self._by_key.get(handle.key) is handle:
            del self._by_key[handle.key]
        self.finished.emit(handle)
