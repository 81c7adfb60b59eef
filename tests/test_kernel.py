"""The compute kernel, a real process: Jobs run there and come back as the pool's signals; arrays come out of band,
memmaps by their file; keys, cancel and foreground work across the process; and each fault (kill -9, a native
crash, out of memory, a cancel stuck in a C call) restarts the kernel, says so in one line and runs the interrupted
tasks again, none dropped."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import kernel_jobs
import numpy as np
import pytest

from probescope.app.compute.workers import WorkerPool
from probescope.jobs.kernel.process import KernelConfig
from probescope.jobs.kernel.transport import PREFIX, SHM_DIR
from probescope.jobs.protocol import IO, Job, frozen

WAIT_MS = 20_000


@pytest.fixture
def make_pool(qtbot):
    """make(**config) -> a WorkerPool whose compute Jobs go to a kernel process (without torch, to start fast)."""
    pools = []

    def make(**config) -> WorkerPool:
        pool = WorkerPool(kernel="local", kernel_config=KernelConfig(torch=False, **config))
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        process = pool.kernel.process
        pool.shutdown()
        assert process is None or not process.is_alive()


def run(qtbot, pool, job, **options):
    """Submit `job` and wait for its end: (result or None, partials, errors)."""
    got: dict = {"partials": [], "errors": []}
    with qtbot.waitSignal(pool.finished, timeout=WAIT_MS):
        handle = pool.submit(job, name=options.pop("name", "job"), on_partial=got["partials"].append,
                             on_result=lambda value: got.__setitem__("result", value),
                             on_error=got["errors"].append, **options)
    assert handle.done
    return got.get("result"), got["partials"], got["errors"]


def shm_files(pid: int) -> list[Path]:
    return list(SHM_DIR.glob(f"{PREFIX}{pid}-*"))


def test_jobs_run_in_the_kernel_and_everything_else_here(qtbot, make_pool):
    pool = make_pool()
    progress = []
    pool.progress.connect(lambda handle, p: progress.append(p.fraction))
    pid, partials, errors = run(qtbot, pool, Job(kernel_jobs.count, {"n": 3}))
    assert pid == pool.kernel.pid != os.getpid() and partials == [0, 1, 2] and errors == []
    assert progress[-1] == 1.0
    here, _, _ = run(qtbot, pool, Job(kernel_jobs.count, {"n": 1}, compute=False), executor=IO)
    assert here == os.getpid()  # a Job that needs no model runs where it was submitted
    closure, _, _ = run(qtbot, pool, lambda ctx: os.getpid())
    assert closure == os.getpid()  # tasks that are not Jobs run in this process as before
    _, _, errors = run(qtbot, pool, Job(kernel_jobs.count, {"n": "three"}), name="bad count")
    assert errors[0].message.startswith("bad count failed: TypeError")  # a failure in the kernel, told as here
    _, _, errors = run(qtbot, pool, Job(kernel_jobs.refuse, {"path": "/data/ckpt.pth"}), name="open model")
    assert errors[0].input_error and errors[0].message.startswith("/data/ckpt.pth: refusing to load")
    assert errors[0].untrusted.sha256 == "ab" * 32 and errors[0].untrusted.path == Path("/data/ckpt.pth")
    assert pool.kernel.restarts == 0


def test_arrays_travel_out_of_band_and_memmaps_as_their_file(qtbot, make_pool, tmp_path):
    pool = make_pool()
    value, _, _ = run(qtbot, pool, Job(kernel_jobs.array, {"mb": 4}))
    traffic = pool.kernel.received["result"]
    assert value.nbytes == 4 << 20 and value[12345] == 12345 and value.flags.writeable
    assert traffic.out_of_band == 4 << 20 and traffic.in_band < 1000
    assert shm_files(pool.kernel.pid) == []  # mapped and unlinked by the receiver

    path = tmp_path / "act.npy"
    np.save(path, np.arange(8 * 3 * 5, dtype=np.float32).reshape(8, 3, 5))
    value, _, _ = run(qtbot, pool, Job(kernel_jobs.mapped, {"path": str(path)}))
    assert isinstance(value, np.memmap) and Path(value.filename) == path
    assert np.array_equal(value, np.load(path)[2:6])
    assert traffic.out_of_band == 4 << 20 and traffic.in_band < 2000  # no more bytes than its name


def test_what_a_task_sent_once_is_not_sent_again_and_stays_one_object(qtbot, make_pool):
    pool = make_pool()
    value, partials, errors = run(qtbot, pool, Job(kernel_jobs.growing, {"n": 4}))
    assert errors == []
    fixed = partials[0]["fixed"]
    assert all(p["fixed"] is fixed for p in partials) and value["fixed"] is fixed  # one object, held by number
    assert np.array_equal(fixed, np.arange(1 << 16))
    for k, p in enumerate(partials):  # the units of earlier partials are the same objects; only new ones travel
        assert all(p["units"][u] is partials[u]["units"][u] for u in range(k + 1))
        assert p["filled"][k] == k + 1  # an array not frozen is sent whole each time: filled in place, seen so
    assert value["units"][3] is partials[3]["units"][3]
    traffic = pool.kernel.received["partial"]
    filled, once = 4 * (1 << 18), 1 << 19  # the 256 KB filled in place four times, the frozen 512 KB once
    assert traffic.messages == 4 and filled + once < traffic.in_band < filled + once + 4 * 20_000
    assert pool.kernel._channel._held_in == {}  # let go at the task's end

    _, partials, _ = run(qtbot, pool, Job(kernel_jobs.growing, {"n": 2}))  # another task: sent afresh
    assert partials[0]["fixed"] is not fixed and np.array_equal(partials[0]["fixed"], fixed)


def test_a_dataset_crosses_by_name_and_comes_back_as_the_one_opened_here(qtbot, make_pool, small_world):
    """A dataset travels as its spec: the window gets back the very object it holds (the workspace tells the demo's
    first images from the whole by it), not 22,210 rows to unpickle; the kernel its own, opened once."""
    from probescope.core.data.broden import BrodenDataset
    from probescope.jobs.dissection.layer import hold_dataset

    pool = make_pool()
    dataset = BrodenDataset.open(small_world["dataset"])
    spec = hold_dataset(pool.session, dataset)
    value, partials, errors = run(qtbot, pool, Job(kernel_jobs.open_dataset, {"spec": spec}))
    assert errors == [] and value["pid"] == pool.kernel.pid
    assert partials == [dataset] and partials[0] is dataset and value["dataset"] is dataset
    assert pool.kernel.received["result"].in_band < 1_000  # its name, not its rows
    held, _, _ = run(qtbot, pool, Job(kernel_jobs.is_held_here, {"dataset": dataset}))
    assert held is True  # the other way: the kernel's own copy of it, the one its jobs open from the spec

    pool.session.drop("dataset", spec)  # not held here: opened here from its spec, once for every message
    value, partials, _ = run(qtbot, pool, Job(kernel_jobs.open_dataset, {"spec": spec}))
    again = value["dataset"]
    assert again is not dataset and partials[0] is again and again.n_images == dataset.n_images == 12
    assert [again.image_path(i) for i in range(12)] == [dataset.image_path(i) for i in range(12)]


def test_judgments_and_their_trial_set_cross_by_name(qtbot, make_pool, small_world):
    """The judgments the window opened and the trial set it analysed travel as the names its session holds them
    under (at 312,500 trials their pickles took 91 ms of the GUI thread at each Similarity job); the kernel reads and
    analyses its own, and what comes back is the window's own objects. Judgments changed on disk are another name."""
    import os

    from probescope.core.similarity.settings import Filters
    from probescope.jobs.inputs import OpenRequest, judgments_key, open_task
    from probescope.jobs.similarity.tasks import analyse_job

    pool = make_pool()
    request = OpenRequest("judgments", str(small_world["judgments"]), str(small_world["catalog"]))
    loaded, _, _ = run(qtbot, pool, open_task(request))  # (read in the window, as the window does)
    judgments = loaded.value
    (trialset, _), _, _ = run(qtbot, pool, Job(analyse_job, {"judgments": judgments, "filters": Filters()},
                                               compute=False))
    assert pool.session.name_of(trialset) == ("trialset", (judgments_key(request), Filters()))
    got, _, errors = run(qtbot, pool, Job(kernel_jobs.similarity_inputs, {"judgments": judgments,
                                                                           "trialset": trialset}))
    assert errors == [] and got["pid"] == pool.kernel.pid and got["held"] and got["same trials"]
    assert np.array_equal(got["kept"], trialset.kept)
    assert got["judgments"] is judgments and got["trialset"] is trialset
    assert pool.kernel.sent["submit"].out_of_band == 0 and pool.kernel.sent["submit"].in_band < 2_000

    import multiprocessing

    from probescope.jobs.kernel.transport import Channel
    from probescope.jobs.session import Session

    here, there = multiprocessing.Pipe()  # to a kernel on another machine: by value (the files need not be there)
    remote, far = Channel(here, local=False, session=pool.session), Channel(there, local=False, session=Session())
    remote.send(("submit", 1, judgments))
    copy = far.receive()[2]
    assert copy is not judgments and np.array_equal(copy.trials.query, judgments.trials.query)
    assert far.session.held("judgments") == []

    path = small_world["judgments"]
    os.utime(path, ns=(path.stat().st_atime_ns, path.stat().st_mtime_ns + 10**9))  # the file changed
    assert judgments_key(request) != pool.session.name_of(judgments)[1]


def test_a_reference_to_what_a_task_never_sent_is_that_message_s_failure():
    import multiprocessing

    from probescope.jobs.kernel.pickling import Held, HeldPickler
    from probescope.jobs.kernel.transport import Channel, Undecodable

    here, there = multiprocessing.Pipe()
    sender, receiver = Channel(here), Channel(there)
    table = frozen(np.arange(1 << 14, dtype=np.float64))
    sender.send(("partial", 7, table))
    assert np.array_equal(receiver.receive()[2], table)
    import io
    import pickle

    forged = io.BytesIO()  # a frame naming record 5 of task 8, which never sent one
    held = Held()
    held.sent[id(table)] = (5, table)
    HeldPickler(forged, None, None, True, None, held).dump(table)
    here.send_bytes(pickle.dumps(("partial", 8, [], forged.getvalue()), protocol=5))
    with pytest.raises(Undecodable, match="never sent"):
        receiver.receive()
    sender.send(("result", 7, table))  # task 7 goes on: its record is still held there
    assert np.array_equal(receiver.receive()[2], table) and receiver._held_in == {}


def test_latest_request_wins_and_cancel_groups_reach_the_kernel(qtbot, make_pool, tmp_path):
    pool = make_pool()
    delivered = []
    gate = tmp_path / "go"
    first = pool.submit(Job(kernel_jobs.wait_for, {"path": str(gate), "tag": "old"}), name="old", key="view",
                        on_result=delivered.append)
    queued = pool.submit(Job(kernel_jobs.wait_for, {"path": str(gate), "tag": "group"}), name="g", key="ws:a",
                         on_result=delivered.append)
    second = pool.submit(Job(kernel_jobs.wait_for, {"path": str(gate), "tag": "new"}), name="new", key="view",
                         on_result=delivered.append)
    pool.cancel_group("ws")
    assert first.cancelled and queued.cancelled and not second.cancelled
    qtbot.waitUntil(lambda: first.done and queued.done, timeout=WAIT_MS)  # answered before the gate opens
    gate.write_text("")
    qtbot.waitUntil(lambda: second.done, timeout=WAIT_MS)
    assert delivered == ["new"] and pool.kernel.restarts == 0


def test_the_foreground_goes_first_in_the_kernel(qtbot, make_pool):
    pool = make_pool()
    pool.foreground = "dissection"
    order = []
    pool.submit(Job(kernel_jobs.count, {"n": 40, "step_s": 0.02}), name="stream", key="gallery:stream",
                on_result=lambda _: order.append("gallery"))
    qtbot.waitUntil(lambda: any(h.progress for h in pool.active()), timeout=WAIT_MS)
    pool.submit(Job(kernel_jobs.count, {"n": 1}), name="unit", key="dissection:unit",
                on_result=lambda _: order.append("dissection"))
    qtbot.waitUntil(lambda: not pool.active(), timeout=WAIT_MS)
    assert order == ["dissection", "gallery"]


def killed_while_running(qtbot, pool, tmp_path, kill) -> tuple[list[str], int]:
    """`kill(pool)` the kernel while a task runs; once the task has run again to its result: (the notices, the
    killed kernel's pid)."""
    gate = tmp_path / "go"
    results, notices = [], []
    pool.notice.connect(notices.append)
    with qtbot.waitSignal(pool.started, timeout=WAIT_MS):
        pool.submit(Job(kernel_jobs.wait_for, {"path": str(gate)}), name="dissect layer4", on_result=results.append)
    killed = pool.kernel.pid
    with qtbot.waitSignal(pool.notice, timeout=WAIT_MS):
        kill(pool)
    gate.write_text("")
    qtbot.waitUntil(lambda: not pool.active(), timeout=WAIT_MS)
    assert results == ["done"] and pool.kernel.pid != killed and pool.kernel.restarts == 1
    return notices, killed


def test_a_kernel_told_to_stop_lets_its_running_task_clean_up(qtbot, make_pool, tmp_path):
    """The window's shutdown stops the kernel with a task running: the task leaves at its next yield and its own
    clean-up runs before the kernel exits (it did not: a dissection's unit workers and temporary folder were left,
    and multiprocessing warned of leaked semaphores at every refused `gui --screenshot`)."""
    pool = make_pool()
    started, cleaned = tmp_path / "started", tmp_path / "cleaned"
    pool.submit(Job(kernel_jobs.tidy, {"started": str(started), "cleaned": str(cleaned)}), name="tidy")
    qtbot.waitUntil(started.exists, timeout=WAIT_MS)
    process = pool.kernel.process
    pool.shutdown()
    assert not process.is_alive() and cleaned.exists()


def test_kill_9_during_a_task_restarts_the_kernel_and_runs_it_again(qtbot, make_pool, tmp_path):
    def kill(pool) -> None:
        (SHM_DIR / f"{PREFIX}{pool.kernel.pid}-0").write_bytes(b"an array it was writing when it died")
        os.kill(pool.kernel.pid, signal.SIGKILL)

    notices, killed = killed_while_running(qtbot, make_pool(), tmp_path, kill)
    assert notices == ["The compute kernel was killed (SIGKILL: out of memory, or kill -9) while running dissect "
                       "layer4; restarted it and running 1 interrupted task again."]
    assert shm_files(killed) == []  # what the dead kernel left in shared memory is removed


def test_a_native_crash_restarts_the_kernel_and_a_task_that_crashes_it_twice_fails(qtbot, make_pool, tmp_path):
    pool = make_pool()
    notices = []
    pool.notice.connect(notices.append)
    value, _, errors = run(qtbot, pool, Job(kernel_jobs.crash_once, {"marker": str(tmp_path / "m"), "how": "abort"}),
                           name="decode")
    assert value == "survived" and errors == []
    assert notices == ["The compute kernel crashed (SIGABRT) while running decode; restarted it and running 1 "
                       "interrupted task again."]
    _, _, errors = run(qtbot, pool, Job(kernel_jobs.always_abort), name="bad decoder")
    assert [e.message for e in errors] == ["bad decoder failed: the compute kernel crashed (SIGABRT) each time it ran"]
    assert notices[-1] == "The compute kernel crashed (SIGABRT) while running bad decoder; restarted it."
    assert run(qtbot, pool, Job(kernel_jobs.count, {"n": 1}))[0] == pool.kernel.pid  # and it works on


def test_out_of_memory_in_the_kernel_restarts_it(qtbot, make_pool, tmp_path):
    pool = make_pool(memory_room=1 << 30)
    notices = []
    pool.notice.connect(notices.append)
    job = Job(kernel_jobs.crash_once, {"marker": str(tmp_path / "m"), "how": "allocate"})
    value, _, errors = run(qtbot, pool, job, name="extract features")
    assert value == "survived" and errors == []
    assert notices == ["The compute kernel ran out of memory while running extract features; restarted it and "
                       "running 1 interrupted task again."]


def test_a_job_that_exits_restarts_the_kernel_instead_of_ending_its_compute_thread(qtbot, make_pool, tmp_path):
    pool = make_pool()
    notices = []
    pool.notice.connect(notices.append)
    value, _, errors = run(qtbot, pool, Job(kernel_jobs.exit_once, {"marker": str(tmp_path / "m")}), name="fit")
    assert value == "survived" and errors == []
    assert notices == ["The compute kernel stopped at a SystemExit while running fit; restarted it and running 1 "
                       "interrupted task again."]


def test_a_request_superseded_inside_a_long_c_call_is_left_to_finish_without_a_restart(qtbot, make_pool, tmp_path):
    """A newer request of the same key (the next unit) replaces one stuck in a C call: its result is dropped, and
    the kernel is not restarted for it (torch and the models loaded again at every switch)."""
    pool = make_pool()
    results = []
    with qtbot.waitSignal(pool.started, timeout=WAIT_MS):
        old = pool.submit(Job(kernel_jobs.sleep_in_c, {"seconds": 1, "inside": str(tmp_path / "in")}), name="old",
                          key="view", on_result=results.append)
    qtbot.waitUntil((tmp_path / "in").exists, timeout=WAIT_MS)  # inside the sleep now
    new = pool.submit(Job(kernel_jobs.count, {"n": 2}), name="new", key="view", on_result=results.append)
    qtbot.waitUntil(lambda: new.done, timeout=WAIT_MS)
    assert old.cancelled and results == [pool.kernel.pid] and pool.kernel.restarts == 0


def test_cancel_inside_a_long_c_call_restarts_the_kernel_and_says_so(qtbot, make_pool, tmp_path):
    pool = make_pool()
    notices, results = [], []
    pool.notice.connect(notices.append)
    with qtbot.waitSignal(pool.started, timeout=WAIT_MS):
        stuck = pool.submit(Job(kernel_jobs.sleep_in_c, {"seconds": 60, "inside": str(tmp_path / "in")}),
                            name="long call", on_result=results.append)
    behind = pool.submit(Job(kernel_jobs.count, {"n": 2}), name="next", on_result=results.append)
    qtbot.waitUntil((tmp_path / "in").exists, timeout=WAIT_MS)  # inside the sleep now (its progress came before)
    with qtbot.waitSignal(pool.notice, timeout=WAIT_MS):
        stuck.cancel()
    ms = round(pool.kernel.cancel_deadline_s * 1000)  # 80 for a kernel process (the Ray kernel's is longer)
    assert notices == [f"The compute kernel did not stop long call within {ms} ms of its cancel (inside a long call); "
                       "restarted it and running 1 interrupted task again."]
    qtbot.waitUntil(lambda: behind.done, timeout=WAIT_MS)
    assert stuck.done and results == [pool.kernel.pid]  # the queued task ran on the new kernel, the stuck one never

    with qtbot.waitSignal(pool.started, timeout=WAIT_MS):
        yielding = pool.submit(Job(kernel_jobs.count, {"n": 1000, "step_s": 0.005}), name="steps")
    with qtbot.waitSignal(pool.finished, timeout=WAIT_MS):
        yielding.cancel()
    assert pool.kernel.restarts == 1  # a task that yields stops at its next step: no restart


def test_the_kernel_client_needs_no_torch_in_the_window():
    """A fresh interpreter runs a torch Job in a kernel (torch, inference mode) and has no torch itself."""
    code = """
import sys
from PySide6.QtCore import QCoreApplication
import kernel_jobs
from probescope.app.compute.workers import WorkerPool
from probescope.jobs.protocol import Job
app = QCoreApplication([])
pool = WorkerPool(kernel="local")
got = []
pool.submit(Job(kernel_jobs.torch_here), name="torch", on_result=got.append, on_error=got.append)
pool.finished.connect(lambda handle: app.quit())
app.exec()
pool.shutdown()
print(got[0], "torch" in sys.modules)
"""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).parent), *sys.path])}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.stdout.split() == ["(True,", "True)", "False"], done.stderr


WINDOW_ON_THE_DEMO_WORLD = """
import sys
from probescope.jobs import inputs

inputs.DEMO_DATASET_IMAGES, inputs.DEMO_SAMPLES = 40, 40  # here and in the kernel (spawn runs this module's top)

if __name__ == "__main__":
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from probescope.app.window.launch import add_arguments, requests
    from probescope.app.window.main_window import MainWindow
    from probescope.app.window.saved_settings import Settings
    import argparse

    app = QApplication([])
    parser = argparse.ArgumentParser()
    add_arguments(parser)
    args = parser.parse_args([])
    window = MainWindow(Settings(sys.argv[1]), kernel=args.kernel)
    window.show()
    for request in requests(args):
        window.open(request)

    def check():
        try:
            report()
        except Exception:
            app.exit(3)  # a failing check ends the run (its traceback on stderr), never loops on
            raise

    def report():
        if all(ws.is_initial_work_done for ws in window.workspaces.values()) and not window.pool.active():
            d, g, s = (window.workspaces[n] for n in ("dissection", "gallery", "similarity"))
            print(args.kernel, d.data.result.complete, len(d.data.result.units), g.scores.n,
                  s.shown.trialset is not None, "torch" in sys.modules, window.notification.isVisible())
            window.close()
            app.quit()

    timer = QTimer()
    timer.timeout.connect(check)
    timer.start(100)
    app.exec()
"""


def test_the_window_on_the_demo_world_has_no_torch_in_its_process(tmp_path, isolated_cache):
    """`probescope gui`'s default: every workspace shows its results, computed in the kernel, and the window's own
    interpreter never imported torch."""
    script = tmp_path / "window.py"
    script.write_text(WINDOW_ON_THE_DEMO_WORLD)
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen"}
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "settings.ini")], capture_output=True,
                          text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    kernel, complete, units, scored, trials, torch, notified = done.stdout.split()
    assert (kernel, complete, scored, trials, notified) == ("local", "True", "40", "True", "False"), done.stdout
    assert int(units) > 0 and torch == "False", done.stdout


def test_no_window_module_imports_torch():
    """Every module of the window and its widgets imports with torch unavailable: what needs torch is imported
    where it runs (the kernel), so a new import at a module's top fails here, naming its chain."""
    code = """
import importlib, pkgutil, sys, traceback
class NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in ("torch", "torchvision"):
            raise ImportError(f"torch is not for the window's process ({name})")
sys.meta_path.insert(0, NoTorch())
import probescope.app, probescope.widgets
for package in (probescope.widgets, probescope.app):
    for module in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        try:
            importlib.import_module(module.name)
        except ImportError as exc:
            chain = [f.filename.split("src/")[-1] for f in traceback.extract_tb(exc.__traceback__)]
            print(module.name, "->", " > ".join(c for c in chain if "probescope" in c), exc)
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "QT_QPA_PLATFORM": "offscreen"})
    assert done.returncode == 0 and done.stdout == "", done.stdout + done.stderr[-2000:]


def test_the_window_stays_up_and_says_what_happened_when_its_kernel_is_killed(qtbot, settings_path, tmp_path):
    from probescope.app.window.main_window import MainWindow
    from probescope.app.window.saved_settings import Settings

    window = MainWindow(Settings(settings_path), device="cpu", kernel="local")
    window.pool.kernel.config = KernelConfig(torch=False)  # before its first Job starts it: fast starts
    qtbot.addWidget(window)
    window.show()
    gate, results = tmp_path / "go", []
    with qtbot.waitSignal(window.pool.started, timeout=WAIT_MS):
        window.pool.submit(Job(kernel_jobs.wait_for, {"path": str(gate)}), name="dissect layer4",
                           key="dissection:layer", on_result=results.append)
    with qtbot.waitSignal(window.pool.notice, timeout=WAIT_MS):
        os.kill(window.pool.kernel.pid, signal.SIGKILL)
    assert window.isVisible() and window.notification.isVisible()
    assert window.notification.message.text().startswith("The compute kernel was killed (SIGKILL")
    if os.environ.get("PROBESCOPE_KERNEL_SHOT"):  # a picture of the window just after the kill, for the record
        window.grab().save(os.environ["PROBESCOPE_KERNEL_SHOT"])
    gate.write_text("")
    qtbot.waitUntil(lambda: results == ["done"], timeout=WAIT_MS)
    window.close()


def test_a_kernel_that_cannot_start_fails_the_tasks_and_says_so(qtbot, make_pool):
    """No room to map its threads' stacks: the kernel exits before it is ready, twice; the task fails, not hangs."""
    pool = make_pool(memory_room=0)
    notices = []
    pool.notice.connect(notices.append)
    _, _, errors = run(qtbot, pool, Job(kernel_jobs.count, {"n": 1}), name="unit 7")
    assert errors[0].message.startswith("unit 7 failed: the compute kernel could not start (it exited (status 1")
    assert notices == ["The compute kernel exited (status 1); restarted it and running 1 interrupted task again.",
                       errors[0].message.replace("unit 7 failed: the", "The") + "."]


def test_the_window_opens_every_input_with_a_kernel(qtbot, settings_path, small_world):
    """The model opens in the kernel (a Job), which holds it, and the workspaces' compute Jobs run there too; the
    tasks that are not Jobs find the model in their own process by its request, so the window works either way."""
    from windows import open_all, world_requests

    from probescope.app.window.main_window import MainWindow
    from probescope.app.window.saved_settings import Settings

    window = MainWindow(Settings(settings_path), device="cpu", kernel="local")
    qtbot.addWidget(window)
    window.show()
    open_all(qtbot, window, world_requests(small_world))
    assert window.state.layer == "layer4" and window.pool.kernel.received["result"].messages > 1
    assert not window.notification.isVisible(), (window.notification.message.text(),
                                                 window.notification.details.toPlainText()[-2000:])
    window.close()


def test_a_kernel_started_early_is_the_one_the_first_job_runs_in(qtbot, make_pool):
    """`probescope gui` starts the kernel before it imports Qt; the pool's first Job takes that process, and an
    early kernel of another config is stopped, not left running."""
    from probescope.jobs.kernel import local

    local.start_early(KernelConfig(torch=False, io_threads=1))
    early = local._early[1]  # noqa: SLF001
    pid, _, _ = run(qtbot, make_pool(io_threads=1), Job(kernel_jobs.count, {"n": 1}))
    assert pid == early.pid and local._early is None  # noqa: SLF001
    local.start_early(KernelConfig(torch=False, io_threads=2))
    other = local._early[1]  # noqa: SLF001
    pid, _, _ = run(qtbot, make_pool(io_threads=1), Job(kernel_jobs.count, {"n": 1}))
    assert pid != other.pid and not other.is_alive()


MENUS_WITHOUT_TORCH = """
import sys
from PySide6.QtCore import QTimer
from PySide6.QtWidgets import QApplication
from shiboken6 import isValid
from probescope.main import main

if __name__ == "__main__":  # (not again in the kernel: spawn runs this module's top there)
    assert main(["gui", "--device", "cuda:7", "--screenshot", "x.png"]) == 2  # refused, its devices asked of a child
    app = QApplication([])
    from probescope.app.window.main_window import MainWindow
    from probescope.app.window.menus import about_box
    from probescope.app.window.saved_settings import Settings
    from probescope.jobs.kernel.process import KernelConfig
    window = MainWindow(Settings(sys.argv[1]), device="cpu", kernel="local")
    window.pool.kernel.config = KernelConfig(torch=False)
    window.show()
    def close_dialogs():
        for w in QApplication.topLevelWidgets():
            if w is not window and w.isVisible() and w.isModal():
                w.close()
    closer = QTimer()
    closer.timeout.connect(close_dialogs)
    closer.start(20)
    triggered = []
    for action in list(window.menus.actions):
        if isValid(action) and action.text() != "&Quit":  # (the devices' choices are made anew when the kernel says)
            action.trigger()
            triggered.append(action.text())
            app.processEvents()
    about_box(window)
    print(len(triggered), "torch" in sys.modules)
    window.close()
"""


def test_no_menu_action_the_about_box_or_device_brings_torch_into_the_window(tmp_path, isolated_cache):
    """Every menu action (dialogs they open are closed at once), the About box (torch's version read from its file)
    and `gui --device cuda:7` (refused in one line: the devices asked of a child interpreter) leave torch out of the
    window's process."""
    script = tmp_path / "menus.py"
    script.write_text(MENUS_WITHOUT_TORCH)
    done = subprocess.run([sys.executable, str(script), str(tmp_path / "settings.ini")], capture_output=True,
                          text=True, env={**os.environ, "QT_QPA_PLATFORM": "offscreen"}, timeout=300, cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "argument --device: device 'cuda:7' is not on" in done.stderr
    triggered, torch = done.stdout.split()[-2:]
    assert int(triggered) > 20 and torch == "False", done.stdout + done.stderr[-2000:]


def test_a_kernel_that_speaks_another_protocol_is_refused_in_one_line(qtbot, make_pool, monkeypatch):
    """A kernel says its protocol version when ready (a Ray kernel may run another probescope): one that differs
    is stopped, and the tasks fail with one line saying what to install, not on the first message misread."""
    from probescope.jobs.kernel import messages

    pool = make_pool()
    notices = []
    pool.notice.connect(notices.append)
    monkeypatch.setattr(messages, "PROTOCOL", messages.PROTOCOL + 1)  # this window: the kernel speaks the old one
    _, _, errors = run(qtbot, pool, Job(kernel_jobs.count, {"n": 1}), name="count")
    spoken = f"speaks protocol {messages.PROTOCOL - 1} and this window {messages.PROTOCOL}"
    assert len(errors) == 1 and errors[0].message.startswith("count failed: the compute kernel could not start")
    assert spoken in errors[0].message and "\n" not in errors[0].message
    assert any(spoken in line for line in notices)


def test_every_type_that_crosses_by_name_is_registered_by_its_owner_and_exists():
    """The transport and its picklers import no domain type: the modules that own a crossing register the class by
    its path (a renamed or moved class fails here, instead of pickling by value without a word), and records sent
    once say so in their own class."""
    import importlib

    import probescope.jobs.dissection.layer  # noqa: F401  (the owners: importing them registers their crossings)
    import probescope.jobs.similarity.tasks  # noqa: F401
    from probescope.core.dissection.labels import LabelStore
    from probescope.core.dissection.results import UnitResult
    from probescope.jobs.kernel import pickling

    assert len(pickling._BY_NAME) == 3  # noqa: SLF001  (the dataset, the judgments, their trial set)
    for path in pickling._BY_NAME:  # noqa: SLF001
        module, name = path.rsplit(".", 1)
        assert isinstance(getattr(importlib.import_module(module), name), type), path
    assert LabelStore.SENT_ONCE and UnitResult.SENT_ONCE
    for module in (pickling, importlib.import_module("probescope.jobs.kernel.transport")):
        source = Path(module.__file__).read_text()
        assert "from probescope.core" not in source and "from probescope.jobs.dissection" not in source
