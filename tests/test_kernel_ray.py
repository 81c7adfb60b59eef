"""The compute kernel as a Ray actor, on one real Ray head started for this module on 127.0.0.1 (every listener on
loopback, token authentication on), reached through Ray Client (ray://) as a remote cluster is: the local kernel's
tests run here against it (this module's `make_pool`), and a lost actor, a task lost twice, results that travel in
band, and a real window on the Ray kernel."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import time
from pathlib import Path

import kernel_jobs
import numpy as np
import pytest

from oracles.processes import start_ray_head, stop_ray_head

ray = pytest.importorskip("ray")
pytest.importorskip("grpc", reason="Ray Client needs ray[client] (grpcio)")

from test_kernel import (  # noqa: E402,F401  (the local kernel's tests, run here with this module's make_pool)
    WAIT_MS,
    killed_while_running,
    run,
    test_a_request_superseded_inside_a_long_c_call_is_left_to_finish_without_a_restart,
    test_cancel_inside_a_long_c_call_restarts_the_kernel_and_says_so,
    test_jobs_run_in_the_kernel_and_everything_else_here,
    test_latest_request_wins_and_cancel_groups_reach_the_kernel,
    test_the_foreground_goes_first_in_the_kernel,
)

import probescope  # noqa: E402
from probescope.app.compute.workers import WorkerPool  # noqa: E402
from probescope.jobs.kernel.process import KernelConfig  # noqa: E402
from probescope.jobs.kernel.spec import KernelSpec  # noqa: E402
from probescope.jobs.protocol import Job  # noqa: E402

TESTS = Path(__file__).parent
PATH = os.pathsep.join([str(TESTS), str(Path(probescope.__file__).parents[1])])  # kernel_jobs and probescope there
HEAD_START_S = 90


def reread_auth() -> None:
    """Make this process's Ray read RAY_AUTH_MODE and the token again (it read them when it was imported, here before
    this module set them), as ray._private.authentication.authentication_token_setup does."""
    from ray._raylet import AuthenticationTokenLoader, Config

    Config.initialize("")
    AuthenticationTokenLoader.instance().reset_cache()


@pytest.fixture(scope="module")
def ray_head(tmp_path_factory):
    """ray://127.0.0.1:PORT of a Ray head of 2 CPUs on this machine, connected to; stopped at the module's end.

    RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 keeps the node's address on loopback (Ray otherwise swaps 127.0.0.1 for the
    machine's network address and listens there), and a fresh token guards it all the same."""
    token = secrets.token_hex(32)
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    env = {**os.environ, **auth, "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0",
           "PROBESCOPE_CACHE": str(tmp_path_factory.mktemp("ray-cache")),
           "PYTHONPATH": PATH}
    head, log, temp, client_port = start_ray_head(env, cpus=2)
    address = f"ray://127.0.0.1:{client_port}"
    with pytest.MonkeyPatch.context() as patch:
        for name, value in auth.items():
            patch.setenv(name, value)
        reread_auth()
        try:
            deadline = time.monotonic() + HEAD_START_S
            # all of it started (a client that comes earlier may find its server unable to start: "SpecificServer
            # startup failed"); Ray Client's own retries after a refused connection are slow
            while "Ray runtime started" not in (temp / "head.log").read_text():
                if time.monotonic() > deadline or head.poll() is not None:
                    raise RuntimeError(f"the Ray head did not start (exit status {head.poll()})")
                time.sleep(0.2)
            for attempt in range(3):  # a first client may find its server unable to start (ray 2.60, now and then)
                try:
                    ray.init(address, logging_level="warning", log_to_driver=False)
                    break
                except (ConnectionError, RuntimeError):
                    ray.shutdown()
                    if attempt == 2:
                        raise
            yield address
        finally:
            ray.shutdown()
            stop_ray_head(head, log, temp)
    reread_auth()


@pytest.fixture
def make_pool(qtbot, ray_head):
    """make(**config) -> a WorkerPool whose compute Jobs go to a Ray kernel actor (without torch, to start fast)."""
    pools = []

    def make(**config) -> WorkerPool:
        pool = WorkerPool(kernel=KernelSpec("ray", ray_head), kernel_config=KernelConfig(torch=False, **config))
        pools.append(pool)
        return pool

    yield make
    for pool in pools:
        pool.shutdown()
        assert pool.kernel._kernel is None or pool.kernel._kernel.killed


def test_results_travel_in_band_and_memmaps_as_their_data(qtbot, make_pool, tmp_path):
    """Shared memory and the window's files are not on the cluster: everything comes in the frames."""
    pool = make_pool()
    value, _, _ = run(qtbot, pool, Job(kernel_jobs.array, {"mb": 4}))
    traffic = pool.kernel.received["result"]
    assert value.nbytes == 4 << 20 and value[12345] == 12345 and value.flags.writeable
    assert traffic.out_of_band == 0 and traffic.in_band > 4 << 20
    path = tmp_path / "act.npy"
    np.save(path, np.arange(8 * 3 * 5, dtype=np.float32).reshape(8, 3, 5))
    value, _, _ = run(qtbot, pool, Job(kernel_jobs.mapped, {"path": str(path)}))
    assert not isinstance(value, np.memmap) and np.array_equal(value, np.load(path)[2:6])
    assert traffic.mapped == 0


def test_the_actor_killed_during_a_task_is_made_again_and_runs_it_again(qtbot, make_pool, tmp_path):
    notices, _ = killed_while_running(qtbot, make_pool(), tmp_path,
                                      lambda pool: ray.kill(pool.kernel._kernel._actor))  # as a lost node would
    assert notices == ["The compute kernel was lost on the Ray cluster (The actor is dead because it was killed by "
                       "`ray.kill`) while running dissect layer4; restarted it and running 1 interrupted task again."]


def test_a_task_that_takes_the_actor_down_twice_fails_with_that_line(qtbot, make_pool):
    pool = make_pool()
    notices = []
    pool.notice.connect(notices.append)
    _, _, errors = run(qtbot, pool, Job(kernel_jobs.always_abort), name="bad decoder")
    assert len(errors) == 1, notices
    assert errors[0].message.startswith("bad decoder failed: the compute kernel was lost on the "
                                                             "Ray cluster (")
    assert errors[0].message.endswith(") each time it ran") and len(notices) == 2
    assert run(qtbot, pool, Job(kernel_jobs.count, {"n": 1}))[0] == pool.kernel.pid  # and it works on


def test_the_window_needs_no_torch_with_a_ray_kernel(ray_head):
    """A fresh interpreter connects by itself, runs a torch Job on the actor (torch there, in inference mode) and
    has no torch itself; its shutdown disconnects it."""
    code = f"""
import sys
from PySide6.QtCore import QCoreApplication
import kernel_jobs, ray
from probescope.app.compute.workers import WorkerPool
from probescope.jobs.protocol import Job
app = QCoreApplication([])
pool = WorkerPool(kernel={ray_head!r})
got = []
pool.submit(Job(kernel_jobs.torch_here), name="torch", on_result=got.append, on_error=got.append)
pool.finished.connect(lambda handle: app.quit())
app.exec()
pool.shutdown()
print(got[0], "torch" in sys.modules, ray.is_initialized())
"""
    env = {**os.environ, "PYTHONPATH": PATH}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=180)
    assert done.stdout.split() == ["(True,", "True)", "False", "False"], done.stderr[-3000:]


def test_the_window_opens_every_input_with_a_ray_kernel(qtbot, settings_path, small_world, ray_head):
    """The demo-architecture world on the Ray kernel: the model opens in the actor, the workspaces' compute Jobs run
    there, and the Dissection workspace shows its units."""
    from windows import open_all, world_requests

    from probescope.app.window.main_window import MainWindow
    from probescope.app.window.saved_settings import Settings

    window = MainWindow(Settings(settings_path), device="cpu", kernel=KernelSpec("ray", ray_head))
    qtbot.addWidget(window)
    window.show()
    open_all(qtbot, window, world_requests(small_world))
    assert window.state.layer == "layer4" and window.pool.kernel.received["result"].messages > 1
    assert window.workspaces["dissection"].units.rowCount() > 0
    assert not window.notification.isVisible(), (window.notification.message.text(),
                                                 window.notification.details.toPlainText()[-2000:])
    window.close()
