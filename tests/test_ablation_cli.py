"""`probescope ablate` on the demo model and a small demo world: ablation.csv and ablation.json, the groups (units,
each unit with the top units per class, concepts and specialised units from a `probescope dissect` output), and bad
input as one line with exit code 2."""

import csv
import json

import pytest

from probescope.core.demo.world import SCENES
from probescope.main import main


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """28 demo images (2 per scene) and the demo model's dissection of layer4 (iou and da-stop searches)."""
    from probescope.core.demo.dataset import write_demo_dataset

    root = tmp_path_factory.mktemp("ablate")
    data = write_demo_dataset(root / "demo", n_images=28)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROBESCOPE_CACHE", str(root / "cache"))
        assert main(["dissect", "--dataset", str(data), "--model", "demo", "--out", str(root / "dis"),
                     "--min-samples", "2", "--search", "iou,da-stop"]) == 0
    return root, data


@pytest.fixture
def run(world, monkeypatch):
    root, data = world
    monkeypatch.setenv("PROBESCOPE_CACHE", str(root / "cache"))

    def run_(out, *args):
        return main(["ablate", "--model", "demo", "--dataset", str(data), "--out", str(out), *map(str, args)])

    return run_


def test_units_write_csv_and_json(run, tmp_path, capsys):
    out = tmp_path / "out"
    assert run(out, "--units", "0-3,17") == 0
    rows = list(csv.DictReader(open(out / "ablation.csv")))
    assert [r["class"] for r in rows] == list(SCENES)
    assert {(r["group"], r["units"], r["images"]) for r in rows} == {("units 0-3,17", "0-3,17", "2")}
    for r in rows:
        assert float(r["delta_accuracy"]) == pytest.approx(float(r["accuracy_after"]) - float(r["accuracy_before"]))
    doc = json.loads((out / "ablation.json").read_text())
    assert doc["format"] == "probescope-ablation/1" and doc["layer"] == "layer4" and doc["mode"] == "zero"
    assert (doc["path"], doc["path_note"]) == ("tail", "avgpool → flatten → fc")
    assert doc["model"]["spec"] == "demo" and doc["dataset"]["n_images"] == 28
    err = capsys.readouterr().err
    assert "28 of 28 images have a true label" in err and "tail: avgpool → flatten → fc" in err


def test_each_unit_with_the_top_units_per_class(run, tmp_path):
    out = tmp_path / "out"
    assert run(out, "--each", "--top-units", 3, "--mode", "mean") == 0
    doc = json.loads((out / "ablation.json").read_text())
    names = [g["name"] for g in doc["groups"]]
    assert names[:128] == [f"unit {u}" for u in range(128)] and doc["mode"] == "mean"
    top = doc["groups"][128:]
    assert top and all(g["name"].startswith("top ") and 1 <= len(g["units"]) <= 3 for g in top)


def test_concepts_and_specialised_units_from_a_dissection(run, world, tmp_path):
    root, _ = world
    assert run(tmp_path / "a", "--concept", "house,tree", "--dissection", root / "dis") == 0
    doc = json.loads((tmp_path / "a" / "ablation.json").read_text())
    assert [g["name"] for g in doc["groups"]] == ["concept house", "concept tree"]
    assert run(tmp_path / "b", "--specialised", "--dissection", root / "dis" / "dissection.json", "--path",
               "hook") == 0
    doc = json.loads((tmp_path / "b" / "ablation.json").read_text())
    assert doc["groups"][0]["name"] == "specialised" and doc["path"] == "hook"


@pytest.mark.parametrize("args,message", [
    (["--concept", "house"], "give --dissection"),
    (["--units", "120-130"], "unit 130 out of range"),
    (["--units", "3-x"], "cannot read"),
    (["--concept", "unicorn", "--dissection", "DIS"], "no concept 'unicorn'"),
    (["--units", 1, "--top-units", 2], "--top-units ranks the units of an --each run"),
    (["--each", "--top-units", -1], "--top-units: expected a whole number from 0"),
    (["--specialised", "--dissection", "NOFILE"], "file not found"),
    (["--concept", "house", "--dissection", "DIS", "--layer", "layer3"], "dissects layer 'layer4', not 'layer3'"),
    (["--units", 1, "--layer", "layer9"], "no layer 'layer9'"),
    (["--units", 1, "--class-names", "NAMES"], "no image's scene label names one of the model's classes"),
    (["--units", 1, "--label-map", "MAP"], "not one of the model's classes"),
])
def test_bad_input_exits_2_with_one_line(run, world, tmp_path, capsys, args, message):
    root, _ = world
    (tmp_path / "names.txt").write_text("\n".join(f"other{k}" for k in range(14)))
    (tmp_path / "map.csv").write_text("label,class\nbeach-s,seaside\n")
    swap = {"DIS": root / "dis", "NAMES": tmp_path / "names.txt", "MAP": tmp_path / "map.csv",
            "NOFILE": tmp_path / "none.json"}
    code = run(tmp_path / "o", *[swap.get(a, a) for a in args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and message in err[-1] and err[-1].startswith("probescope ablate: error:")
    assert not (tmp_path / "o" / "ablation.csv").exists()
