"""`probescope dissect` on a real Broden folder: outputs, resume, predictions, one-line errors."""

import csv
import json

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
