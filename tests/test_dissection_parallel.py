"""Units on every core: `--jobs N` gives the bytes one process gives (dissect and batch), through real worker
processes that memory-map the label store and read the activations' file; cancel, a killed run and resume."""

import json
import multiprocessing
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from test_batch import StopAfter  # a local executor interrupted as by Ctrl-C

from oracles.processes import children_of
from oracles.unit_kinds import unit_kinds_problem
from probescope.core.dissection.label_cache import label_store
from probescope.core.dissection.parallel import UnitWorkers, WorkerLost, worker_count
from probescope.core.dissection.saved import dissect_in_blocks, journal_path, resumable
from probescope.core.dissection.settings import DissectionSettings
from probescope.core.tasks import Cancelled
from probescope.jobs.batch.manifest import read_manifest
from probescope.jobs.batch.runner import run_batch
from probescope.main import main

OUTPUTS = ("dissection.json", "tally.csv")
WINDOW = ["--search", "iou,da-select,da-stop", "--sweep-length", "10"]  # the window's searches


@pytest.fixture(scope="module")
def layer(tmp_path_factory):
    """Sparse, broad and dead units on a Broden folder, their activations in act.npy, and 40 more units (copies
    with noise) for runs long enough to stop halfway."""
    root = tmp_path_factory.mktemp("layer")
    dataset, _, act, _ = unit_kinds_problem(root)
    np.save(root / "act.npy", act)
    rng = np.random.default_rng(0)
    wide = np.concatenate([act] + [act + 0.05 * rng.standard_normal(act.shape, dtype=np.float32)
                                   for _ in range(4)], axis=1)
    np.save(root / "wide.npy", wide[:, :48])
    return root, dataset


def dissect_cli(root, out, jobs, activations="act.npy", *more):
    args = ["--dataset", root / "broden", "--activations", root / activations, "--out", out, "--jobs", jobs,
            *WINDOW, *more]
    return main(["dissect", *map(str, args)])


def same_files(a: Path, b: Path) -> None:
    for name in OUTPUTS:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_dissect_in_two_processes_gives_the_bytes_of_one(layer, tmp_path, isolated_cache):
    root, _ = layer
    assert dissect_cli(root, tmp_path / "one", 1) == 0
    assert dissect_cli(root, tmp_path / "two", 2) == 0
    same_files(tmp_path / "one", tmp_path / "two")
    assert not journal_path(tmp_path / "two" / "dissection.json").exists()
    doc = json.loads((tmp_path / "two" / "dissection.json").read_text())
    assert [u["unit"] for u in doc["units"]] == list(range(11)) and doc["complete"]


def test_batch_in_two_processes_gives_the_bytes_of_dissect(layer, tmp_path, isolated_cache):
    root, _ = layer
    manifest = root / "batch.toml"
    manifest.write_text('[dataset]\npath = "broden"\n\n[settings]\nchunk_units = 3\nsearches = ["iou", "da-stop"]\n'
                        '\n[[models]]\nname = "kinds"\nactivations = "act.npy"\n')
    assert main(["batch", str(manifest), "--out", str(tmp_path / "batch"), "--jobs", "2"]) == 0
    assert dissect_cli(root, tmp_path / "ref", 1, "act.npy", "--search", "iou,da-stop", "--sweep-length", 0) == 0
    same_files(tmp_path / "batch" / "kinds" / "units", tmp_path / "ref")


def test_a_stopped_batch_in_two_processes_resumes(layer, tmp_path, isolated_cache):
    root, _ = layer
    path = root / "stop.toml"
    path.write_text('[dataset]\npath = "broden"\n\n[settings]\nchunk_units = 2\njobs = 2\n'
                    '\n[[models]]\nname = "kinds"\nactivations = "act.npy"\n')
    manifest = read_manifest(path)
    out = tmp_path / "batch"
    stopping = StopAfter(2)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_batch(manifest, out, stopping, log=None)
    finally:
        stopping.close()
    assert len(list((out / "kinds" / "units" / "chunks").iterdir())) == 2
    run_batch(replace(manifest, settings=replace(manifest.settings, jobs=1)), out, log=None)  # the rest, here
    assert dissect_cli(root, tmp_path / "ref", 1, "act.npy", "--sweep-length", 0, "--search", "iou") == 0
    same_files(out / "kinds" / "units", tmp_path / "ref")


def test_cancel_stops_the_workers_and_the_next_run_resumes(layer, tmp_path, isolated_cache):
    root, dataset = layer
    store = label_store(dataset, isolated_cache)
    act = np.load(root / "wide.npy", mmap_mode="r")
    settings = DissectionSettings(searches=("iou", "da-stop"), sweep_length=4, jobs=2)
    path = tmp_path / "dissection.json"
    ident = {"dataset": {"name": "kinds"}, "model": {"name": "wide"}}
    seen = []
    with pytest.raises(Cancelled):
        for result in dissect_in_blocks(path, store, act, settings, dataset_info=ident["dataset"],
                                        model_info=ident["model"], cancel=lambda: len(seen) >= 1):
            seen.append(len(result.units))
    assert seen == [8]  # the first block was saved; cancelled while the second ran
    assert not any(p.is_alive() for p in multiprocessing.active_children() if "unit worker" in p.name)
    here = replace(settings, jobs=1)  # the rest in this process: jobs change speed, never results
    previous, why = resumable(path, here, ident["dataset"], ident["model"], 48)
    assert why == "" and 8 <= len(previous.units) < 48
    *_, resumed = dissect_in_blocks(path, store, act, here, previous=previous, dataset_info=ident["dataset"],
                                    model_info=ident["model"])
    serial = tmp_path / "serial.json"
    list(dissect_in_blocks(serial, store, act, here, dataset_info=ident["dataset"], model_info=ident["model"]))
    assert resumed.complete and path.read_bytes() == serial.read_bytes()


def _dissect_until_units_are_done(root: Path, out: Path, env: dict) -> tuple[list[str], subprocess.Popen, list[int]]:
    """`dissect --jobs 2` of the wide layer in a process of its own, once a few units are in its journal: (its command
    line, the process, its worker processes)."""
    argv = [sys.executable, "-m", "probescope", "dissect", "--dataset", str(root / "broden"), "--activations",
            str(root / "wide.npy"), "--out", str(out), "--jobs", "2", *WINDOW]
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    journal = journal_path(out / "dissection.json")
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None and \
            not (journal.exists() and len(journal.read_text().splitlines()) > 3):
        time.sleep(0.05)
    return argv, proc, children_of(proc.pid)


def _gone(workers: list[int], seconds: float) -> bool:
    """The worker processes have left (or are zombies) within `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and any(Path(f"/proc/{w}").exists() for w in workers):
        time.sleep(0.1)
    return not any(Path(f"/proc/{w}/status").exists() and "zombie" not in Path(f"/proc/{w}/status").read_text()
                   for w in workers)


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the worker processes through /proc")
def test_a_killed_run_stops_its_workers_and_resumes(layer, tmp_path, isolated_cache):
    root, _ = layer
    out = tmp_path / "out"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    argv, proc, workers = _dissect_until_units_are_done(root, out, env)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert len(workers) >= 2
    assert _gone(workers, 90)  # orphaned workers notice their caller is gone and leave
    assert journal_path(out / "dissection.json").exists()
    assert subprocess.run(argv, env=env, capture_output=True, text=True).stderr.count("resuming") == 1
    assert dissect_cli(root, tmp_path / "ref", 1, "wide.npy") == 0
    same_files(out, tmp_path / "ref")


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="finds the worker processes through /proc")
def test_sigterm_stops_the_workers_and_leaves_no_temporary_folder(layer, tmp_path, isolated_cache):
    """SIGTERM during `dissect --jobs 2`: the workers stop, the run's temporary folder is removed, one line, exit
    143; what was finished is kept for the next run."""
    root, _ = layer
    out, tmp = tmp_path / "out", tmp_path / "tmp"
    tmp.mkdir()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path), TMPDIR=str(tmp))
    argv, proc, workers = _dissect_until_units_are_done(root, out, env)
    assert len(workers) >= 2 and list(tmp.glob("probescope-units-*"))
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 143 and err.strip().splitlines()[-1] == "probescope dissect: terminated"
    assert not list(tmp.glob("probescope-units-*"))
    assert _gone(workers, 30)  # (multiprocessing's resource tracker leaves when its pipe closes)
    assert subprocess.run(argv, env=env, capture_output=True, text=True).stderr.count("resuming") == 1


def test_a_lost_worker_is_reported(layer, isolated_cache):
    root, dataset = layer
    store = label_store(dataset, isolated_cache)
    act = np.load(root / "act.npy", mmap_mode="r")
    with UnitWorkers(store, 2) as workers:
        os.kill(workers._processes[0].pid, signal.SIGKILL)
        workers._processes[0].join()
        with pytest.raises(WorkerLost, match="exit code -9"):
            list(workers.run(act, DissectionSettings(), range(11)))


def test_worker_count():
    assert worker_count(3, 100, 10) == 3 and worker_count(3, 2, 10) == 2  # never more than the units
    assert worker_count(0, 10, 1000) == 1  # automatic: a small run stays in this process
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    assert worker_count(0, 512, 22210) == min(cores, 512)
    assert worker_count(0, 512, 22210, spare_cores=1) == max(1, cores - 1)
