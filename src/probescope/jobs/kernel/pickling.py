"""How a message's payload is pickled between the window and its compute kernel (probescope.jobs.kernel.transport
sends the frames): numpy memmaps of a file as their file's name, the probing dataset as the spec that opens it,
judgments and trial sets as the name the sending side's session holds them under, and a task's records that never
change once built sent once and referred to by number afterwards (the transport's docstring says why each).
"""

from __future__ import annotations

import functools
import io
import mmap
import pickle
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
