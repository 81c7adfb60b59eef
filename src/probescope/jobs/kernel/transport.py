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

import functools
import io
import itertools
import mmap
import os
import pickle
import queue
import tempfile
import threading
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from probescope.jobs.protocol import is_frozen
from probescope.jobs.session import Session

OUT_OF_BAND_BYTES = 1 << 20
HELD_FROM = ("partial",)  # the kinds of message from which a task's records are sent once
ENDS = ("result", "error", "cancelled")  # a task's last message: what was held for it is let go
SHM_DIR = Path("/dev/shm") if Path("/dev/shm").is_dir() else Path(tempfile.gettempdir())
PREFIX = "probescope-kernel-"


@dataclass
class Traffic:
    """What went one way for one message kind: messages, bytes in the pickles, bytes through shared memory, bytes
    of memmaps that travelled as their file's name."""

    messages: int = 0
    in_band: int = 0
    out_of_band: int = 0
    mapped: int = 0


def _unlink_all(names: list[str]) -> None:
    for name in names:
        _unlink(name)


def _open_mapped(path: str, offset: int, dtype: str, shape: tuple[int, ...]) -> np.memmap:
    return np.memmap(path, dtype=np.dtype(dtype), mode="r", offset=offset, shape=shape)


def _mapped_reduce(array: np.memmap) -> tuple | None:
    """How a C-contiguous memmap of a file travels: (open it again, (path, offset, dtype, shape)); None otherwise."""
    held = getattr(array, "_mmap", None)
    if not array.filename or held is None or not array.flags.c_contiguous or array.dtype.hasobject:
        return None
    start = np.frombuffer(held, np.uint8).ctypes.data  # where the mapping begins in memory
    map_offset = array.offset - array.offset % mmap.ALLOCATIONGRANULARITY  # and in the file (numpy's rule)
    return _open_mapped, (str(array.filename), map_offset + array.ctypes.data - start, array.dtype.str,
                          array.shape)


@dataclass(frozen=True)
class _Kinds:
    """The classes the picklers treat apart: records never altered once built (a task sends each once), the
    probing dataset (sent as its spec), and the inputs sent by the name a session holds them under."""

    sent_once: tuple[type, ...]
    dataset: type
    named: tuple[type, ...]


@functools.cache
def _kinds() -> _Kinds:
    """(imported when first needed: this module is imported where they are not used)"""
    from probescope.core.data.broden import BrodenDataset
    from probescope.core.dissection.labels import LabelStore
    from probescope.core.dissection.results import UnitResult
    from probescope.core.similarity.readers import Judgments
    from probescope.jobs.similarity.trials import TrialSet

    return _Kinds((LabelStore, UnitResult), BrodenDataset, (Judgments, TrialSet))


def by_name(kind: str, spec: Any) -> Any:
    """An input that travelled by name (`kind` 'dataset', 'judgments' or 'trialset', found by `spec`), unpickled
    outside a Channel: opened."""
    return _held_input(None, kind, spec)


def _held_input(session: Session | None, kind: str, spec: Any) -> Any:
    """The input `spec` names as the receiving side has it: the one `session` holds, opened and held there when it
    holds none."""
    from probescope.jobs.dissection.layer import held_dataset
    from probescope.jobs.inputs import held_judgments
    from probescope.jobs.similarity.tasks import held_trialset

    held = {"dataset": held_dataset, "judgments": held_judgments, "trialset": held_trialset}.get(kind)
    if held is None:
        raise pickle.UnpicklingError(f"an input of an unknown kind by name: {kind!r}")
    return held(session if session is not None else Session(), spec)


def _by_name(dataset: Any) -> tuple:
    from probescope.jobs.dissection.layer import DatasetSpec

    return by_name, ("dataset", DatasetSpec.of(dataset))


def _sent_once(obj: Any) -> bool:
    if isinstance(obj, np.ndarray):
        return is_frozen(obj) and not isinstance(obj, np.memmap)
    return isinstance(obj, _kinds().sent_once)


class _Held:
    """What one task has sent once (sender: id(obj) -> (number, obj), the object kept so its id stays its own) or
    received (receiver: number -> obj)."""

    def __init__(self) -> None:
        self.sent: dict[int, tuple[int, Any]] = {}
        self.received: dict[int, Any] = {}


class _Pickler(pickle.Pickler):
    def __init__(self, out: io.BytesIO, buffer_callback, counted: Traffic, local: bool,
                 session: Session | None) -> None:
        super().__init__(out, protocol=5, buffer_callback=buffer_callback if local else None)
        self._counted = counted
        self._local = local
        self._session = session

    def reducer_override(self, obj: Any) -> Any:
        kinds = _kinds()
        if isinstance(obj, kinds.dataset):
            return _by_name(obj)
        if self._local and self._session is not None and isinstance(obj, kinds.named):
            name = self._session.name_of(obj)
            if name is not None:
                return by_name, name
        if isinstance(obj, np.memmap):
            if not self._local:  # its file is not there: its data, as a plain array
                return obj.view(np.ndarray).__reduce_ex__(5)
            reduced = _mapped_reduce(obj)
            if reduced is not None:
                self._counted.mapped += obj.nbytes
                return reduced
        return NotImplemented


class _HeldPickler(_Pickler):
    """The pickler of a task's messages once it holds records (a Python call per object pickled: only then)."""

    def __init__(self, out: io.BytesIO, buffer_callback, counted: Traffic, local: bool, session: Session | None,
                 held: _Held) -> None:
        super().__init__(out, buffer_callback, counted, local, session)
        self._held = held
        self.new: dict[int, tuple[int, Any]] = {}  # sent once from this message on (kept only if it is sent)
        self._defining: int | None = None

    def persistent_id(self, obj: Any) -> Any:
        """('held', n) for a record this task sent before; ('new', n, obj) the first time: the receiver keeps obj."""
        held = self._held
        if type(obj) in _PLAIN or not _sent_once(obj):
            return None
        key = id(obj)
        if key == self._defining:  # (obj inside its own ('new', n, obj): pickled in full here)
            self._defining = None
            return None
        found = held.sent.get(key) or self.new.get(key)
        if found is not None:
            return "held", found[0]
        number = len(held.sent) + len(self.new)
        self.new[key] = (number, obj)
        self._defining = key
        return "new", number, obj


_PLAIN = frozenset({str, bytes, int, float, bool, type(None), tuple, list, dict, set, frozenset})


class _Unpickler(pickle.Unpickler):
    def __init__(self, body: bytes, buffers: list, held: _Held | None, session: Session | None) -> None:
        super().__init__(io.BytesIO(body), buffers=buffers)
        self._held = held
        self._session = session

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == by_name.__name__:  # an input by name: from this side's session
            return lambda kind, spec: _held_input(self._session, kind, spec)
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        if self._held is None:
            raise pickle.UnpicklingError("a reference to a record outside a task's messages")
        if pid[0] == "new":
            self._held.received[pid[1]] = pid[2]
            return pid[2]
        try:
            return self._held.received[pid[1]]
        except KeyError:
            raise pickle.UnpicklingError(f"a reference to record {pid[1]}, which this task never sent") from None


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
        self._held_out: dict[int, _Held] = {}  # per task: what it sent once (module docstring)
        self._held_in: dict[int, _Held] = {}
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

    def _send(self, kind: str, task_id: int, payload: Any, held: _Held | None) -> None:
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
        pickler = _Pickler(out, out_of_band, counted, self.local, self.session) if held is None else \
            _HeldPickler(out, out_of_band, counted, self.local, self.session, held)
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
            payload = _Unpickler(body, buffers, held, self.session).load()
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


def _held_for(table: dict[int, _Held], kind: str, task_id: int) -> _Held | None:
    """The task's record of what it sent once, made by its first `partial`; None before."""
    if kind in HELD_FROM:
        return table.setdefault(task_id, _Held())
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
