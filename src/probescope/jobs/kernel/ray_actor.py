"""The compute kernel as a Ray actor (`probescope gui --kernel ray://HOST:PORT`): the kernel process's own kernel
(`process.Kernel`: one Session, the compute queue with the workspace on screen first, the I/O pool, `run_task`) in
a worker of a Ray cluster, so datasets and models are read from that cluster's paths and its GPU computes.

The window reaches it through Ray Client, which does not carry streaming generators (ray 2.60 raises "Streaming
actor methods (num_returns="streaming") are not currently supported when using Ray Client", ray/util/client/
worker.py), so the messages travel as the kernel process's frames (`transport.Channel`, all in band): the window
`post`s them, in order, in a concurrency group of one thread, and long-polls the kernel's (`take`) in a group of
its own, so a poll never waits behind a post, nor a cancel behind a running task. Imported where ray is installed.
"""

from __future__ import annotations

import queue
import threading

import ray

from probescope.jobs.kernel.messages import Kind
from probescope.jobs.kernel.process import Kernel, KernelConfig, ready
from probescope.jobs.kernel.transport import Channel
from probescope.jobs.runner import compute_threads

TAKE_BYTES = 64 << 20  # one `take` returns at most about this much (a large result goes alone)
ACK_TIMEOUT_S = 30.0  # the longest a task waits for the window to have its 'started' (a window gone: it runs on)


class _Mailbox:
    """The actor's end of the connection: the frames the window posted, and those waiting for it to take. `taken`
    counts the frames the window has received (it says so at each take)."""

    def __init__(self) -> None:
        self.inbox: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self.outbox: queue.SimpleQueue[bytes] = queue.SimpleQueue()
        self.put = 0
        self.taken = 0
        self._changed = threading.Condition()

    def send_bytes(self, frame: bytes) -> None:  # under the channel's lock: `put` counts in the frames' order
        self.put += 1
        self.outbox.put(frame)

    def recv_bytes(self) -> bytes:
        return self.inbox.get()

    def note_taken(self, taken: int) -> None:
        with self._changed:
            self.taken = taken
            self._changed.notify_all()

    def wait_taken(self, count: int) -> None:
        with self._changed:
            self._changed.wait_for(lambda: self.taken >= count, timeout=ACK_TIMEOUT_S)


class _Channel(Channel):
    """A task's 'started' goes on only once the window has it. Frames still in the outbox die with the actor, and
    the window counts a task as interrupted (run again, failed the second time) only when it knew it had started:
    without this, a task that kills the actor at once would be sent to new actors forever."""

    def send(self, message: tuple) -> None:
        super().send(message)
        if message[0] == Kind.STARTED:
            self.conn.wait_taken(self.conn.put)


@ray.remote(concurrency_groups={"inbox": 1, "outbox": 1})
class RayKernel:
    """One kernel; the window makes a new actor when this one dies (ray.kill, a lost worker or node)."""

    def __init__(self, config: KernelConfig) -> None:
        if config.torch:
            import torch  # (torch: only in a kernel configured for it; the window imports this module)

            torch.set_num_threads(compute_threads())
        self._mailbox = _Mailbox()
        channel = _Channel(self._mailbox, local=False)
        kernel = Kernel(channel, config)
        channel.send(ready(config))
        threading.Thread(target=self._serve, args=(kernel,), name="probescope-kernel-serve", daemon=True).start()

    @staticmethod
    def _serve(kernel: Kernel) -> None:
        kernel.serve()
        kernel.stop()

    @ray.method(concurrency_group="inbox")
    def post(self, frame: bytes) -> None:
        self._mailbox.inbox.put(frame)

    @ray.method(concurrency_group="outbox")
    def take(self, timeout: float, taken: int) -> list[bytes]:
        """The frames waiting for the window (which has `taken` frames so far), waiting up to `timeout` seconds for
        the first."""
        self._mailbox.note_taken(taken)
        try:
            frames = [self._mailbox.outbox.get(timeout=timeout)]
        except queue.Empty:
            return []
        size = len(frames[0])
        while size < TAKE_BYTES:
            try:
                frames.append(self._mailbox.outbox.get_nowait())
            except queue.Empty:
                break
            size += len(frames[-1])
        return frames
