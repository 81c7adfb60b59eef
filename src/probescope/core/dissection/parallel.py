"""Units on every core: worker processes that dissect the units of a layer, sharing its inputs through files.

    with UnitWorkers(store, jobs=4) as workers:
        result = dissect(store, activations, settings, workers=workers, cancel=...)   # units come back as they finish

Each worker is a fresh (spawned) process: no thread or lock of the caller's (a GUI's, a kernel's) comes along. It
memory-maps the label store from the folder it is kept in (the label cache; a temporary copy when the store only lives
in memory) and reads the activations from their .npy file (a temporary copy of an array held in memory), so the pages
are the kernel's, shared by every process, not copies. Units go out in runs of consecutive units (read as one block)
and come back one at a time; a unit's answer does not depend on the process or on the units dissected before it, so
the results are the same for any number of workers. The caller's cancel check is polled while waiting; cancelling,
an error or leaving the `with` block stops the workers. Nothing here knows of Qt.
"""

from __future__ import annotations

import multiprocessing
import os
import queue
import shutil
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from probescope.core.dissection.counts import DatasetCounts
from probescope.core.dissection.engine import unit_results
from probescope.core.dissection.label_cache import open_store, write_store
from probescope.core.dissection.labels import LabelStore
from probescope.core.dissection.results import UnitResult
from probescope.core.dissection.settings import DissectionSettings
from probescope.core.tasks import CancelCheck, check_cancel

RUN_UNITS = 8  # consecutive units per task: one block read, several tasks per worker to even out slow units
AUTO_MIN_WORK = 1_000_000  # units x images: below it a run ends sooner in one process than processes start
_POLL_S = 0.1  # how often the cancel check and the workers' liveness are looked at while waiting


def available_cores() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


def worker_count(jobs: int, units: int, images: int, spare_cores: int = 0) -> int:
    """Processes for dissecting `units` units over `images` images with the `jobs` setting, at most one per unit:
    N > 0 is N; 0 (automatic) is one per core less `spare_cores` (the window keeps one for itself), or 1 (this
    process) for runs under AUTO_MIN_WORK, which a worker's start-up (importing torch, opening the store) outlasts."""
    if jobs > 0:
        return max(1, min(jobs, units))
    if units * images < AUTO_MIN_WORK:
        return 1
    return max(1, min(available_cores() - spare_cores, units))


class WorkerLost(RuntimeError):
    """A worker process ended without answering (killed, out of memory); the units it held are not done."""


class UnitWorkers:
    """`jobs` processes dissecting units of layers over one label store (see the module docstring)."""

    def __init__(self, store: LabelStore, jobs: int):
        self._tmp = Path(tempfile.mkdtemp(prefix="probescope-units-"))
        self._files: dict[int, str] = {}  # id of an activations array -> the .npy the workers read
        self._kept: list[np.ndarray] = []  # the arrays behind those ids (an id is only unique while they live)
        folder = store.files
        if folder is None:
            folder = self._tmp / "store"
            write_store(store, folder)
        context = multiprocessing.get_context("spawn")
        self._tasks = context.Queue()
        self._answers = context.Queue()
        self._processes = [context.Process(target=_serve, args=(str(folder), self._tasks, self._answers, os.getpid()),
                                           name=f"probescope unit worker {k}", daemon=True) for k in range(jobs)]
        self._ticket = 0
        for p in self._processes:
            p.start()

    def __enter__(self) -> UnitWorkers:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def submit(self, activations: np.ndarray, settings: DissectionSettings, units: Sequence[int],
               correct: np.ndarray | None = None) -> int:
        """Queue `units` of the layer `activations` (images, units, h, w); a ticket their results come back with."""
        path = self._file_of(activations)
        units = [int(u) for u in units]
        self._ticket += 1
        for start in range(0, len(units), RUN_UNITS):
            self._tasks.put((self._ticket, path, settings, units[start:start + RUN_UNITS], correct))
        return self._ticket

    def next(self, cancel: CancelCheck | None = None) -> tuple[int, UnitResult]:
        """(ticket, result) of the next unit to finish, of any submission. A worker's error is raised here (the
        pool is then to be closed); so is Cancelled when `cancel` says so, and WorkerLost."""
        while True:
            check_cancel(cancel)
            try:
                kind, ticket, value = self._answers.get(timeout=_POLL_S)
            except queue.Empty:
                lost = [p for p in self._processes if p.exitcode is not None]
                if lost:
                    raise WorkerLost(f"a unit worker process ended (exit code {lost[0].exitcode}); the units "
                                     "finished so far are kept") from None
                continue
            if kind == "error":
                raise value
            return ticket, value

    def run(self, activations: np.ndarray, settings: DissectionSettings, units: Sequence[int],
            correct: np.ndarray | None = None, cancel: CancelCheck | None = None) -> Iterator[UnitResult]:
        """Dissect `units` (no other submission pending); their results as they finish."""
        self.submit(activations, settings, units, correct)
        for _ in range(len(units)):
            yield self.next(cancel)[1]

    def _file_of(self, activations: np.ndarray) -> str:
        """The .npy file holding `activations`: its own when it is a memory-mapped .npy, else a temporary copy."""
        key = id(activations)
        if key not in self._files:
            self._files[key] = _npy_file(activations) or self._copy(activations)
            self._kept.append(activations)
        return self._files[key]

    def _copy(self, activations: np.ndarray) -> str:
        path = self._tmp / f"activations-{len(self._files)}.npy"
        np.save(path, np.ascontiguousarray(activations, dtype=np.float32), allow_pickle=False)
        return str(path)

    def close(self) -> None:
        """Stop the workers (those busy are terminated: their units are not needed any more) and remove the
        temporary files."""
        for p in self._processes:
            if p.is_alive():
                p.terminate()
        for p in self._processes:
            p.join(5)
            if p.is_alive():
                p.kill()
                p.join()
        for q in (self._tasks, self._answers):
            q.close()
            q.cancel_join_thread()
        self._processes = []
        self._kept.clear()
        shutil.rmtree(self._tmp, ignore_errors=True)


def _npy_file(activations: np.ndarray) -> str | None:
    """The .npy file a memory-mapped array is all of (np.load(..., mmap_mode='r')), else None."""
    if not isinstance(activations, np.memmap) or not activations.filename:
        return None
    path = str(activations.filename)
    try:
        whole = np.load(path, mmap_mode="r", allow_pickle=False)
    except (OSError, ValueError):
        return None
    same = (whole.shape == activations.shape and whole.dtype == activations.dtype
            and whole.offset == activations.offset and activations.flags.c_contiguous)
    return path if same else None


def process_memory_mb(pid: int) -> tuple[float, float] | None:
    """(peak resident memory, memory of its own now) of a process in MiB, where /proc tells them (Linux), for
    reports of a run's memory. The peak (VmHWM) counts pages shared with other processes (libraries, the
    memory-mapped label store and activations) in full; its own memory (private pages, smaps_rollup) is what it adds
    to the machine's."""
    try:
        with open(f"/proc/{pid}/status") as fh:
            peak = next(int(line.split()[1]) for line in fh if line.startswith("VmHWM"))
        with open(f"/proc/{pid}/smaps_rollup") as fh:
            own = sum(int(line.split()[1]) for line in fh if line.startswith(("Private_Clean", "Private_Dirty")))
    except (OSError, StopIteration, ValueError):
        return None
    return peak / 1024, own / 1024


def _serve(store_folder: str, tasks: Any, answers: Any, caller: int) -> None:
    """A worker's life: open the store, then dissect runs of units until terminated (or orphaned: `caller`, the
    process that started it, is gone; it may be gone before this one has even imported torch)."""
    import torch  # (torch: the window's process imports this module, never torch)

    threading.Thread(target=_leave_when_orphaned, args=(caller,), daemon=True).start()
    torch.set_num_threads(1)  # one core each
    store = open_store(Path(store_folder))
    counts: dict[int, DatasetCounts] = {}  # the dataset side, kept across tasks (per cache size)
    opened: deque[tuple[str, np.ndarray]] = deque(maxlen=2)
    while True:
        ticket, path, settings, units, correct = tasks.get()
        try:
            activations = next((a for p, a in opened if p == path), None)
            if activations is None:
                activations = np.load(path, mmap_mode="r", allow_pickle=False)
                opened.append((path, activations))
            if settings.cache_bytes not in counts:
                counts[settings.cache_bytes] = DatasetCounts(store, settings.cache_bytes)
            for unit in unit_results(store, activations, settings, units, correct=correct,
                                     counts=counts[settings.cache_bytes]):
                answers.put(("unit", ticket, unit))
        except Exception as exc:  # noqa: BLE001  (the caller raises it: an InputError stays one)
            answers.put(("error", ticket, exc))


def _leave_when_orphaned(parent: int) -> None:
    """End the worker once its caller is gone (killed): nobody reads its answers, whose pipe may be full, so it
    leaves at once, without the exit handlers that would wait to flush them."""
    while os.getppid() == parent:
        time.sleep(1.0)
    os._exit(0)
