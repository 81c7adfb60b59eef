"""`probescope batch` run locally: manifest checks, outputs byte-identical to `probescope dissect`, per-chunk resume,
status.json and open_batch."""

import json
import sys

import numpy as np
import pytest

from probescope.core.demo.dataset import write_demo_dataset
from probescope.core.errors import InputError
from probescope.jobs.batch.executors import LocalExecutor
from probescope.jobs.batch.manifest import read_manifest
from probescope.jobs.batch.reader import open_batch, read_batch
from probescope.jobs.batch.runner import run_batch
from probescope.main import main

OUTPUTS = ("dissection.json", "tally.csv")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """60 demo images, and random activations for them (a second 'model')."""
    root = tmp_path_factory.mktemp("batchworld")
    write_demo_dataset(root / "data", n_images=60)
    rng = np.random.default_rng(0)
    np.save(root / "act.npy", rng.gamma(2.0, size=(60, 10, 4, 4)).astype(np.float32))
    return root


def write_manifest(root, chunk_units=24, min_samples=5, models=("demo", "act")):
    entries = {"demo": '[[models]]\nspec = "demo"\nlayers = ["layer4"]\n',
               "act": '[[models]]\nname = "random"\nactivations = "act.npy"\n'}
    path = root / "batch.toml"
    path.write_text(f'[dataset]\npath = "data"\n\n[settings]\nchunk_units = {chunk_units}\n'
                    f'min_samples = {min_samples}\nsearches = ["iou", "da-stop"]\n\n'
                    + "\n".join(entries[m] for m in models))
    return path


def dissect_reference(world, out, *what):
    args = ["--dataset", world / "data", "--out", out, "--search", "iou,da-stop", *what]
    assert main(["dissect", *map(str, args)]) == 0
    return out


def same_files(a, b, names=OUTPUTS):
    for name in names:
        assert (a / name).read_bytes() == (b / name).read_bytes(), name


def test_local_batch_equals_dissect_and_is_browsable(world, tmp_path, isolated_cache, capsys):
    out = tmp_path / "batch"
    assert main(["batch", str(write_manifest(world)), "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert "demo/layer4: chunk 6/6 (all jobs: 7/7)" in err and "batch done" in err
    same_files(out / "demo" / "layer4", dissect_reference(world, tmp_path / "d1", "--model", "demo"),
               OUTPUTS + ("correlation.csv",))
    same_files(out / "random" / "units", dissect_reference(world, tmp_path / "d2", "--activations", world / "act.npy"))
    status = json.loads((out / "status.json").read_text())
    assert status["state"] == "done" and (status["chunks_done"], status["chunks_total"]) == (7, 7)
    assert [(j["folder"], j["units"], j["state"]) for j in status["jobs"]] == [("demo/layer4", 128, "done"),
                                                                              ("random/units", 10, "done")]
    assert open_batch(out) == [("demo", "layer4", out / "demo/layer4/dissection.json"),
                               ("random", "units", out / "random/units/dissection.json")]


class StopAfter(LocalExecutor):
    """A local executor interrupted (as by Ctrl-C) after `n` tasks."""

    def __init__(self, n):
        super().__init__()
        self.left = n

    def wait(self, handles):
        if self.left == 0:
            raise KeyboardInterrupt
        self.left -= 1
        return super().wait(handles)


def test_stopped_batch_resumes_without_redoing_chunks(world, tmp_path, isolated_cache, capsys):
    manifest = read_manifest(write_manifest(world, chunk_units=3, models=("act",)))
    out = tmp_path / "batch"
    with pytest.raises(KeyboardInterrupt):
        run_batch(manifest, out, StopAfter(2), log=None)
    status = json.loads((out / "status.json").read_text())
    assert status["state"] == "stopped" and status["chunks_done"] == 2 and open_batch(out) == []
    overview = read_batch(out)
    assert (overview.state, overview.chunks_done, overview.chunks_total, overview.error) == ("stopped", 2, 4, None)
    [job] = overview.jobs
    assert (job.model, job.layer, job.state, job.units, job.chunks_done, job.chunks_total, job.finished) == (
        "random", "units", "running", 10, 2, 4, False)
    chunks = out / "random" / "units" / "chunks"
    kept = {p.name: p.stat().st_mtime_ns for p in chunks.iterdir()}
    assert sorted(kept) == ["units-000000-000002.json", "units-000003-000005.json"]
    run_batch(manifest, out)
    assert "resuming, 2 of 4 chunks already done" in capsys.readouterr().err
    assert {p.name: p.stat().st_mtime_ns for p in chunks.iterdir() if p.name in kept} == kept
    same_files(out / "random" / "units", dissect_reference(world, tmp_path / "ref", "--activations", world / "act.npy"))
    # other protocol settings: the old chunks do not count, every unit is redone; meanwhile the stale merged
    # result is gone, so the layer is not listed as finished
    other = read_manifest(write_manifest(world, chunk_units=3, min_samples=2, models=("act",)))
    with pytest.raises(KeyboardInterrupt):
        run_batch(other, out, StopAfter(0), log=None)
    assert open_batch(out) == []
    run_batch(other, out)
    assert "resuming" not in capsys.readouterr().err
    assert json.loads((out / "random/units/dissection.json").read_text())["settings"]["min_samples"] == 2


def test_rerun_of_a_finished_batch_only_merges(world, tmp_path, isolated_cache):
    """A finished batch rerun merges again from its chunks alone (nothing recomputed, same bytes)."""
    manifest = read_manifest(write_manifest(world, chunk_units=5, models=("act",)))
    out = tmp_path / "batch"
    run_batch(manifest, out, log=None)
    before = (out / "random/units/dissection.json").read_bytes()
    (out / "random/units/dissection.json").unlink()
    doc = run_batch(manifest, out, StopAfter(0), log=None)  # no task may run
    assert doc["chunks_done"] == 2 and (out / "random/units/dissection.json").read_bytes() == before


@pytest.mark.parametrize("text,message", [
    ('[dataset\npath = "data"', "not valid TOML"),
    ('[settings]\nquantile = 0.1\n[[models]]\nspec = "demo"\nlayers = ["layer4"]', "[dataset] table missing"),
    ('[dataset]\npath = "data"\n', "no [[models]] entries"),
    ('[dataset]\npath = "data"\n[settings]\nquantile = 2.0\n[[models]]\nspec = "demo"\nlayers = ["x"]',
     "quantile must lie in (0, 1)"),
    ('[dataset]\npath = "data"\n[settings]\nbeem_size = 2\n[[models]]\nspec = "demo"\nlayers = ["x"]',
     "unknown key(s) beem_size"),
    ('[dataset]\npath = "data"\n[settings]\nchunk_units = 0\n[[models]]\nspec = "demo"\nlayers = ["x"]',
     "chunk_units: expected a whole number from 1 to"),
    ('[dataset]\npath = "data"\n[settings]\nbeam_size = 1e9\n[[models]]\nspec = "demo"\nlayers = ["x"]',
     "beam_size must be int"),
    ('[dataset]\npath = "data"\n[settings]\nmax_length = 2000000000\n[[models]]\nspec = "demo"\nlayers = ["x"]',
     "max_length: expected a whole number from 1 to 32, got 2000000000"),
    ('[dataset]\npath = "data"\n[[models]]\nspec = "demo"\nlayers = ["a"]\ngpus = nan', "gpus: expected a number"),
    ('[dataset]\npath = "data"\n[[models]]\nspec = "demo"\n', "layers a non-empty list"),
    ('[dataset]\npath = "data"\n[[models]]\nspec = "demo"\nlayers = ["a"]\nactivations = "x.npy"',
     "either spec (with layers) or activations"),
    ('[dataset]\npath = "data"\n[[models]]\nspec = "demo"\nlayers = ["a"]\n[[models]]\nspec = "demo"\n'
     'layers = ["b"]', "model name(s) demo used twice"),
])
def test_bad_manifest_exits_2_with_one_line(tmp_path, capsys, text, message):
    path = tmp_path / "m.toml"
    path.write_text(text)
    assert main(["batch", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"probescope batch: error: {path}: ") and message in err[0]


def test_bad_inputs_name_the_file(world, tmp_path, isolated_cache, capsys):
    path = tmp_path / "m.toml"
    path.write_text(f'[dataset]\npath = "{world / "data"}"\n[[models]]\nname = "x"\nactivations = "missing.npy"\n')
    assert main(["batch", str(path), "--out", str(tmp_path / "o")]) == 2
    assert f"{tmp_path / 'missing.npy'}: file not found" in capsys.readouterr().err
    assert json.loads((tmp_path / "o" / "status.json").read_text())["state"] == "failed"
    with pytest.raises(InputError, match="no status.json"):
        open_batch(tmp_path)
    with pytest.raises(InputError, match="no such folder"):
        read_batch(tmp_path / "nowhere")
    (tmp_path / "status.json").write_text('{"format": "probescope-batch/1", "jobs": [{"model": "x"}]}')
    with pytest.raises(InputError, match=r"status.json: damaged batch status \(KeyError"):
        read_batch(tmp_path)


def test_ray_option_without_ray_installed_says_which_extra(world, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # as if the cluster extra were not installed
    assert main(["batch", str(write_manifest(world)), "--out", str(tmp_path / "o"), "--ray", "auto"]) == 2
    assert "pip install 'probescope[cluster]'" in capsys.readouterr().err


def test_manifest_fields(tmp_path):
    path = tmp_path / "m.toml"
    path.write_text('[dataset]\npath = "d"\nsource = "ade20k/"\n[settings]\nsearches = "iou, da-select"\n'
                    'cache_mb = 8\nbeam_size = 3\n'
                    '[[models]]\nspec = "resnet18:/w/r18.pth"\nlayers = ["layer4.1", "fc"]\ngpus = 1\n'
                    '[[models]]\nactivations = "acts/conv5.npy"\nlayer = "conv 5"\n')
    m = read_manifest(path)
    assert (m.dataset, m.index, m.source, m.chunk_units) == (tmp_path / "d", "index.csv", "ade20k/", 16)
    assert (m.settings.searches, m.settings.cache_bytes, m.settings.beam_size) == (("iou", "da-select"), 8 << 20, 3)
    assert [(j.name, layer) for j, layer in m.layer_jobs] == [("r18", "layer4.1"), ("r18", "fc"), ("conv5", "conv 5")]
    assert m.models[0].gpus == 1.0 and m.models[1].activations == tmp_path / "acts/conv5.npy"
