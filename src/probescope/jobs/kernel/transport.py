"""Messages between the window and its compute kernel: tuples over a `multiprocessing` Connection, pickled with
protocol 5, large buffers out of band.

- A buffer of at least `OUT_OF_BAND_BYTES` (a numpy array's data) is written to a file in shared memory
  (/dev/shm) named after the sending process, `probescope-kernel-<pid>-<n>`; the receiver maps it copy-on-write
  and unlinks it at once, so the array it gets lives in those pages and the file is gone from the folder. A side
  that dies leaves only its own files, which the other side removes (`sweep(pid)`): the window after a kernel
  died, the kernel when the window went away, and each side at its own exit.
- A numpy memmap of a file (the activation cache) travels as its path, offset, dtype and shape: the receiver maps
  the same file, nothing of the data is sent.
- A probing dataset (a BrodenDataset) travels as the spec that opens it (`DatasetSpec`): the receiver takes the one
  its side holds under that spec (`Channel.session`: the window's pool holds every dataset it opened, the kernel
  the ones its jobs opened), opening it there only when it holds none. The window then gets its own dataset object
  back in a result, not a copy: measured at 22,210 ADE20K rows, the copy was 4.5 MB of pickle and 99 ms of
  unpickling holding the GIL the GUI thread waits for, and the window's checks of which dataset a result is of
  (the demo's first images, or the whole) compared a copy with the original and never matched.
- Judgments and their trials under quality control (a `TrialSet`) that the sending side's session holds travel as
  the name they are held under (`Session.name_of`: the request that opened the files, with their sizes and times,
  and the filters); the receiver takes the ones its session holds, reading or analysing them there when it holds
  none. Measured at 312,500 trials, sending them by value took 91 ms of pickling in the GUI thread at each submit
  of a Similarity job (the model table's scores after every filter change, the embedding fits). To a kernel on
  another machine they go by value: the files the window opened need not be there.
- Everything else is in the pickle ("in band"). `Channel.stats` counts bytes each way per message kind.
- Within one task, what does not change between its messages is sent once: from a task's first `partial` to its
  end, a record that is never altered once built (a label store, a unit's result: `_sent_once`) or an
  array the task marked `jobs.protocol.frozen` goes with the first message that holds it, and later messages refer
  to it by number; the receiver keeps it under that number until the task's end. A layer's partial results are
  then only its new units: measured on the demo, each partial was 2.2-3.5 MB of pickle and 45-125 ms of unpickling
  in the window's reader thread, all of it holding the GIL the GUI thread waits for. It also keeps identity: every
  partial of a task refers to the same label store object.
- The window's end writes from a thread of its own (`Channel(..., writer=True)`): a message is pickled where it is
  sent (a payload that cannot be pickled fails there), but the GUI thread never waits for the pipe, which stays
  full while a kernel that is starting imports torch.
- A channel to a kernel on another machine (`local=False`: the Ray kernel) sends everything in band, a memmap as
  a plain array of its data: neither /dev/shm nor the window's files are there.
"""

from __future__ import annotations

import io
import itertools
import mmap
import os
import pickle
import queue
import tempfile
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any

from probescope.jobs.kernel.messages import ENDS, HELD_FROM
from probescope.jobs.kernel.pickling import Held, HeldPickler, Pickler, Traffic, Unpickler
from probescope.jobs.session import Session

OUT_OF_BAND_BYTES = 1 << 20
SHM_DIR = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
PREFIX = "probescope-kernel-"


def _unlink_all(names: list[str]) -> None:
    for name in names:
        _unlink(name)

class Undecodable(Exception):
    """A message whose payload this side cannot unpickle (a class it cannot import)."""

    def __init__(self, kind: str, task_id: int, error: Exception) -> None:
        super().__init__(f"cannot read the {kind} of task {task_id}: {type(error).__name__}: {error}")
        self.kind, self.task_id, self.error = kind, task_id, error


class Channel:
    """One end of the connection (`conn`: what has `send_bytes` and `recv_bytes`): `send` from any thread, `receive`
    from one. Traffic is counted in `sent` and `received` (pass them to count over several channels: one kernel after
    another). `local`: both ends are on this machine (large buffers through shared memory, memmaps by name).
    `session`: where this side holds the inputs that travel by name (module docstring)."""

    def __init__(self, conn: Any, sent: defaultdict[str, Traffic] | None = None,
                 received: defaultdict[str, Traffic] | None = None, *, local: bool = True,
                 writer: bool = False, session: Session | None = None) -> None:
        self.conn = conn
        self.local = local
        self.session = session
        self._lock = threading.Lock()
        self._numbers = itertools.count()
        self.sent = defaultdict(Traffic) if sent is None else sent
        self.received = defaultdict(Traffic) if received is None else received
        self._frames: queue.SimpleQueue[tuple[bytes, list[str]] | None] | None = None
        self._broken = False
        self._held_out: dict[int, Held] = {}  # per task: what it sent once (module docstring)
        self._held_in: dict[int, Held] = {}
        self._held_lock = threading.Lock()  # a task's messages that refer to each other leave in the order pickled
        if writer:
            self._frames = queue.SimpleQueue()
            self._writer = threading.Thread(target=self._write_frames, name="probescope-kernel-writer", daemon=True)
            self._writer.start()

    def close_writer(self, timeout: float = 5.0) -> None:
        """End the writer thread once what was sent before is written (or the connection is gone)."""
        if self._frames is not None:
            self._frames.put(None)
            self._writer.join(timeout)

    def _write_frames(self) -> None:
        while (item := self._frames.get()) is not None:
            frame, files = item
            if self._broken:
                _unlink_all(files)
                continue
            try:
                self.conn.send_bytes(frame)
            except (OSError, EOFError, ValueError):  # the other side is gone: what is left is never read
                self._broken = True
                _unlink_all(files)

    def send(self, message: tuple[str, int, Any]) -> None:
        """Send (kind, task id, payload); raises what pickling the payload raises, having sent nothing."""
        kind, task_id, payload = message
        held = _held_for(self._held_out, kind, task_id)
        if held is None:
            self._send(kind, task_id, payload, None)
            return
        with self._held_lock:
            self._send(kind, task_id, payload, held)
            if kind in ENDS:
                del self._held_out[task_id]

    def _send(self, kind: str, task_id: int, payload: Any, held: Held | None) -> None:
        counted = Traffic(messages=1)
        files: list[str] = []

        def out_of_band(buffer: pickle.PickleBuffer) -> bool:
            raw = buffer.raw()
            if raw.nbytes < OUT_OF_BAND_BYTES:
                return True  # in the pickle
            files.append(self._write_shared(raw))
            counted.out_of_band += raw.nbytes
            return False

        out = io.BytesIO()
        pickler = Pickler(out, out_of_band, counted, self.local, self.session) if held is None else \
            HeldPickler(out, out_of_band, counted, self.local, self.session, held)
        try:
            pickler.dump(payload)
        except BaseException:
            _unlink_all(files)
            raise
        frame = pickle.dumps((kind, task_id, files, out.getvalue()), protocol=5)
        counted.in_band = len(frame)
        if self._frames is not None:
            if self._broken:
                _unlink_all(files)
                raise OSError("the compute kernel's connection is closed")
            self._frames.put((frame, files))
        else:
            with self._lock:
                self.conn.send_bytes(frame)
        if held is not None:
            held.sent.update(pickler.new)
        _add(self.sent[kind], counted)

    def receive(self) -> tuple[str, int, Any]:
        """The next (kind, task id, payload); EOFError or OSError when the other side is gone, `Undecodable` when
        the payload cannot be read here (its files are removed all the same)."""
        frame = self.conn.recv_bytes()
        kind, task_id, files, body = pickle.loads(frame)
        counted = Traffic(messages=1, in_band=len(frame))
        buffers = [_map_and_unlink(name) for name in files]
        counted.out_of_band = sum(len(buffer) for buffer in buffers)
        _add(self.received[kind], counted)
        held = _held_for(self._held_in, kind, task_id)
        try:
            payload = Unpickler(body, buffers, held, self.session).load()
        except Exception as exc:  # noqa: BLE001  (told as this message's failure, the connection goes on)
            self._held_in.pop(task_id, None)  # (what the task sends next may refer to what was lost here)
            raise Undecodable(kind, task_id, exc) from exc
        if kind in ENDS:
            self._held_in.pop(task_id, None)
        return kind, task_id, payload

    def _write_shared(self, raw: memoryview) -> str:
        path = SHM_DIR / f"{PREFIX}{os.getpid()}-{next(self._numbers)}"
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        try:
            with open(fd, "wb", closefd=False) as fh:
                fh.write(raw)
        finally:
            os.close(fd)
        return str(path)


def _held_for(table: dict[int, Held], kind: str, task_id: int) -> Held | None:
    """The task's record of what it sent once, made by its first `partial`; None before."""
    if kind in HELD_FROM:
        return table.setdefault(task_id, Held())
    return table.get(task_id)


def _map_and_unlink(name: str) -> memoryview:
    fd = os.open(name, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        mapped = mmap.mmap(fd, size, access=mmap.ACCESS_COPY)  # writable for the receiver, private to it
    finally:
        os.close(fd)
        _unlink(name)
    return memoryview(mapped)


def _unlink(name: str) -> None:
    try:
        os.unlink(name)
    except FileNotFoundError:
        pass


def _add(total: Traffic, counted: Traffic) -> None:
    total.messages += counted.messages
    total.in_band += counted.in_band
    total.out_of_band += counted.out_of_band
    total.mapped += counted.mapped


def sweep(pid: int) -> int:
    """Remove the shared-memory files process `pid` left (it died, or is exiting); how many there were."""
    found = list(SHM_DIR.glob(f"{PREFIX}{pid}-*"))
    for path in found:
        _unlink(str(path))
    return len(found)
