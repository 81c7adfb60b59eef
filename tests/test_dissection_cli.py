"""`probescope dissect` on a real Broden folder: outputs, resume, predictions, one-line errors."""

import csv
import json
import os

import numpy as np
import pytest

from oracles.synthetic_broden import (
    SyntheticBroden,
    SyntheticSpec,
    planted_formulas,
    synthetic_activations,
    write_synthetic_broden,
)
from probescope.core.errors import InputError
from probescope.core.locks import LOCK_FILE, folder_lock
from probescope.main import main


@pytest.fixture(scope="module")
def broden(tmp_path_factory):
    root = tmp_path_factory.mktemp("broden")
    ds = SyntheticBroden(SyntheticSpec(n_images=24, seg_size=16, feat_size=4, n_objects=12, n_parts=4, n_scenes=3))
    write_synthetic_broden(root / "data", ds)
    act = synthetic_activations(ds, planted_formulas(ds, 5), noise=0.2)
    np.save(root / "act.npy", act)
    return root, ds, act


def run(*args):
    return main(["dissect", *map(str, args)])


def test_outputs_and_resume(broden, tmp_path, capsys):
    root, ds, act = broden
    out = tmp_path / "out"
    args = ["--dataset", root / "data", "--activations", root / "act.npy", "--out", out, "--min-samples", 2,
            "--search", "iou,da-stop", "--sweep-length", 3]
    assert run(*args, "--units", "0-1,3") == 0
    rows = list(csv.DictReader(open(out / "tally.csv")))
    assert [r["unit"] for r in rows] == ["0", "1", "3"]
    assert "dastop_label" in rows[0] and "daselect_label" not in rows[0]
    doc = json.loads((out / "dissection.json").read_text())
    assert doc["settings"]["min_samples"] == 2 and len(doc["units"][0]["sweep"]) == 3
    capsys.readouterr()
    assert run(*args) == 0
    assert "resuming: 3 units already done" in capsys.readouterr().err
    assert len(list(csv.DictReader(open(out / "tally.csv")))) == 5
    assert not (out / "correlation.csv").exists()
    assert not (out / LOCK_FILE).exists()  # removed once the run is over


def test_a_finished_folder_run_again_is_complete(broden, tmp_path, capsys):
    """The guide says "run it again to resume": on a finished folder that says so and exits 0 (it raised
    IndexError from an empty list of blocks)."""
    root, ds, act = broden
    out = tmp_path / "out"
    args = ["--dataset", root / "data", "--activations", root / "act.npy", "--out", out, "--sweep-length", 0]
    assert run(*args) == 0
    tally = (out / "tally.csv").read_bytes()
    capsys.readouterr()
    assert run(*args) == 0
    err = capsys.readouterr().err
    assert "complete: all 5 units already done, nothing to resume" in err and "Traceback" not in err
    assert (out / "tally.csv").read_bytes() == tally and not (out / LOCK_FILE).exists()
    assert run(*args, "--units", "1-2") == 0  # a part of a finished layer: done as well
    assert "complete: all 5 units already done" in capsys.readouterr().err


def test_a_run_that_opened_a_removed_lock_file_takes_the_new_one(tmp_path, monkeypatch):
    """The lock file goes when its holder finishes. A run that opened it just before (and so locks the removed
    file) must open the file at the path again, or a third run would lock a new file beside it."""
    from probescope.core import locks

    folder = tmp_path / "out"
    with folder_lock(folder, "first"):
        stale = os.open(folder / LOCK_FILE, os.O_RDWR)  # the second run's open, before the first run ends
    opens = []
    real_open = os.open

    def open_(path, *args, **kwargs):
        opens.append(path)
        return stale if len(opens) == 1 else real_open(path, *args, **kwargs)

    monkeypatch.setattr(locks.os, "open", open_)
    with folder_lock(folder, "second"):
        monkeypatch.setattr(locks.os, "open", real_open)
        assert len(opens) == 2 and (folder / LOCK_FILE).exists()
        with pytest.raises(InputError, match="in use by second"), folder_lock(folder, "third"):
            pass
    assert not (folder / LOCK_FILE).exists()


def test_predictions_give_correlation(broden, tmp_path):
    root, ds, act = broden
    names = tmp_path / "classes.txt"
    names.write_text("scene0\nscene1\nscene2\n")
    pred = np.array([i % 3 for i in range(ds.n_images)])
    np.save(tmp_path / "pred.npy", pred)
    out = tmp_path / "out"
    assert run("--dataset", root / "data", "--activations", root / "act.npy", "--out", out, "--sweep-length", 0,
               "--predictions", tmp_path / "pred.npy", "--class-names", names) == 0
    rows = list(csv.DictReader(open(out / "correlation.csv")))
    assert {r["method"] for r in rows} == {"netdissect", "iou"}


@pytest.mark.parametrize("change,message", [
    ("short", "23 images, but the dataset index has 24 rows"),
    ("nan", "non-finite activations"),
    ("units", "unit 9 out of range"),
    ("badunits", "cannot read"),
    ("search", "unknown search mode"),
])
def test_bad_input_exits_2_with_one_line(broden, tmp_path, capsys, change, message):
    root, ds, act = broden
    path = tmp_path / "act.npy"
    bad = act[:-1] if change == "short" else act.copy()
    if change == "nan":
        bad[5, 2, 1, 1] = np.inf
    np.save(path, bad)
    extra = {"units": ["--units", "2-9"], "badunits": ["--units", "1-x"], "search": ["--search", "iou,best"]}
    code = run("--dataset", root / "data", "--activations", path, "--out", tmp_path / "o",
               *extra.get(change, []))
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and message in err[-1] and err[-1].startswith("probescope dissect: error:")


def test_units_ranges():
    from probescope.core.bounds import UNIT, IntRanges

    assert IntRanges.parse("0-3,7,2", "--units", UNIT).values("--units", "unit", high=9, because="") == [0, 1, 2, 3,
                                                                                                          7]
    with pytest.raises(InputError):
        IntRanges.parse("3-1", "--units", UNIT)


def test_demo_model_on_demo_world(tmp_path, monkeypatch):
    """--model path: activations and predictions from the demo model, true labels from the demo scenes."""
    from probescope.core.demo.dataset import write_demo_dataset

    monkeypatch.setenv("PROBESCOPE_CACHE", str(tmp_path / "cache"))
    data = write_demo_dataset(tmp_path / "demo", n_images=28)
    out = tmp_path / "out"
    assert run("--dataset", data, "--model", "demo", "--out", out, "--units", "0-3", "--min-samples", 2,
               "--sweep-length", 2, "--search", "iou,da-select") == 0
    doc = json.loads((out / "dissection.json").read_text())
    assert doc["model"]["layer"] == "layer4" and [u["unit"] for u in doc["units"]] == [0, 1, 2, 3]
    rows = list(csv.DictReader(open(out / "correlation.csv")))
    assert {r["method"] for r in rows} == {"netdissect", "iou", "da-select", "length-1", "length-2"}


def test_a_layer_without_a_spatial_map_is_refused(small_world, tmp_path, capsys, isolated_cache):
    """A TorchScript classifier's only layer is its output, the logits: not a map of where units fire, so it is
    refused with a message asking for a layer that has one (it was dissected as 1x1 'maps')."""
    import torch
    from torch import nn

    class Classifier(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.mean(dim=(2, 3))

    model = tmp_path / "clf.pt"
    torch.jit.script(Classifier()).save(str(model))
    assert run("--dataset", small_world["dataset"], "--model", f"torchscript:{model}", "--trust", model,
               "--out", tmp_path / "a") == 2
    [line] = [x for x in capsys.readouterr().err.splitlines() if "error:" in x]
    assert "layer 'output' has no spatial map (its output is 3x1x1 per image" in line
    assert "choose a layer with a spatial map" in line and not (tmp_path / "a" / "dissection.json").exists()
    pooled = tmp_path / "pooled.npy"
    np.save(pooled, np.ones((12, 4, 1, 1), np.float32))
    assert run("--dataset", small_world["dataset"], "--activations", pooled, "--out", tmp_path / "b") == 2
    assert f"{pooled}: layer 'pooled' has no spatial map (its output is 4x1x1" in capsys.readouterr().err
