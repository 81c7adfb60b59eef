"""The worker pool: results in the GUI thread, progress, cancel, latest request wins, errors, shutdown."""

from __future__ import annotations

import os
import sys
import threading
import time

import pytest

from probescope.app.compute.threads import IO_NICENESS
from probescope.app.compute.workers import WorkerPool
from probescope.core.errors import InputError
from probescope.jobs.protocol import COMPUTE, IO, Partial, Progress


@pytest.fixture(params=["thread", "local"])
def pool(qtbot, request):
    """Both kernels: with 'local', tasks that are not Jobs (all of these) still run in this process, as before."""
    p = WorkerPool(io_threads=2, kernel=request.param)
    yield p
    p.shutdown()


def test_result_arrives_in_gui_thread_with_progress_and_partials(qtbot, pool):
    seen: dict = {"partials": [], "progress": []}

    def task(cancel):
        for i in range(3):
            yield Progress((i + 1) / 3, f"step {i}")
            yield Partial(i)
        return threading.current_thread().name

    def on_result(value):
        seen["result"] = value
        seen["result_thread"] = threading.current_thread() is threading.main_thread()

    pool.progress.connect(lambda h, p: seen["progress"].append(p.fraction))
    with qtbot.waitSignal(pool.finished, timeout=5000):
        pool.submit(task, name="count", on_result=on_result, on_partial=seen["partials"].append)
    assert seen["result"] == "probescope-compute"
    assert seen["result_thread"]
    assert seen["partials"] == [0, 1, 2]
    assert seen["progress"][-1] == 1.0
    assert pool.active() == []


def test_compute_tasks_run_in_inference_mode_and_io_tasks_in_pool(qtbot, pool):
    """In-process compute runs under inference mode; with a kernel, the window's compute thread runs only tasks
    that need no torch (those that do are Jobs, run in the kernel under inference mode: test_kernel.py), so it
    leaves torch alone."""
    import torch

    results = {}
    with qtbot.waitSignal(pool.finished, timeout=5000):
        pool.submit(lambda cancel: torch.is_inference_mode_enabled(), name="mode",
                    on_result=lambda v: results.__setitem__("compute", v))
    with qtbot.waitSignal(pool.finished, timeout=5000):
        pool.submit(lambda cancel: threading.current_thread().name, name="io", executor=IO,
                    on_result=lambda v: results.__setitem__("io", v))
    assert results["compute"] is (pool.kernel is None)
    assert results["io"].startswith("probescope-io")
    assert not torch.is_inference_mode_enabled()  # the GUI thread is untouched


def test_cancel_stops_a_long_task_and_drops_its_result(qtbot, pool):
    steps = []
    results = []

    def long_task(cancel):
        for i in range(10_000):
            steps.append(i)
            time.sleep(0.002)
            yield Progress(i / 10_000)
        return "finished"

    with qtbot.waitSignal(pool.started, timeout=5000):
        handle = pool.submit(long_task, name="long", on_result=results.append)
    qtbot.waitUntil(lambda: len(steps) > 5, timeout=5000)
    with qtbot.waitSignal(pool.finished, timeout=5000):
        handle.cancel()
    assert results == []
    assert len(steps) < 10_000


def test_latest_request_wins(qtbot, pool):
    gate = threading.Event()
    delivered = []

    def slow(value):
        def task(cancel):
            gate.wait(5)
            yield Progress(0.5)
            return value
        return task

    first = pool.submit(slow("old"), name="old", key="view", on_result=delivered.append)
    second = pool.submit(slow("new"), name="new", key="view", on_result=delivered.append)
    assert first.cancelled and not second.cancelled
    gate.set()
    qtbot.waitUntil(lambda: first.done and second.done, timeout=5000)
    assert delivered == ["new"]


def test_stale_result_already_queued_is_dropped(qtbot, pool):
    """A result computed before the newer request arrived is still dropped at delivery."""
    delivered = []
    first = pool.submit(lambda cancel: "old", name="old", key="view", executor=IO, on_result=delivered.append)
    assert pool._io.waitForDone(5000)  # noqa: SLF001  (the decode pool idle: the old result waits in the event queue)
    pool.submit(lambda cancel: "new", name="new", key="view", executor=IO, on_result=delivered.append)
    qtbot.waitUntil(lambda: first.done and not pool.active(), timeout=5000)
    assert delivered == ["new"]


def test_errors_are_reported_not_raised(qtbot, pool):
    def bad_input(cancel):
        raise InputError("not a model file", "/tmp/x.pt")
        yield

    def bug(cancel):
        yield Progress(0.1)
        return 1 / 0

    with qtbot.waitSignal(pool.failed, timeout=5000) as blocker:
        pool.submit(bad_input, name="open model")
    error = blocker.args[1]
    assert error.input_error and error.message == "/tmp/x.pt: not a model file"

    with qtbot.waitSignal(pool.failed, timeout=5000) as blocker:
        pool.submit(bug, name="score", executor=COMPUTE)
    error = blocker.args[1]
    assert not error.input_error
    assert error.message == "score failed: ZeroDivisionError: division by zero"
    assert "Traceback" in error.details
    # the thread survived the failure
    with qtbot.waitSignal(pool.finished, timeout=5000):
        pool.submit(lambda cancel: 2, name="after")


def test_shutdown_cancels_and_joins(qtbot):
    pool = WorkerPool()
    started = threading.Event()

    def forever(cancel):
        started.set()
        while True:
            time.sleep(0.005)
            yield None

    pool.submit(forever, name="forever")
    pool.submit(forever, name="forever-io", executor=IO)
    assert started.wait(5)
    t0 = time.monotonic()
    pool.shutdown()
    assert time.monotonic() - t0 < 2
    assert pool.active() == []
    assert not [t for t in threading.enumerate() if t.name.startswith("probescope-")]


def test_core_style_callbacks_report_progress_and_cancel(qtbot, pool):
    """A task hands ctx.progress / ctx.cancelled to a core function that runs long between yields."""
    from probescope.core.tasks import check_cancel, report

    def core_function(progress, cancel):
        for i in range(1000):
            check_cancel(cancel)
            report(progress, i / 1000, f"item {i}")
            time.sleep(0.002)
        return "done"

    def task(ctx):
        return core_function(ctx.progress, ctx.cancelled)
        yield

    messages = []
    pool.progress.connect(lambda h, p: messages.append(p.message))
    handle = pool.submit(task, name="core", on_result=messages.append)
    qtbot.waitUntil(lambda: len(messages) >= 2, timeout=5000)
    with qtbot.waitSignal(pool.finished, timeout=5000):
        handle.cancel()
    assert messages[0].startswith("item") and "done" not in messages


def test_a_bug_in_a_view_callback_is_reported_not_raised(qtbot, pool):
    def broken_view(_value):
        raise KeyError("column")

    with qtbot.waitSignal(pool.failed, timeout=5000) as blocker:
        pool.submit(lambda ctx: 1, name="table", on_result=broken_view)
    error = blocker.args[1]
    assert error.message == "showing the result of table failed: KeyError: 'column'"
    assert "broken_view" in error.details
    qtbot.waitUntil(lambda: not pool.active(), timeout=5000)


def test_the_foreground_goes_first_in_the_compute_thread(qtbot, pool):
    """Queued tasks of the foreground group run before older ones of other groups, and a running task of another
    group steps aside for them at its next yield."""
    order: list[str] = []
    started = threading.Event()

    def background(ctx):
        for step in range(3):
            order.append(f"background {step}")
            started.set()
            time.sleep(0.05)
            yield Progress(None)

    def task(name):
        return lambda ctx: order.append(name)

    pool.foreground = "dissection"
    pool.submit(background, name="stream", key="gallery:stream")
    assert started.wait(5)
    pool.submit(task("other"), name="other", key="similarity:fit")
    pool.submit(task("first units"), name="layer", key="dissection:layer")
    qtbot.waitUntil(lambda: not pool.active(), timeout=5000)
    at = order.index("first units")
    assert order.index("other") == len(order) - 1  # the older task of another group waited for the stream
    assert 0 < at < order.index("background 2")  # between two of the stream's steps


def test_without_a_foreground_the_compute_thread_takes_tasks_in_order(qtbot, pool):
    order: list[str] = []
    gate = threading.Event()
    pool.submit(lambda ctx: gate.wait(5), name="gate", key="gallery:gate")
    for name in ("a", "b", "c"):
        pool.submit(lambda ctx, name=name: order.append(name), name=name, key=f"{name}:task")
    gate.set()
    qtbot.waitUntil(lambda: not pool.active(), timeout=5000)
    assert order == ["a", "b", "c"]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a nice value per thread is Linux's")
def test_the_decode_pool_runs_below_the_gui_thread(qtbot, pool):
    """The pool's threads read live scores beside a busy kernel: the GUI thread goes first for a core."""
    def own_niceness(cancel):
        return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())

    seen = []
    for _ in range(3):  # (each of the pool's threads, reused, lowered once)
        with qtbot.waitSignal(pool.finished, timeout=5000):
            pool.submit(own_niceness, name="nice", executor=IO, on_result=seen.append)
    gui = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    assert seen == [min(19, gui + IO_NICENESS)] * 3
    assert os.getpriority(os.PRIO_PROCESS, threading.get_native_id()) == gui  # the GUI thread is untouched


def test_a_finished_task_is_freed_at_once_not_by_the_cycle_collector(qtbot, pool):
    """Nothing of a task outlives its end but through the cycle collector: a handle in a reference cycle with its
    context stayed until a full collection. At 50,000 gallery samples 500 of them were waiting, each holding a
    snapshot of the live scores, and each full collection took 50-120 ms in whichever thread allocated, holding the
    GIL the GUI thread waited for (the Gallery's longest stalls)."""
    import gc
    import weakref

    gc.collect()
    thresholds = gc.get_threshold()
    gc.set_threshold(0)  # no collection at all: neither the automatic one nor the pool's in the GUI thread
    try:
        handles = []
        for executor in (COMPUTE, IO):
            handle = pool.submit(lambda ctx: [1] * 1000, name="one", executor=executor, key=f"key {executor}",
                                 on_result=lambda value: None)
            handles.append(weakref.ref(handle))
            del handle
            qtbot.waitUntil(lambda: not pool.active(), timeout=5000)
        qtbot.waitUntil(lambda: all(ref() is None for ref in handles), timeout=2000)
    finally:
        gc.set_threshold(*thresholds)


class Freed:
    """One half of a reference cycle that records the thread the collector freed it in."""

    threads: list[str] = []

    def __init__(self):
        self.cycle = [self]

    def __del__(self):
        Freed.threads.append(threading.current_thread().name)


def test_garbage_cycles_are_collected_in_the_gui_thread_while_the_pool_runs(qtbot, pool):
    """A cycle is freed in the GUI thread, never in a worker whose allocations set the collector off: a cycle holding
    Qt widgets (pyqtgraph's menus) freed in a worker thread while the GUI thread walked the widget list crashed the
    window's tests natively. Automatic collection is back once the pool has shut down."""
    import gc

    Freed.threads.clear()
    assert not gc.isenabled()
    kept = []
    for executor in (COMPUTE, IO):
        Freed()
        with qtbot.waitSignal(pool.finished, timeout=5000):  # enough allocation, kept, for several collections
            pool.submit(lambda ctx: [[] for _ in range(200_000)], name="allocate", executor=executor,
                        on_result=kept.append)
        qtbot.waitUntil(lambda: len(Freed.threads) == len(kept), timeout=3000)
    assert Freed.threads == [threading.main_thread().name] * 2
    pool.shutdown()
    assert gc.isenabled()


def test_the_gui_thread_collects_the_oldest_generation_due_and_honours_a_zero_threshold():
    import gc

    from probescope.app.compute.gui_collector import collect_due

    thresholds = gc.get_threshold()
    gc.collect()
    gc.disable()  # as while a pool runs
    try:
        gc.set_threshold(50, 1_000_000, 1_000_000)
        kept = [[] for _ in range(100)]
        assert collect_due() == 0 and gc.get_count()[0] < 50
        assert collect_due() is None  # nothing allocated since
        gc.set_threshold(50, 0, 1_000_000)
        kept += [[] for _ in range(100)]
        assert collect_due() == 1  # generation 1 (and 0 with it)
        gc.set_threshold(0)
        kept += [[] for _ in range(100)]
        assert collect_due() is None
    finally:
        gc.set_threshold(*thresholds)
        gc.enable()
    assert len(kept) == 300


def test_only_the_users_cancel_may_restart_the_kernel():
    """The window cancels tasks itself when their inputs change (a cleared view, a newer request, a pause): those
    are superseded, left to stop at their next step. Only a Cancel the user presses may get the compute kernel
    restarted when the task is stuck in a long call (issue 45: a layer switch during a cached-drawing lookup
    restarted the kernel). Every `pool.cancel(` in the app is one or the other, visibly."""
    import re
    from pathlib import Path

    import probescope.app as app

    users = re.compile(r"(clicked|cancel_requested)\.connect\(lambda[^:]*: *(self\.)?pool\.cancel\(")
    wrong = []
    for path in Path(app.__file__).parent.rglob("*.py"):
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "pool.cancel(" in line and "superseded=True" not in line and not users.search(line):
                wrong.append(f"{path.name}:{number}: {line.strip()}")
    assert not wrong
