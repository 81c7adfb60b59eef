"""The window's side of the compute kernel on a Ray cluster (`probescope gui --kernel ray://HOST:PORT`): the kernel as
an actor there (`jobs.kernel.ray_actor.RayKernel`, asking for a GPU when the window computes on CUDA:
`KernelSpec.gpus`), with the kernel process's bookkeeping (`kernel_client.KernelSide`): the same events, cancels,
restarts and notices.

Ray Client connects in the reader thread (it takes seconds), never in the GUI thread; this process stays connected
until it exits, or until the client that connected it is shut down. A lost actor (ray.kill, its worker or node died)
is a dead kernel: a new actor is made and the interrupted tasks run again. Before connecting, `jobs.kernel.spec.refusal`
is asked again (the command line asks it first), so a cluster elsewhere without token authentication is never reached
unless the user said so; then `jobs.kernel.spec.before_connecting` sends this machine's token when it has one, and a
cluster that wants a token (or refuses this one) is said in one line at once, not after Ray Client's minute of
retries. Neither ray nor this module imports torch.
"""

from __future__ import annotations

import queue
import threading
from collections import deque
from typing import Any

from PySide6.QtCore import QObject

from probescope.app.compute.kernel_client import KernelSide
from probescope.jobs.kernel.process import KernelConfig
from probescope.jobs.kernel.spec import KernelSpec, before_connecting, refusal

CANCEL_DEADLINE_S = 2.0  # a round trip to another machine and a poll; then the actor is killed and made again
POLL_S = 0.5  # how long one `take` waits on the actor for the kernel's next message
START_TIMEOUT_S = 120.0  # for an actor to be placed and answer (a GPU to come free, torch to import)
REASON_CHARS = 160  # of Ray's own words on why an actor died, in the notice


def _ray() -> Any:
    import ray  # (ray: the cluster extra, optional; only a Ray kernel's window imports it)

    return ray


class _ActorConnection:
    """The window's end of the connection to one kernel actor (`send_bytes` and `recv_bytes`, as a pipe's end). Its
    first receive (in the reader thread) connects to the cluster and makes the actor. Frames go to it from a sender
    thread of their own, in order (a Ray Client call takes 2 ms, up to 40 ms measured: not the GUI thread's time),
    held until the actor exists; `kill` goes the same way, after them. Every failure is told as the end of the
    connection (EOFError), in the words of the notice."""

    def __init__(self, spec: KernelSpec, config: KernelConfig) -> None:
        self.spec = spec
        self.config = config
        self.connected_here = False  # this connection called ray.init (and the client disconnects at its shutdown)
        self.killed = False
        self._outgoing: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()  # None: kill the actor
        self._sender: threading.Thread | None = None
        self._actor: Any = None
        self._frames: deque[bytes] = deque()
        self._taken = 0  # frames received from the actor (it holds a task's start until this side has it)

    def send_bytes(self, frame: bytes) -> None:
        if self.killed:
            raise OSError("the kernel actor is being killed")
        self._outgoing.put(frame)

    def kill(self) -> None:
        if not self.killed:
            self.killed = True
            self._outgoing.put(None)

    def join(self) -> None:
        """Wait for the sender thread to end (it ends after a kill)."""
        if self._sender is not None:
            self._sender.join()

    def _send_all(self) -> None:
        while (frame := self._outgoing.get()) is not None:
            try:
                self._actor.post.remote(frame)
            except Exception:  # noqa: BLE001, S112  (the actor or the cluster is gone: the reader tells how)
                continue
        try:
            _ray().kill(self._actor, no_restart=True)
        except Exception:  # noqa: BLE001, S110  (dead already, or the cluster is gone: it runs nothing either way)
            pass

    def recv_bytes(self) -> bytes:
        if self._actor is None:
            self._make_actor()
        ray = _ray()
        while not self._frames:
            try:
                frames = ray.get(self._actor.take.remote(POLL_S, self._taken), timeout=START_TIMEOUT_S)
            except ray.exceptions.RayActorError as exc:
                raise EOFError(_lost(exc)) from None
            except ray.exceptions.GetTimeoutError:
                raise EOFError(f"did not answer within {START_TIMEOUT_S:g} s on the Ray cluster at "
                               f"{self.spec.address}" + (" (no GPU came free?)" if self.spec.gpus else "")) from None
            except Exception as exc:  # noqa: BLE001  (the connection to the cluster is lost)
                raise EOFError(f"lost the Ray cluster at {self.spec.address} ({_first_line(exc)})") from None
            self._taken += len(frames)
            self._frames.extend(frames)
        return self._frames.popleft()

    def _make_actor(self) -> None:
        problem = refusal(self.spec)
        if problem is not None:
            raise EOFError(f"was not connected: {problem}")
        try:
            ray = _ray()
        except ImportError:
            raise EOFError("needs Ray here: pip install 'probescope[cluster]'") from None
        try:
            if not ray.is_initialized():
                problem = before_connecting(self.spec.address)  # this machine's token sent; a refusal said at once
                if problem is not None:
                    raise EOFError(f"was not connected: {problem}")
                ray.init(self.spec.address, logging_level="warning", log_to_driver=False)
                self.connected_here = True
            if self.spec.gpus and ray.cluster_resources().get("GPU", 0) < self.spec.gpus:
                raise EOFError(f"found no GPU on the Ray cluster at {self.spec.address} (--device cuda asks for one)")
            from probescope.jobs.kernel.ray_actor import RayKernel  # (ray: importing the actor's module imports ray)

            actor = RayKernel.options(num_gpus=self.spec.gpus, max_restarts=0).remote(self.config)
        except EOFError:
            raise
        except Exception as exc:  # noqa: BLE001  (no cluster there, another Ray version, a refused token)
            raise EOFError(f"could not connect to the Ray cluster at {self.spec.address} "
                           f"({_first_line(exc)})") from None
        self._actor = actor
        self._sender = threading.Thread(target=self._send_all, name="probescope-kernel-sender", daemon=True)
        self._sender.start()


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def _lost(exc: BaseException) -> str:
    """How a dead actor ended, from Ray's error (its last line that is not a detail: "The actor is dead because...")."""
    lines = [line.strip() for line in str(exc).splitlines()[1:] if line and not line.startswith("\t")]
    reason = lines[-1].rstrip(".")[:REASON_CHARS] if lines else "its worker process or node was lost"
    return f"was lost on the Ray cluster ({reason})"


class RayKernelClient(KernelSide):
    """The kernel as a Ray actor on the cluster `spec.address` names; see `KernelSide`."""

    LOCAL = False

    def __init__(self, spec: KernelSpec, config: KernelConfig | None = None,
                 cancel_deadline_s: float = CANCEL_DEADLINE_S, parent: QObject | None = None) -> None:
        super().__init__(config, cancel_deadline_s, parent)
        self.spec = spec
        self._connected_here = False  # one of its kernels' connections called ray.init

    def _launch(self) -> tuple[Any, Any]:
        connection = _ActorConnection(self.spec, self.config)
        return connection, connection

    def _alive(self) -> bool:
        return not self._kernel.killed

    def _kill(self) -> None:
        self._kernel.kill()

    def _stop(self, timeout: float) -> None:
        self._kernel.kill()  # nothing it still runs is wanted: the pool has cancelled every task

    def _reap(self, kernel: Any, said: str | None) -> str:
        kernel.kill()  # (gone already: this ends its sender thread)
        kernel.join()
        self._connected_here |= kernel.connected_here
        if self._closed and self._connected_here:
            _ray().shutdown()
        return said or "was lost on the Ray cluster"
