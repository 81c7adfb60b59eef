"""Faults around a dissection: output folders that cannot be written, full disks (a real tiny tmpfs when this runs as
root, a simulated ENOSPC always), a killed run (SIGKILL), damaged activation caches and two runs on one folder. No
traceback, no silently wrong number, and no finished work lost."""

from __future__ import annotations

import errno
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from oracles.synthetic_broden import SyntheticBroden, SyntheticSpec, write_synthetic_broden
from probescope.core.data import activation_cache
from probescope.core.data.activation_cache import cache_path
from probescope.core.data.activations import extract_activations
from probescope.core.dissection.saved import journal_path
from probescope.core.errors import InputError, Note
from probescope.core.locks import LOCK_FILE, folder_lock
from probescope.core.models.loading import load_model
from probescope.main import main

N_UNITS = 48


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    """A small Broden folder and random activations for it (many units, so a run can be stopped in the middle)."""
    root = tmp_path_factory.mktemp("faults")
    ds = SyntheticBroden(SyntheticSpec(n_images=16, seg_size=16, feat_size=4, n_objects=12, n_parts=4, n_scenes=3))
    write_synthetic_broden(root / "data", ds)
    act = np.random.default_rng(0).random((16, N_UNITS, 4, 4), dtype=np.float32)
    np.save(root / "act.npy", act)
    return root


def dissect_args(problem: Path, out: Path, *extra: str) -> list[str]:
    return ["dissect", "--dataset", str(problem / "data"), "--activations", str(problem / "act.npy"), "--out",
            str(out), "--min-samples", "1", "--sweep-length", "0", *extra]


def one_error_line(capsys, command: str = "dissect") -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.split("\n") if line.strip()]
    assert lines and lines[-1].startswith(f"probescope {command}: error: "), err
    assert "Traceback" not in err and sum("error:" in line for line in lines) == 1
    return lines[-1]


@pytest.fixture(scope="module")
def reference(problem, tmp_path_factory):
    """The outputs of an uninterrupted run: what every resumed run must reproduce byte for byte."""
    out = tmp_path_factory.mktemp("reference") / "out"
    assert main(dissect_args(problem, out)) == 0
    return {name: (out / name).read_bytes() for name in ("dissection.json", "tally.csv")}


def same_as_reference(out: Path, reference: dict) -> bool:
    return all((out / name).read_bytes() == data for name, data in reference.items())


# ---- output folders ---------------------------------------------------------------------------------------------

def test_out_under_a_file(problem, tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(dissect_args(problem, blocker / "out")) == 2
    assert "file/out: cannot use the output folder (Not a directory)" in one_error_line(capsys)
    assert main(dissect_args(problem, blocker)) == 2
    assert "file: is a file, not a folder" in one_error_line(capsys)


def tmpfs(path: Path, size: str, *options: str) -> Path:
    """Mount a tmpfs of `size` at `path` (skips the test where mounting is not allowed)."""
    path.mkdir(parents=True, exist_ok=True)
    opts = ",".join((f"size={size}", *options))
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", opts, "tmpfs", str(path)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here ({done.stderr.decode().strip() or done.returncode})")
    return path


@pytest.fixture
def mounts():
    mounted: list[Path] = []

    def mount(path: Path, size: str, *options: str) -> Path:
        mounted.append(tmpfs(path, size, *options))
        return path

    yield mount
    for path in reversed(mounted):
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def test_read_only_out(problem, tmp_path, capsys, mounts):
    ro = mounts(tmp_path / "ro", "1m", "ro")
    assert main(dissect_args(problem, ro / "out")) == 2
    assert "cannot use the output folder (Read-only file system)" in one_error_line(capsys)


def test_read_only_out_simulated(problem, tmp_path, capsys, monkeypatch):
    real_open = os.open

    def read_only(path, *args, **kwargs):
        if str(path).endswith(LOCK_FILE):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", read_only)
    assert main(dissect_args(problem, tmp_path / "out")) == 2
    assert "cannot use the output folder (Read-only file system)" in one_error_line(capsys)


# ---- full disks -----------------------------------------------------------------------------------------------

def test_disk_full_while_writing_results(problem, tmp_path, capsys, reference, mounts):
    disk = mounts(tmp_path / "disk", "256k")
    out = disk / "out"
    filler = disk / "filler"
    assert main(dissect_args(problem, out, "--units", "0")) == 0  # what one unit's outputs need
    used = sum(p.stat().st_size for p in out.iterdir())
    free = os.statvfs(disk).f_bavail * os.statvfs(disk).f_frsize
    filler.write_bytes(b"\0" * max(0, free - 3 * used))  # room for a few units, not for all of them
    capsys.readouterr()
    assert main(dissect_args(problem, out)) == 2
    assert "No space left on device" in one_error_line(capsys)
    check_consistent(out)
    filler.unlink()
    assert main(dissect_args(problem, out)) == 0
    assert "resuming:" in capsys.readouterr().err and same_as_reference(out, reference)


def test_a_completely_full_disk_is_one_line(problem, tmp_path, capsys, monkeypatch):
    """Not even the lock's holder line fits (os.write raises ENOSPC): one line naming the folder, no traceback."""
    from probescope.core import locks

    real_write = os.write

    def full(fd, data):
        if os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) == LOCK_FILE:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)

    monkeypatch.setattr(locks.os, "write", full)
    assert main(dissect_args(problem, tmp_path / "out")) == 2
    line = one_error_line(capsys)
    assert f"{tmp_path / 'out'}: cannot write in the output folder (No space left on device)" in line
    assert not (tmp_path / "out" / LOCK_FILE).exists()


def check_consistent(out: Path) -> None:
    """What a failed run leaves reads back: dissection.json whole, the journal's records whole (but the last)."""
    from probescope.core.dissection.results import DissectionResult
    from probescope.core.dissection.saved import read_journal

    if (out / "dissection.json").exists():
        DissectionResult.load(out / "dissection.json")
    if journal_path(out / "dissection.json").exists():
        read_journal(out / "dissection.json")
    assert not list(out.glob(".*.tmp"))


def test_disk_full_while_writing_results_simulated(problem, tmp_path, capsys, reference, monkeypatch):
    from probescope.core import atomic

    out = tmp_path / "out"
    real_fsync, calls = os.fsync, []

    def fills_up(fd):
        calls.append(fd)
        if len(calls) >= 2:  # the first block's dissection.json is written, the next write finds the disk full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(atomic.os, "fsync", fills_up)
    assert main(dissect_args(problem, out)) == 2
    line = one_error_line(capsys)
    assert "dissection.json: could not write (No space left on device)" in line
    check_consistent(out)
    saved = json.loads((out / "dissection.json").read_text())
    journaled = len((journal_path(out / "dissection.json")).read_text().splitlines()) - 1
    assert len(saved["units"]) == 8 and journaled > 0  # the first block, and the units finished after it
    monkeypatch.setattr(atomic.os, "fsync", real_fsync)
    assert main(dissect_args(problem, out)) == 0
    assert f"resuming: {8 + journaled} units already done" in capsys.readouterr().err
    assert same_as_reference(out, reference)


@pytest.fixture
def model_spec(tmp_path):
    import torch

    from probescope.core.demo.model import DemoNet
    from probescope.core.demo.world import SCENES

    torch.manual_seed(0)
    path = tmp_path / "demo.pt"
    torch.save(DemoNet(len(SCENES)).state_dict(), path)
    return f"demo:{path}"


def test_disk_full_while_writing_the_activation_cache(tmp_path, capsys, small_world, model_spec, mounts,
                                                      monkeypatch):
    cache = mounts(tmp_path / "cache", "64k")
    monkeypatch.setenv("PROBESCOPE_CACHE", str(cache))
    argv = ["dissect", "--dataset", str(small_world["dataset"]), "--model", model_spec, "--layer", "layer1",
            "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    line = one_error_line(capsys)
    assert "not enough free space for the activation cache: it needs" in line and "PROBESCOPE_CACHE" in line
    assert not list((cache / "activations").glob(".*"))  # no sparse temporary left behind


def test_disk_full_while_writing_the_activation_cache_simulated(tmp_path, small_world, model_spec, monkeypatch):
    model = load_model(model_spec)
    images = np.zeros((4, 64, 64, 3), np.uint8)
    monkeypatch.setattr(activation_cache.shutil, "disk_usage", lambda _path: SimpleNamespace(free=1000))
    with pytest.raises(InputError, match=r"not enough free space for the activation cache: it needs [\d.]+ KiB, "
                                         r"1\.0 KiB free; free some space, or set PROBESCOPE_CACHE"):
        extract_activations(model, "layer1", images, tmp_path / "cache")
    monkeypatch.undo()

    def no_room(fd, offset, length):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(activation_cache.os, "posix_fallocate", no_room, raising=False)
    with pytest.raises(InputError, match="could not write the activation cache \\(No space left on device\\)"):
        extract_activations(model, "layer1", images, tmp_path / "cache")
    assert not list((tmp_path / "cache" / "activations").glob(".*"))


# ---- killed runs ------------------------------------------------------------------------------------------------

def _cli(*args: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "probescope", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})


def test_sigkill_during_dissection_loses_at_most_the_unit_on_the_way(problem, tmp_path, capsys, reference):
    out = tmp_path / "out"
    journal = journal_path(out / "dissection.json")
    run = _cli(*dissect_args(problem, out))
    deadline = time.monotonic() + 120
    finished = 0  # units seen finished (saved, or journaled with a complete line) just before the kill
    while time.monotonic() < deadline and run.poll() is None:
        try:
            saved = len(json.loads((out / "dissection.json").read_text())["units"])  # first: a block save in
            journaled = journal.read_text().count("\n") - 1  # between can only make the count smaller
        except (OSError, ValueError):
            saved = journaled = 0
        if saved and journaled >= 3:
            run.send_signal(signal.SIGKILL)
            finished = saved + journaled
            break
        time.sleep(0.005)
    run.wait(60)
    if run.returncode != -signal.SIGKILL:
        pytest.skip("the run finished before it could be killed")
    assert main(dissect_args(problem, out)) == 0
    resumed = int(capsys.readouterr().err.split("resuming: ")[1].split(" units")[0])
    assert resumed >= finished >= 8 + 3  # every finished unit was kept: at most the one on the way is redone
    assert same_as_reference(out, reference) and not journal.exists()


def test_stale_temporaries_of_killed_extractions_are_removed(tmp_path, model_spec):
    """A process killed while it fills the cache leaves its temporary; the next extraction removes it, but not one
    that a running writer still holds."""
    cache = tmp_path / "cache"
    folder = cache / "activations"
    killed = subprocess.run([sys.executable, "-c", (
        "import os, signal\n"
        "from pathlib import Path\n"
        "from probescope.core.data.activation_cache import temp_file\n"
        f"temp_file(Path({str(folder)!r}), 'x.npy')\n"
        "os.kill(os.getpid(), signal.SIGKILL)\n")], capture_output=True)
    assert killed.returncode == -signal.SIGKILL
    [left] = folder.glob(".*.tmp")
    old = time.time() - 3600
    os.utime(left, (old, old))
    held, fd = activation_cache.temp_file(folder, "y.npy")  # a live writer's, made old on purpose
    os.utime(held, (old, old))
    try:
        extract_activations(load_model(model_spec), "layer1", np.zeros((2, 64, 64, 3), np.uint8), cache)
        assert not left.exists() and held.exists()
    finally:
        os.close(fd)


# ---- damaged caches -----------------------------------------------------------------------------------------------

def test_damaged_activation_cache_is_named_and_rebuilt(tmp_path, model_spec):
    model = load_model(model_spec)
    images = np.random.default_rng(3).integers(0, 256, (40, 64, 64, 3), dtype=np.uint8)
    cache = tmp_path / "cache"
    clean = np.array(extract_activations(model, "layer1", images, cache))
    path = cache_path(model, "layer1", images, cache)
    size = path.stat().st_size
    with open(path, "r+b") as fh:  # 64 KiB of zeros inside the file: same size, same header
        fh.seek(size // 2)
        fh.write(b"\0" * 65536)
    assert path.stat().st_size == size
    with pytest.warns(Note, match=rf"{path.name}: damaged activation cache \(checksum mismatch in images \d+-\d+\); "
                                  "rebuilding it"):
        again = extract_activations(model, "layer1", images, cache)
    np.testing.assert_array_equal(again, clean)

    # a non-finite value whose block checksum was rewritten to match: still refused, by the finiteness check
    import zlib

    sidecar = path.with_suffix(".json")
    meta = json.loads(sidecar.read_text())
    array = np.load(path, mmap_mode="r+")
    array[0, 0, 0, 0] = np.nan
    array.flush()
    rows = meta["checksums"]["rows"]
    meta["checksums"]["crc32"][0] = zlib.crc32(np.ascontiguousarray(array[:rows]))
    del array
    sidecar.write_text(json.dumps(meta))
    with pytest.warns(Note, match="non-finite values in images 0-"):
        again = extract_activations(model, "layer1", images, cache)
    np.testing.assert_array_equal(again, clean)


def test_damaged_cache_end_to_end(tmp_path, capsys, small_world, model_spec, monkeypatch):
    """The issue's case: zeros written inside a cache gave wrong tally rows with exit 0; now the same tally."""
    monkeypatch.setenv("PROBESCOPE_CACHE", str(tmp_path / "cache"))
    argv = ["dissect", "--dataset", str(small_world["dataset"]), "--model", model_spec, "--layer", "layer4",
            "--min-samples", "1", "--sweep-length", "0"]
    assert main([*argv, "--out", str(tmp_path / "a")]) == 0
    [cached] = [p for p in (tmp_path / "cache" / "activations").glob("*.npy") if "layer4" in p.with_suffix(
        ".json").read_text()]
    with open(cached, "r+b") as fh:
        fh.seek(cached.stat().st_size // 3)
        fh.write(b"\0" * 4096)
    capsys.readouterr()
    assert main([*argv, "--out", str(tmp_path / "b")]) == 0
    assert f"probescope: note: {cached}: damaged activation cache" in capsys.readouterr().err
    assert (tmp_path / "a" / "tally.csv").read_bytes() == (tmp_path / "b" / "tally.csv").read_bytes()


# ---- one run per output folder; messages ---------------------------------------------------------------------------

def test_second_run_on_one_out_is_refused(problem, tmp_path, capsys):
    out = tmp_path / "out"
    with folder_lock(out, "probescope dissect"):
        assert main(dissect_args(problem, out, "--beam-size", "2")) == 2
        line = one_error_line(capsys)
        assert f"{out}: in use by probescope dissect (process {os.getpid()} on " in line
        assert not (out / "dissection.json").exists()
    assert main(dissect_args(problem, out, "--beam-size", "2")) == 0  # released: the folder is free again


def test_error_after_progress_starts_its_own_line(problem, tmp_path, capsys, small_world, model_spec):
    argv = ["dissect", "--dataset", str(small_world["dataset"]), "--model", model_spec, "--layer", "layer1",
            "--units", "999", "--out", str(tmp_path / "out")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "%" in err  # a progress line was shown first
    [line] = [text for text in err.split("\n") if "error:" in text]
    assert line.startswith("probescope dissect: error: --units: unit 999 out of range")


def test_journal_header_from_other_settings_is_ignored(problem, tmp_path, capsys, reference):
    out = tmp_path / "out"
    out.mkdir()
    journal_path(out / "dissection.json").write_text(json.dumps({"format": "probescope-dissection-journal/1",
                                                                 "settings": {}, "dataset": {}, "model": {},
                                                                 "labels": {}, "n_units": N_UNITS}) + "\n{cut")
    assert main(dissect_args(problem, out)) == 0
    assert "resuming" not in capsys.readouterr().err and same_as_reference(out, reference)


def test_second_batch_on_one_out_is_refused(tmp_path, capsys, small_world):
    manifest = tmp_path / "zoo.toml"
    manifest.write_text(f'[dataset]\npath = "{small_world["dataset"]}"\n[[models]]\nspec = "{small_world["model"]}"\n'
                        'layers = ["layer4"]\n')
    out = tmp_path / "out"
    with folder_lock(out, "probescope batch"):
        assert main(["batch", str(manifest), "--out", str(out)]) == 2
        assert f"{out}: in use by probescope batch (process {os.getpid()}" in one_error_line(capsys, "batch")
    assert not (out / "status.json").exists()
