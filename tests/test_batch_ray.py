"""`probescope batch --ray` on a local two-CPU Ray instance: merged results equal the local run's, and a worker
killed mid-chunk does not stop the batch (its chunk is retried)."""

import os
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from probescope.core.demo.dataset import write_demo_dataset
from probescope.jobs.batch.manifest import read_manifest
from probescope.jobs.batch.runner import run_batch

ray = pytest.importorskip("ray")
from probescope.jobs.batch.ray_executor import RayExecutor  # noqa: E402

OUTPUTS = ("dissection.json", "tally.csv")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("rayworld")
    write_demo_dataset(root / "data", n_images=60)
    np.save(root / "act.npy", np.random.default_rng(1).gamma(2.0, size=(60, 12, 4, 4)).astype(np.float32))
    (root / "batch.toml").write_text(
        '[dataset]\npath = "data"\n[settings]\nchunk_units = 16\n'
        '[[models]]\nspec = "demo"\nlayers = ["layer3", "layer4"]\n'
        '[[models]]\nname = "random"\nactivations = "act.npy"\n')
    (root / "small.toml").write_text(
        '[dataset]\npath = "data"\n[settings]\nchunk_units = 1\n[[models]]\nname = "random"\nactivations = "act.npy"\n')
    return root


@pytest.fixture(scope="module")
def local_ray(tmp_path_factory):
    """A private Ray instance on this machine for the module's tests (started once: a start costs seconds), its
    workers in the test session's cache folder (as `isolated_cache` gives it), shut down afterwards."""
    cache = tmp_path_factory.getbasetemp() / "probescope-cache"
    cache.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PROBESCOPE_CACHE", str(cache))
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="warning", log_to_driver=False)
        try:
            yield
        finally:
            ray.shutdown()
    assert not ray.is_initialized()


def run_on_ray(manifest, out):
    executor = RayExecutor(None)  # uses the instance the fixture started
    try:
        return run_batch(read_manifest(manifest), out, executor, log=None)
    finally:
        executor.close()


def same_outputs(a: Path, b: Path, folders):
    for folder in folders:
        for name in OUTPUTS:
            assert (a / folder / name).read_bytes() == (b / folder / name).read_bytes(), f"{folder}/{name}"


def test_ray_batch_equals_local_batch(world, tmp_path, local_ray):
    doc = run_on_ray(world / "batch.toml", tmp_path / "ray")
    # two demo layers of 128 units (8 chunks each) and 12 random units (1 chunk)
    assert doc["state"] == "done" and doc["chunks_done"] == doc["chunks_total"] == 17
    run_batch(read_manifest(world / "batch.toml"), tmp_path / "local", log=None)
    same_outputs(tmp_path / "ray", tmp_path / "local", ["demo/layer3", "demo/layer4", "random/units"])
    assert (tmp_path / "ray/demo/layer4/correlation.csv").read_bytes() == (
        tmp_path / "local/demo/layer4/correlation.csv").read_bytes()


def chunk_workers() -> list[int]:
    """Processes of this machine's Ray workers while they run a chunk (Ray titles them after the task)."""
    pids = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                    if fh.read().startswith(b"ray::dissect_chunk"):
                        pids.append(int(entry.name))
            except OSError:
                continue
    return pids


def test_killed_worker_chunk_is_retried(world, tmp_path, local_ray):
    killed: list[int] = []
    stop = threading.Event()

    def killer():
        while not stop.is_set() and not killed:
            for pid in chunk_workers():
                os.kill(pid, signal.SIGKILL)
                killed.append(pid)
                break
            time.sleep(0.002)

    thread = threading.Thread(target=killer)
    thread.start()
    try:
        doc = run_on_ray(world / "small.toml", tmp_path / "ray")
    finally:
        stop.set()
        thread.join()
    assert killed, "no chunk was seen running"
    assert doc["state"] == "done" and doc["chunks_done"] == 12
    run_batch(read_manifest(world / "small.toml"), tmp_path / "local", log=None)
    same_outputs(tmp_path / "ray", tmp_path / "local", ["random/units"])
