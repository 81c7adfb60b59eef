"""What one process has loaded, by what it was opened from, shared by the jobs it runs.

Jobs name their inputs by plain values (an `OpenRequest`, a path, a layer's files) so they can travel to another
process; the session turns each name into the loaded object once and hands the same object to every later job that
names it: the model a dissection loaded serves the ablation after it, a dataset's label store every unit's overlays.
The window's compute kernel keeps one session for its life (a restarted kernel starts empty and loads again on
demand); a job run on its own (the command line, a notebook) gets a fresh one.

Each kind of object keeps its most recently used few (`KEPT`): models and layers hold gigabytes.

`name_of(obj)` tells what an object held here is known by: the compute kernel's messages send a large input the
session holds (judgments, their trials under quality control) as that name, and the other side takes its own.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

# per kind, the most recently used kept (other kinds: DEFAULT_KEPT)
KEPT = {"model": 2, "layer": 4, "judgments": 2, "trialset": 2}
DEFAULT_KEPT = 8


class Session:
    """Loaded objects by (kind, key); thread-safe (the kernel's compute and I/O threads share it), and each object is
    made once even when two jobs ask for it at the same time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kinds: dict[str, OrderedDict[Hashable, Any]] = {}
        self._making: dict[tuple[str, Hashable], threading.Lock] = {}
        self._names: dict[int, tuple[str, Hashable]] = {}  # id of an object held -> (kind, key)

    def get(self, kind: str, key: Hashable, make: Callable[[], T]) -> T:
        """The object of `kind` known by `key`, made by `make()` the first time (an error in `make` is not kept)."""
        with self._lock:
            found = self._kinds.setdefault(kind, OrderedDict())
            if key in found:
                found.move_to_end(key)
                return found[key]
            making = self._making.setdefault((kind, key), threading.Lock())
        with making:
            with self._lock:
                if key in found:  # made by the job that held the lock before this one
                    return found[key]
            value = make()
            with self._lock:
                found[key] = value
                self._names[id(value)] = (kind, key)
                while len(found) > KEPT.get(kind, DEFAULT_KEPT):
                    self._forget(kind, *found.popitem(last=False))
                self._making.pop((kind, key), None)
            return value

    def hold(self, kind: str, key: Hashable, value: T) -> T:
        """Hold `value` (made elsewhere: an input the user opened) as `kind`'s `key`, in place of what was."""
        self.drop(kind, key)
        return self.get(kind, key, lambda: value)

    def drop(self, kind: str, key: Hashable | None = None) -> None:
        """Forget one object (or every object of `kind`): the next job that names it loads it again."""
        with self._lock:
            found = self._kinds.get(kind, OrderedDict())
            for k in list(found) if key is None else [key] if key in found else []:
                self._forget(kind, k, found.pop(k))

    def _forget(self, kind: str, key: Hashable, value: Any) -> None:
        if self._names.get(id(value)) == (kind, key):  # (not when it is held under another name too)
            del self._names[id(value)]

    def name_of(self, value: Any) -> tuple[str, Hashable] | None:
        """(kind, key) of `value` when this session holds it, else None."""
        with self._lock:
            return self._names.get(id(value))

    def held(self, kind: str) -> list[Hashable]:
        """The keys of `kind` held now, least recently used first."""
        with self._lock:
            return list(self._kinds.get(kind, ()))
