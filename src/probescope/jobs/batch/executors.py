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

from probescope.core.dissection.engine import layer_result
from probescope.core.dissection.inputs import extract_model_layers
from probescope.core.dissection.parallel import UnitWorkers, worker_count
from probescope.core.dissection.results import DissectionResult
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
    """Runs every task on this machine when it is waited for: extractions in this process; chunks in this process
    too, or in `settings.jobs` worker processes (parallel.py; automatic: one per core for a large enough layer) that
    take every chunk queued so far at once and hand them back as their last unit finishes."""

    def __init__(self) -> None:
        self._tasks: dict[int, tuple[bool, Callable[[], Any], tuple]] = {}
        self._next = 0
        self._workers: UnitWorkers | None = None
        self._running: dict[int, tuple[int, DissectionResult, int]] = {}  # ticket -> (handle, result, units left)

    def put(self, value: Any) -> Any:
        return value

    def _submit(self, is_chunk: bool, call: Callable[[], Any], args: tuple = ()) -> int:
        self._next += 1
        self._tasks[self._next] = (is_chunk, call, args)
        return self._next

    def extract(self, spec: str, layers: list[str], root: Path, index: str, source: str, device: str,
                trust: Trust, gpus: float) -> int:
        return self._submit(False, lambda: extract_model_layers(spec, layers, root, index, source, device,
                                                                trust))

    def chunk(self, *args: Any) -> int:
        return self._submit(True, lambda: dissect_chunk(*args), args)

    def wait(self, handles: list[int]) -> tuple[int, Any]:
        queued = [h for h in handles if h in self._tasks and self._tasks[h][0]]
        if queued and self._parallel(queued):
            for h in queued:
                self._start(h)
        if self._running:
            return self._finish_one()
        handle = min(queued or handles)
        _, call, _ = self._tasks.pop(handle)
        return handle, call()

    def _parallel(self, queued: list[int]) -> bool:
        """Do the queued chunks go to worker processes (starting them the first time)?"""
        if self._workers is None:
            store, activations, settings = self._tasks[queued[0]][2][:3]
            units = sum(len(self._tasks[h][2][3]) for h in queued)
            jobs = worker_count(settings.jobs, units, int(activations.shape[0]))
            if jobs == 1:
                return False
            self._workers = UnitWorkers(store, jobs)
        return True

    def _start(self, handle: int) -> None:
        _, _, (store, activations, settings, units, correct, dataset_info, model_info) = self._tasks.pop(handle)
        result, todo = layer_result(store, activations, settings, units, correct, None, dataset_info, model_info)
        ticket = self._workers.submit(activations, settings, todo, correct)
        self._running[ticket] = (handle, result, len(todo))

    def _finish_one(self) -> tuple[int, dict]:
        while True:
            ticket, unit = self._workers.next()
            handle, result, left = self._running[ticket]
            result.units[unit.unit] = unit
            if left > 1:
                self._running[ticket] = (handle, result, left - 1)
                continue
            del self._running[ticket]
            result.complete = len(result.units) == result.n_units
            return handle, result.to_json()

    def close(self) -> None:
        self._tasks.clear()
        self._running.clear()
        if self._workers is not None:
            self._workers.close()
            self._workers = None
