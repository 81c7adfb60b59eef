"""How a message's payload is pickled between the window and its compute kernel (probescope.jobs.kernel.transport
sends the frames): numpy memmaps of a file as their file's name, the probing dataset as the spec that opens it,
judgments and trial sets as the name the sending side's session holds them under, and a task's records that never
change once built sent once and referred to by number afterwards (the transport's docstring says why each).
"""

from __future__ import annotations

import io
import mmap
import pickle
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from probescope.jobs.protocol import is_frozen
from probescope.jobs.session import Session


@dataclass
class Traffic:
    """What went one way for one message kind: messages, bytes in the pickles, bytes through shared memory, bytes
    of memmaps that travelled as their file's name."""

    messages: int = 0
    in_band: int = 0
    out_of_band: int = 0
    mapped: int = 0



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
class _Crossing:
    """How objects of one class cross by name: `held(session, spec)` finds (or opens) the receiver's own; `spec_of`
    names one always (a probing dataset: its spec), else the sending side's session names it, on a local channel."""

    held: Callable[[Session, Any], Any]
    spec_of: Callable[[Any], Any] | None


_BY_NAME: dict[str, _Crossing] = {}  # "module.Class" -> its crossing
_seen: dict[type, _Crossing | None] = {}  # each class pickled so far: its crossing


def cross_by_name(class_path: str, held: Callable[[Session, Any], Any],
                  spec_of: Callable[[Any], Any] | None = None) -> None:
    """Objects of `class_path` ("module.Class", or a subclass) travel by name, not by value: registered by the
    module that owns their crossing (so neither this module nor the transport imports a domain type). `held` must
    be a module-level function: it travels by reference, and the receiver imports its module to find it."""
    _BY_NAME[class_path] = _Crossing(held, spec_of)
    _seen.clear()


def _crossing_of(cls: type) -> _Crossing | None:
    if cls not in _seen:
        paths = (f"{c.__module__}.{c.__qualname__}" for c in cls.__mro__)
        _seen[cls] = next((_BY_NAME[p] for p in paths if p in _BY_NAME), None)
    return _seen[cls]


def by_name(held: Callable[[Session, Any], Any], spec: Any) -> Any:
    """An input that travelled by name, unpickled outside a Channel: found by `held` in a session of its own (opened
    there)."""
    return held(Session(), spec)


def _sent_once(obj: Any) -> bool:
    if isinstance(obj, np.ndarray):
        return is_frozen(obj) and not isinstance(obj, np.memmap)
    return getattr(type(obj), "SENT_ONCE", False) is True  # (its class says so: the records a dissection sends)


class Held:
    """What one task has sent once (sender: id(obj) -> (number, obj), the object kept so its id stays its own) or
    received (receiver: number -> obj)."""

    def __init__(self) -> None:
        self.sent: dict[int, tuple[int, Any]] = {}
        self.received: dict[int, Any] = {}


class Pickler(pickle.Pickler):
    def __init__(self, out: io.BytesIO, buffer_callback, counted: Traffic, local: bool,
                 session: Session | None) -> None:
        super().__init__(out, protocol=5, buffer_callback=buffer_callback if local else None)
        self._counted = counted
        self._local = local
        self._session = session

    def reducer_override(self, obj: Any) -> Any:
        crossing = _crossing_of(type(obj))
        if crossing is not None:
            if crossing.spec_of is not None:
                return by_name, (crossing.held, crossing.spec_of(obj))
            name = self._session.name_of(obj) if self._local and self._session is not None else None
            if name is not None:  # (kind, key) in the sending side's session: the receiver's is found by the key
                return by_name, (crossing.held, name[1])
        if isinstance(obj, np.memmap):
            if not self._local:  # its file is not there: its data, as a plain array
                return obj.view(np.ndarray).__reduce_ex__(5)
            reduced = _mapped_reduce(obj)
            if reduced is not None:
                self._counted.mapped += obj.nbytes
                return reduced
        return NotImplemented


class HeldPickler(Pickler):
    """The pickler of a task's messages once it holds records (a Python call per object pickled: only then)."""

    def __init__(self, out: io.BytesIO, buffer_callback, counted: Traffic, local: bool, session: Session | None,
                 held: Held) -> None:
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


class Unpickler(pickle.Unpickler):
    def __init__(self, body: bytes, buffers: list, held: Held | None, session: Session | None) -> None:
        super().__init__(io.BytesIO(body), buffers=buffers)
        self._held = held
        self._session = session

    def find_class(self, module: str, name: str) -> Any:
        if module == __name__ and name == by_name.__name__:  # an input by name: from this side's session
            session = self._session if self._session is not None else Session()
            return lambda held, spec: held(session, spec)
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
