"""The compute kernel: a process of its own that owns torch, the models and the GPU and runs the window's Jobs, so a
long computation never holds the window's interpreter and a native crash takes down only the kernel.

It is started with multiprocessing's spawn context (`main`), keeps one Session (models loaded again on demand after
a restart: `jobs.inputs.model_of`), runs compute Jobs in one thread (the workspace on screen first, as in the window's
pool) and the others in a small I/O pool. Messages are (kind, task id, payload) over a `transport.Channel`, their
kinds and records in `messages`: the window sends Jobs (`Submit`), cancels, the foreground and stop; the kernel
says it is `Ready` (its pid, devices and protocol version), then each task's events, and a `fault` (what is about
to kill it: an out-of-memory error in a Job) just before it exits.
A cancel is answered with `cancelled` as soon as the task stops: at once for a queued task, at its next yield for a
running one (the window restarts a kernel that does not answer in time).
"""

from __future__ import annotations

import os
import resource
import signal
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from probescope.core.devices import available_devices
from probescope.jobs.kernel.messages import ENDS, Kind, Ready, Submit
from probescope.jobs.kernel.transport import Channel, Undecodable, sweep
from probescope.jobs.protocol import COMPUTE, Job, TaskContext, describe_error
from probescope.jobs.runner import ComputeQueue, compute_threads, run_task
from probescope.jobs.session import Session

EXIT_OUT_OF_MEMORY = 75  # the kernel's exit status after a Job ran out of memory
EXIT_FAULT = 70  # and after a Job raised what ends a thread (SystemExit)
# the kernel's scheduling priority a little below the window's (and its decode pool's, IO_NICENESS 1): the GUI
# thread gets a core first, yet the kernel still gets its share on a machine that other work keeps busy. At nice 10
# it got 3% of the cores beside two CPU-bound processes and the first units took 128 s (issue 45; at nice 2, 15 s;
# benchmarks/gui_bench.py --fresh --load 2)
NICENESS = 2


STOP_GRACE_S = 2.0  # a running task's time to stop at its next yield when the kernel is told to stop


@dataclass(frozen=True)
class KernelConfig:
    """How a kernel runs: `torch` (import it at start and compute in inference mode; off only for kernels that run
    no torch, as in tests of the transport), `io_threads`, and `memory_room`: the bytes of address space it may map
    beyond what it holds once started (RLIMIT_AS; None: no limit)."""

    torch: bool = True
    io_threads: int = 2
    memory_room: int | None = None


@dataclass
class _Task:
    id: int
    job: Job
    name: str
    executor: str
    key: str | None
    ctx: TaskContext
    future: Future | None = None


class Kernel:
    """Runs the Jobs that come over `channel` and sends back what they do (the process's and the Ray actor's)."""

    def __init__(self, channel: Channel, config: KernelConfig) -> None:
        self.channel = channel
        self.config = config
        self.session = channel.session = Session()  # (what the window sends by name is found here)
        self.queue: ComputeQueue[_Task] = ComputeQueue(lambda task: task.key)
        self.io = ThreadPoolExecutor(config.io_threads, thread_name_prefix="probescope-kernel-io")
        self.tasks: dict[int, _Task] = {}
        self.lock = threading.Lock()
        self.compute = threading.Thread(target=self._compute_loop, name="probescope-kernel-compute", daemon=True)
        self.compute.start()

    def serve(self) -> bool:
        """Answer the window's messages until it says stop (True) or goes away (False)."""
        while True:
            try:
                kind, task_id, payload = self.channel.receive()
            except (EOFError, OSError):
                return False
            except Undecodable as exc:  # a Job this process cannot import
                self._send(Kind.ERROR, exc.task_id, describe_error("starting a task in the compute kernel", exc))
                continue
            if kind == Kind.SUBMIT:
                self._submit(task_id, payload)
            elif kind == Kind.CANCEL:
                self._cancel(task_id)
            elif kind == Kind.FOREGROUND:
                self.queue.foreground = payload
            elif kind == Kind.STOP:
                return True

    def stop(self, grace: float = STOP_GRACE_S) -> None:
        """Cancel every task and give the compute thread `grace` seconds to leave the one it runs at its next yield,
        so what that task holds is let go as its code says (a dissection's unit workers stopped, their temporary
        folder removed: the process's exit would otherwise leave both, and multiprocessing's tracker would warn of
        leaked semaphores); a task stuck in a long call is not waited for."""
        with self.lock:
            running = list(self.tasks.values())
        for task in running:
            task.ctx.cancel()
        self.queue.put(None)
        self.io.shutdown(wait=False, cancel_futures=True)
        self.compute.join(grace)

    def _submit(self, task_id: int, submit: Submit) -> None:
        ctx = TaskContext(lambda progress: self._send(Kind.PROGRESS, task_id, progress), submit.trust, self.session)
        task = _Task(task_id, submit.job, submit.name, submit.executor, submit.key, ctx)
        with self.lock:
            self.tasks[task_id] = task
        if task.executor == COMPUTE:
            self.queue.put(task)
        else:
            task.future = self.io.submit(self._run, task)

    def _cancel(self, task_id: int) -> None:
        with self.lock:
            task = self.tasks.get(task_id)
        if task is None:
            return  # it ended already
        task.ctx.cancel()
        if self.queue.remove(task) or (task.future is not None and task.future.cancel()):
            self._emit(task, Kind.CANCELLED, None)  # it never started: answered now

    def _compute_loop(self) -> None:
        if not self.config.torch:
            self.queue.serve(self._run)
            return
        import torch  # (torch: only in a kernel configured for it; a torch-free kernel starts at once)

        with torch.inference_mode():
            self.queue.serve(self._run)

    def _step_aside(self, task: _Task) -> None:
        if task.executor == COMPUTE:
            self.queue.step_aside(task, self._run)

    def _run(self, task: _Task) -> None:
        try:
            run_task(task.job, task.ctx, task.name, lambda kind, payload: self._emit(task, kind, payload),
                     lambda: self._step_aside(task), fatal=(MemoryError,))
        except MemoryError:
            self._send(Kind.FAULT, task.id, "ran out of memory")
            os._exit(EXIT_OUT_OF_MEMORY)
        except BaseException as exc:  # noqa: BLE001  (SystemExit: the thread would end, leaving a deaf kernel)
            self._send(Kind.FAULT, task.id, f"stopped at a {type(exc).__name__}")
            os._exit(EXIT_FAULT)

    def _emit(self, task: _Task, kind: str, payload: Any) -> None:
        with self.lock:
            if task.id not in self.tasks:
                return  # ended already (cancelled while it ran): nothing more of it is sent
            if kind in ENDS:
                del self.tasks[task.id]
        try:
            self._send(kind, task.id, payload)
        except Exception as exc:  # noqa: BLE001  (a result that cannot travel is the task's failure, told as one)
            self._send(Kind.ERROR, task.id, describe_error(f"sending the {kind} of {task.name}", exc))

    def _send(self, kind: str, task_id: int, payload: Any) -> None:
        self.channel.send((kind, task_id, payload))


def ready(config: KernelConfig) -> tuple[Kind, int, Ready]:
    """The message a kernel sends once it runs: its pid and its machine's compute devices (the window knows them
    only from here: it imports no torch)."""
    devices = available_devices() if config.torch else ["cpu"]
    return (Kind.READY, 0, Ready(os.getpid(), tuple(devices)))


def main(conn: Any, config: KernelConfig) -> None:
    """The kernel process's entry point (multiprocessing spawn target)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C in the terminal is the window's to handle
    os.nice(NICENESS)
    window = os.getppid()
    if config.torch:
        import torch  # (torch: only in a kernel configured for it; a torch-free kernel starts at once)

        torch.set_num_threads(compute_threads())
    if config.memory_room is not None:
        _limit_address_space(config.memory_room)
    channel = Channel(conn)
    kernel = Kernel(channel, config)
    channel.send(ready(config))
    told_to_stop = kernel.serve()
    kernel.stop()
    sweep(os.getpid())
    if not told_to_stop and os.getppid() != window:
        sweep(window)  # the window died: what it had sent and this kernel had not read yet
    os._exit(0)  # without waiting for a task stuck in a C call


def _limit_address_space(room: int) -> None:
    with open("/proc/self/status") as fh:
        held = next(int(line.split()[1]) * 1024 for line in fh if line.startswith("VmSize:"))
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (held + room, hard))
