"""What one process has loaded, by what it was opened from, shared by the jobs it runs.

Jobs name their inputs by plain values (an `OpenRequest`, a path, a layer's files) so they can travel to another
process; the session turns each name into the loaded object once and hands the same object to every later job that
names it: the model a dissection loaded serves the ablation after it, a dataset's label store every unit's overlays.
The window's compute kernel keeps one session for its life (a restarted kernel starts empty and loads again on
demand); a job run on its own (the command line, a notebook) gets a fresh one.

Each kind of object keeps its most recently used few (`KEPT`): models and layers hold gigabytes.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

T = TypeVar("T")

KEPT = {"model": 2, "layer": 4}  # per kind, the most recently used kept; other kinds: DEFAULT_KEPT
DEFAULT_KEPT = 8


class Session:
    """Loaded objects by (kind, key); thread-safe (the kernel's compute and I/O threads share it), and each object is
    made once even when two jobs ask for it at the same time."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._kinds: dict[str, OrderedDict[Hashable, Any]] = {}
        self._making: dict[tuple[str, Hashable], threading.Lock] = {}

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
                while len(found) > KEPT.get(kind, DEFAULT_KEPT):
                    found.popitem(last=False)
                self._making.pop((kind, key), None)
            return value

    def drop(self, kind: str, key: Hashable | None = None) -> None:
        """Forget one object (or every object of `kind`): the next job that names it loads it again."""
        with self._lock:
            found = self._kinds.get(kind, OrderedDict())
            if key is None:
                found.clear()
            else:
                found.pop(key, None)

    def held(self, kind: str) -> list[Hashable]:
        """The keys of `kind` held now, least recently used first."""
        with self._lock:
            return list(self._kinds.get(kind, ()))
