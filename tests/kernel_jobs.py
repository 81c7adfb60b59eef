"""Jobs the kernel tests send to a real kernel process: module-level functions, so they travel by name."""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np

from probescope.jobs.protocol import Partial, Progress, TaskContext, frozen


def count(ctx: TaskContext, n: int, step_s: float = 0.0):
    """Partials 0..n-1 with progress, then the kernel's pid."""
    for i in range(n):
        time.sleep(step_s)
        yield Progress((i + 1) / n, f"step {i}")
        yield Partial(i)
    return os.getpid()


def array(ctx: TaskContext, mb: int) -> np.ndarray:
    return np.arange(mb * (1 << 20) // 4, dtype=np.float32)


def mapped(ctx: TaskContext, path: str) -> np.ndarray:
    """The cache's way: a read-only memmap of an .npy file, one block of its rows."""
    return np.load(path, mmap_mode="r")[2:6]


def wait_for(ctx: TaskContext, path: str, tag: str = "done"):
    """Yield until `path` exists (the test's signal to finish), then return `tag`."""
    while not Path(path).exists():
        time.sleep(0.01)
        yield Progress(None, "waiting")
    return tag


def tidy(ctx: TaskContext, started: str, cleaned: str):
    """Runs until cancelled; on the way out (its `finally`) it writes `cleaned`, as a task lets go of what it holds."""
    Path(started).touch()
    try:
        while True:
            time.sleep(0.01)
            yield Progress(None, "holding")
    finally:
        time.sleep(0.2)  # (a unit worker pool takes a moment to stop)
        Path(cleaned).touch()


def sleep_in_c(ctx: TaskContext, seconds: float, inside: str):
    """One long call that does not come back to Python (as a long torch or decoder call). The file `inside` is
    written once the task is past its last yield: from then on only the call is left (its progress came before it,
    and a cancel that beat the task there stops it at that yield)."""
    yield Progress(0.0, "sleeping")
    Path(inside).write_text("sleeping")
    time.sleep(seconds)
    return "woke"


def crash_once(ctx: TaskContext, marker: str, how: str):
    """The first run (no `marker` file yet) dies as `how` says: 'abort' (a native crash), 'allocate' (past the
    kernel's memory limit); a run after that returns 'survived'."""
    yield Progress(0.1, "about to fail")
    if not Path(marker).exists():
        Path(marker).write_text("ran")
        if how == "abort":
            os.abort()
        np.ones(8 << 30, dtype=np.uint8)  # 8 GiB: past any limit the tests set
    return "survived"


def always_abort(ctx: TaskContext):
    yield Progress(0.1, "about to abort")
    os.abort()


def torch_here(ctx: TaskContext) -> tuple[bool, bool]:
    """(torch imported in this process, computing in inference mode)."""
    import sys

    import torch

    return "torch" in sys.modules, torch.is_inference_mode_enabled()


def refuse(ctx: TaskContext, path: str):
    """Stop at a file that would run code, as a loader does."""
    from probescope.core.trust import UntrustedFile

    yield Progress(0.5, "hashing")
    raise UntrustedFile(Path(path), "ab" * 32, "pickle checkpoint")


def exit_once(ctx: TaskContext, marker: str):
    """A library that calls sys.exit on its first run (it would end the kernel's compute thread)."""
    import sys

    yield Progress(0.1, "calling a library")
    if not Path(marker).exists():
        Path(marker).write_text("ran")
        sys.exit(3)
    return "survived"


def growing(ctx: TaskContext, n: int):
    """A layer's way: partials that each hold every unit so far (the same UnitResult objects), a table marked
    frozen, and an array filled in place."""
    from probescope.core.dissection.results import UnitResult

    fixed = frozen(np.arange(1 << 16, dtype=np.float64))
    filled = np.zeros(1 << 15)
    units: dict[int, UnitResult] = {}
    for i in range(n):
        units[i] = UnitResult(i, 0.5, 10, 1, None, {}, [], [], top_atoms=[(i, 0.1)] * 200)
        filled[i] = i + 1
        yield Partial({"units": dict(units), "fixed": fixed, "filled": filled})
    return {"units": units, "fixed": fixed}


def open_dataset(ctx: TaskContext, spec):
    """The dataset `spec` names, opened in the kernel: as a partial, then with the kernel's pid."""
    from probescope.jobs.dissection.layer import dataset_of

    dataset = dataset_of(ctx, spec)
    yield Partial(dataset)
    return {"dataset": dataset, "pid": os.getpid()}


def is_held_here(ctx: TaskContext, dataset) -> bool:
    """`dataset`, sent to the kernel, is the one the kernel's jobs get from its spec."""
    from probescope.jobs.dissection.layer import DatasetSpec, dataset_of

    return dataset is dataset_of(ctx, DatasetSpec.of(dataset))


def similarity_inputs(ctx: TaskContext, judgments, trialset):
    """What the kernel got for the window's judgments and trial set: the ones its session holds (read and analysed
    there from their names), sent back with the kernel's pid and what the window can compare."""
    return {"pid": os.getpid(), "held": ctx.session.name_of(judgments) is not None
            and ctx.session.name_of(trialset) is not None, "same trials": trialset.trials is judgments.trials,
            "kept": trialset.kept, "judgments": judgments, "trialset": trialset}
