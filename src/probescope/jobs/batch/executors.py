"""Where batch tasks run. Both executors take the same two task kinds (a model's extraction, a chunk of units)
and hand back finished ones one at a time, so the scheduler in `runner` is the same for a laptop and a cluster.

`LocalExecutor` runs tasks in this process, one after another (chunks before further extractions, so one model is
finished before the next is loaded). `RayExecutor` (in `ray_executor`, imported only when asked for) runs them as
Ray tasks.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from probescope.core.dissection.inputs import extract_model_layers
from probescope.core.trust import Trust
from probescope.jobs.batch.chunks import dissect_chunk


class Executor(Protocol):
    def put(self, value: Any) -> Any:
        """Make a large read-only value (label store, activations) available to tasks once."""

    def extract(self, spec: str, layers: list[str], root: Path, index: str, source: str, device: str,
                trust: Trust, gpus: float) -> Any:
        """Submit a model's extraction (returns list[LayerInput] when done); returns a handle."""

    def chunk(self, *args: Any) -> Any:
        """Submit dissect_chunk(*args); returns a handle."""

    def wait(self, handles: list[Any]) -> tuple[Any, Any]:
        """Block until one of `handles` is done: (handle, its result). Task errors are raised here."""

    def close(self) -> None: ...


class LocalExecutor:
    """Runs every task in this process when it is waited for."""

    def __init__(self) -> None:
        self._tasks: dict[int, tuple[bool, Callable[[], Any]]] = {}
        self._next = 0

    def put(self, value: Any) -> Any:
        return value

    def _submit(self, is_chunk: bool, call: Callable[[], Any]) -> int:
        self._next += 1
        self._tasks[self._next] = (is_chunk, call)
        return self._next

    def extract(self, spec: str, layers: list[str], root: Path, index: str, source: str, device: str,
                trust: Trust, gpus: float) -> int:
        return self._submit(False, lambda: extract_model_layers(spec, layers, root, index, source, device,
                                                                trust))

    def chunk(self, *args: Any) -> int:
        return self._submit(True, lambda: dissect_chunk(*args))

    def wait(self, handles: list[int]) -> tuple[int, Any]:
        chunks = [h for h in handles if self._tasks[h][0]]
        handle = min(chunks or handles)
        _, call = self._tasks.pop(handle)
        return handle, call()

    def close(self) -> None:
        self._tasks.clear()
