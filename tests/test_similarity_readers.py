"""Readers on files written here in the real layouts (ImageNet-HSJ psiz HDF5 + catalog, zip release, CSV)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest

from probescope.core.errors import InputError
from probescope.core.similarity.catalog import read_catalog
from probescope.core.similarity.readers import load_judgments
from probescope.core.similarity.trials import PAD, Trials
from probescope.core.similarity.writers import trials_csv_text, write_psiz_hdf5

# three trials over 10 stimuli, psiz rows [query, pick 1, pick 2, others...]; the last is 4-rank-1 (padded)
ROWS_0 = np.array([
    [0, 3, 4, 1, 2, 5, 6, 7, 8],
    [9, 8, 7, 6, 5, 4, 3, 2, 1],
    [5, 0, 1, 2, 3, -1, -1, -1, -1],
])
N_SELECT = np.array([2, 2, 1])


def write_catalog(path: Path, base: int = 0, n: int = 10) -> None:
    with h5py.File(path, "w") as fh:
        fh["stimulus_id"] = np.arange(base, base + n)
        fh["stimulus_filepath"] = np.array([f"n0153057{i % 3}/ILSVRC2012_val_{i:08d}.JPEG" for i in range(n)],
                                           dtype=h5py.string_dtype())
        fh["class_id"] = np.arange(n) % 3
        fh["class_map_class_id"] = np.arange(3)
        fh["class_map_label"] = np.array(["goldfish", "shark", "ray"], dtype=h5py.string_dtype())


def write_obs(path: Path, rows: np.ndarray, release_names: bool = True) -> None:
    m = len(rows)
    with h5py.File(path, "w") as fh:
        fh["class_name" if release_names else "trial_type"] = "RankObservations"
        fh["stimulus_set"] = rows
        fh["n_select"] = N_SELECT
        fh["is_ranked"] = np.ones(m, dtype=bool)
        fh["groups" if release_names else "group_id"] = np.zeros((m, 1), dtype=np.int64)
        fh["agent_id"] = np.array([3, 3, 4])
        fh["session_id"] = np.array([0, 0, 1])
        fh["weight"] = np.array([1.0, 0.9, 1.0])
        fh["rt_ms"] = np.array([4000.0, 3500.0, 800.0])


def check_trials(trials: Trials) -> None:
    np.testing.assert_array_equal(trials.query, [0, 9, 5])
    np.testing.assert_array_equal(trials.chosen_first(), ROWS_0[:, 1:])
    np.testing.assert_array_equal(trials.n_select, N_SELECT)
    np.testing.assert_array_equal(trials.participant, [3, 3, 4])
    np.testing.assert_allclose(trials.weight, [1.0, 0.9, 1.0])
    np.testing.assert_allclose(trials.rt_ms, [4000, 3500, 800])


@pytest.mark.parametrize("release_names", [True, False])
def test_psiz_04_zero_based(tmp_path: Path, release_names: bool) -> None:
    write_catalog(tmp_path / "catalog.hdf5")
    write_obs(tmp_path / "obs-118.hdf5", ROWS_0, release_names)
    j = load_judgments(tmp_path / "obs-118.hdf5")  # catalog.hdf5 beside it is found
    check_trials(j.trials)
    assert j.format == "psiz-hdf5" and "0-based" in j.notes[0] and "-1" in j.notes[0]
    assert len(j.catalog) == 10 and j.catalog.paths[1] == "n01530571/ILSVRC2012_val_00000001.JPEG"
    assert j.catalog.classes[:3] == ("goldfish", "shark", "ray")
    assert j.catalog.image_path(1) == tmp_path / j.catalog.paths[1]


def test_later_psiz_one_based_is_detected(tmp_path: Path) -> None:
    write_catalog(tmp_path / "catalog.hdf5", base=1)
    write_obs(tmp_path / "obs.hdf5", ROWS_0 + 1)  # 1-based, 0 padding
    j = load_judgments(tmp_path / "obs.hdf5")
    check_trials(j.trials)
    assert "1-based" in j.notes[0]
    # without a catalog: 0 appears only as trailing padding
    (tmp_path / "catalog.hdf5").unlink()
    j = load_judgments(tmp_path / "obs.hdf5")
    check_trials(j.trials)
    assert j.catalog is None and "1-based" in j.notes[0] and j.n_stimuli == 10


def test_psiz_malformed(tmp_path: Path) -> None:
    bad = tmp_path / "obs.hdf5"
    with h5py.File(bad, "w") as fh:
        fh["class_name"] = "RateObservations"
        fh["stimulus_set"] = ROWS_0
    with pytest.raises(InputError, match="obs.hdf5.*not a psiz rank"):
        load_judgments(bad)
    bad.write_bytes(b"not hdf5 at all")
    with pytest.raises(InputError, match="obs.hdf5"):
        load_judgments(bad)
    write_obs(bad, ROWS_0)
    write_catalog(tmp_path / "catalog.hdf5", n=6)
    with pytest.raises(InputError, match="catalog has 6 stimuli"):
        load_judgments(bad)


def b36(i: int) -> str:
    digits = "0123456789abcdefghijklmnopqrstuvwxyz"
    out = ""
    while True:
        i, r = divmod(i, 36)
        out = digits[r] + out
        if i == 0:
            return out


def write_release(path: Path, n: int = 40) -> None:
    """The newer raw release: stimuli.txt (base-36 1-based ids) and one JSON per session."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("hsj/stimuli.txt", "".join(f"{b36(i + 1)}|val/img_{i}.JPEG|n0{i % 5}\n" for i in range(n)))
        session = {"participant_id": "A1B2", "grade": 75, "trials": [
            {"query": b36(36), "references": [b36(k) for k in range(1, 9)], "choices": [b36(5), b36(2)],
             "rt_ms": 4100},
            {"query": b36(1), "references": [b36(k) for k in range(30, 38)], "choices": [b36(37), b36(30)],
             "rt_ms": 900},
        ]}
        zf.writestr("hsj/train_seqs/session_0001.json", json.dumps(session))
        zf.writestr("hsj/test_seqs/session_0002.json", json.dumps({**session, "participant_id": "Z9", "grade": 100}))


def test_zip_release(tmp_path: Path) -> None:
    write_release(tmp_path / "hsj.zip")
    j = load_judgments(tmp_path / "hsj.zip", image_root=tmp_path / "imagenet")
    assert j.format == "zip-release" and len(j.catalog) == 40 and "base-36" in j.notes[0]
    t = j.trials
    np.testing.assert_array_equal(t.query, [35, 0])  # base-36 '10' = 36 -> row 35
    np.testing.assert_array_equal(t.references[0], np.arange(8))
    np.testing.assert_array_equal(t.choices, [[4, 1], [7, 0]])
    assert j.session_grade == {0: 0.75, 1: 1.0} and len(j.test) == 2
    assert j.catalog.image_path(2) == tmp_path / "imagenet" / "val/img_2.JPEG"
    # the unpacked folder reads the same
    with zipfile.ZipFile(tmp_path / "hsj.zip") as zf:
        zf.extractall(tmp_path / "unpacked")
    k = load_judgments(tmp_path / "unpacked" / "hsj")
    np.testing.assert_array_equal(k.trials.choices, t.choices)


def test_zip_release_malformed(tmp_path: Path) -> None:
    path = tmp_path / "bad.zip"
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("stimuli.txt", "1|a.jpg|n01\n2|b.jpg|n01\n")
        zf.writestr("train_seqs/s1.json", "{not json")
    with pytest.raises(InputError, match="bad.zip.*s1.json.*not valid JSON"):
        load_judgments(path)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("stimuli.txt", "1|a.jpg|n01\n2|b.jpg|n01\n")
        zf.writestr("train_seqs/s1.json", json.dumps({"trials": [{"query": "1", "references": ["2", "9"],
                                                                   "choices": ["2"]}]}))
    with pytest.raises(InputError, match="catalog has 2 stimuli"):
        load_judgments(path)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("stimuli.txt", "1|a.jpg|n01\n3|b.jpg|n01\n")
    with pytest.raises(InputError, match="stimuli.txt.*without gaps"):
        load_judgments(path)


CSV = """query,ref_1,ref_2,ref_3,ref_4,choice_1,choice_2,session,participant,rt_ms,weight,notes
0,1,2,3,4,3,1,7,2,4200,,first
5,6,7,8,,8,,7,2,,0.5,
"""


def test_csv_and_catalog_csv(tmp_path: Path) -> None:
    (tmp_path / "trials.csv").write_text(CSV)
    (tmp_path / "catalog.csv").write_text("id,path,mirror_of,class\n" + "".join(
        f"{i},img/{i}.png,{0 if i == 9 else ''},c{i % 2}\n" for i in range(10)))
    j = load_judgments(tmp_path / "trials.csv")
    t = j.trials
    np.testing.assert_array_equal(t.references, [[1, 2, 3, 4], [6, 7, 8, PAD]])
    np.testing.assert_array_equal(t.choices, [[2, 0], [2, PAD]])
    np.testing.assert_allclose(t.weight, [1.0, 0.5])
    assert np.isnan(t.rt_ms[1]) and t.session.tolist() == [7, 7]
    assert j.catalog.mirror_of[9] == 0 and j.catalog.mirror_of[3] == -1 and j.catalog.classes[1] == "c1"
    # round trip through the writer
    (tmp_path / "again.csv").write_text(trials_csv_text(t))
    again = load_judgments(tmp_path / "again.csv", catalog=tmp_path / "catalog.csv").trials
    for name in ("query", "references", "choices", "session", "participant", "weight"):
        np.testing.assert_array_equal(getattr(again, name), getattr(t, name))


@pytest.mark.parametrize("text,problem", [
    ("query,ref_1\n0,1\n", "a trials CSV needs the columns"),
    ("query,ref_1,ref_2,choice_1\n0,1,2,5\n", "line 2: choice_1 = 5"),
    ("query,ref_1,ref_2\n0,x,2\n", "line 2: column 'ref_1'"),
    ("query,ref_1,ref_2,ref_3\n0,1,,3\n", "line 2: a trial needs"),
])
def test_csv_malformed(tmp_path: Path, text: str, problem: str) -> None:
    (tmp_path / "t.csv").write_text(text)
    with pytest.raises(InputError, match=f"t.csv: {problem}"):
        load_judgments(tmp_path / "t.csv")


def test_catalog_errors(tmp_path: Path) -> None:
    (tmp_path / "catalog.csv").write_text("id,path\n0,a.png\n0,b.png\n")
    with pytest.raises(InputError, match="catalog.csv: line 3"):
        read_catalog(tmp_path / "catalog.csv")
    with pytest.raises(InputError, match="not found"):
        read_catalog(tmp_path / "missing.hdf5")


def test_psiz_writer_round_trip(tmp_path: Path) -> None:
    trials = Trials.make([0, 9, 5], [[1, 2, 3, 4, 5, 6, 7, 8], [1, 2, 3, 4, 5, 6, 7, 8], [0, 1, 2, 3, -1, -1, -1, -1]],
                         [[2, 3], [7, 6], [0, -1]], [0, 0, 1], [3, 3, 4], [4000, 3500, 800], [1.0, 0.9, 1.0])
    write_psiz_hdf5(tmp_path / "obs.hdf5", trials, {"simulated": True})
    back = load_judgments(tmp_path / "obs.hdf5").trials
    np.testing.assert_array_equal(back.chosen_first(), trials.chosen_first())
    np.testing.assert_allclose(back.rt_ms, trials.rt_ms)
    np.testing.assert_allclose(back.weight, trials.weight)
