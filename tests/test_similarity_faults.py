"""Judgments and features that used to pass with numbers that mean nothing (or a traceback): each now stops with one
line naming the file and the problem, and the index base is asked for when a psiz file cannot tell it."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from probescope.core.errors import InputError
from probescope.core.similarity.quality import apply_quality_control
from probescope.core.similarity.readers import load_judgments
from probescope.main import main

HEADER = "query,ref_1,ref_2,ref_3,choice_1,choice_2"


def csv_file(tmp_path: Path, *rows: str, header: str = HEADER) -> Path:
    path = tmp_path / "trials.csv"
    path.write_text("\n".join([header, *rows]) + "\n")
    return path


def error_of(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    return err.strip()


def similarity(path: Path, features: Path, *extra: str) -> list[str]:
    return ["similarity", "--judgments", str(path), "--features", str(features), *extra]


@pytest.fixture
def features(tmp_path) -> Path:
    path = tmp_path / "features.npy"
    np.save(path, np.random.default_rng(0).normal(size=(12, 4)))
    return path


def test_header_only_csv(tmp_path, capsys, features):
    err = error_of(capsys, similarity(csv_file(tmp_path), features))
    assert "trials.csv: no trials: the file has a header only" in err


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_non_finite_features(tmp_path, capsys, features, bad):
    values = np.load(features)
    values[7, 2] = bad
    np.save(features, values)
    err = error_of(capsys, similarity(csv_file(tmp_path, "0,1,2,3,1,2"), features))
    assert "features.npy: features of stimulus 7 are not finite (NaN or Inf)" in err


@pytest.mark.parametrize("row,problem", [
    ("0,11,11,3,11,3", "line 2: stimulus 11 appears twice among the references"),
    ("0,1,9.5,3,1,", "line 2: column 'ref_2' holds '9.5', not a whole-number id"),
    ("0,1,2,3,,2", "line 2: choice_2 is filled but choice_1 is blank"),
])
def test_csv_rows_that_mean_nothing(tmp_path, capsys, features, row, problem):
    err = error_of(capsys, similarity(csv_file(tmp_path, row), features))
    assert f"trials.csv: {problem}" in err


def test_duplicated_reference_in_psiz_and_zip(tmp_path):
    path = tmp_path / "obs.hdf5"
    with h5py.File(path, "w") as fh:
        fh["class_name"] = "RankObservations"
        fh["stimulus_set"] = np.array([[0, 3, 4, 11, 11], [5, 0, 1, 2, 3]])
        fh["n_select"] = np.array([1, 1])
    with pytest.raises(InputError, match=r"obs.hdf5: trial 0 \(stimulus_set row 0\): stimulus 11 appears twice"):
        load_judgments(path)
    import json
    import zipfile

    release = tmp_path / "r.zip"
    with zipfile.ZipFile(release, "w") as zf:
        zf.writestr("stimuli.txt", "".join(f"{i}|{i}.jpg|n0\n" for i in range(1, 10)))
        zf.writestr("train_seqs/s.json", json.dumps({"trials": [
            {"query": "1", "references": ["2", "3", "3"], "choices": ["2"]}]}))
    with pytest.raises(InputError, match="r.zip: train_seqs/s.json trial 0: stimulus 3 appears twice"):
        load_judgments(release)


def test_ids_beyond_the_features_without_a_catalog(tmp_path, capsys, features):
    trials = csv_file(tmp_path, "0,1,2,14,1,2")
    err = error_of(capsys, similarity(trials, features))
    assert "features.npy: features have 12 rows but the trials use stimulus ids up to 14" in err
    assert "catalog" not in err
    trials.write_text(f"{HEADER}\n0,1,2,3,1,2\n")  # ids within the rows: more rows than ids are fine
    assert main(similarity(trials, features, "--json")) == 0
    capsys.readouterr()


def test_trials_without_sessions_are_not_one_session(tmp_path, capsys, features):
    """A failed catch trial drops itself (catch filter), not every trial of an imagined shared session."""
    rows = ["0,0,1,2,1,0"] + [f"{q},{q + 1},{q + 2},{q + 3},{q + 1},{q + 2}" for q in range(1, 9)]
    path = csv_file(tmp_path, *rows)
    trials = load_judgments(path).trials
    kept, report = apply_quality_control(trials)
    assert report.dropped == {"catch": 1, "grade": 0, "rt": 0} and report.kept == 8 and report.grades == {}
    kept, report = apply_quality_control(trials, catch=False)
    assert report.kept == 9  # the catch trial stays; no session grade drops anything
    only_catch = csv_file(tmp_path, "0,0,1,2,1,0")
    err = error_of(capsys, similarity(only_catch, features))
    assert ("no trials left after quality control: of 1 read, 1 by the catch filter (--no-catch-filter keeps them)"
            in err)


def write_psiz(path: Path, rows: list[list[int]], n_select: list[int]) -> Path:
    with h5py.File(path, "w") as fh:
        fh["class_name"] = "RankObservations"
        fh["stimulus_set"] = np.array(rows)
        fh["n_select"] = np.array(n_select)
    return path


@pytest.mark.parametrize("rows", [
    [[3, 4, 5, 6], [7, 8, 9, 1]],  # 0-based, stimulus 0 never used
    [[3, 4, 5, 0], [7, 8, 9, 1]],  # 0-based, stimulus 0 only as one trial's last reference
])
def test_ambiguous_index_base_is_asked_for(tmp_path, capsys, rows):
    path = write_psiz(tmp_path / "obs.hdf5", rows, [1, 1])
    with pytest.raises(InputError, match="cannot tell whether the stimulus ids are 0-based .* --index-base 0 or 1"):
        load_judgments(path)
    j = load_judgments(path, index_base=0)
    np.testing.assert_array_equal(j.trials.query, [3, 7])
    assert "0-based ids (as given)" in j.notes[0]
    np.save(tmp_path / "f.npy", np.zeros((10, 2)))
    err = error_of(capsys, similarity(path, tmp_path / "f.npy"))
    assert "--index-base" in err
    assert main(similarity(path, tmp_path / "f.npy", "--index-base", "0", "--json")) == 0
    capsys.readouterr()


def test_index_base_evidence_and_contradictions(tmp_path):
    padded = write_psiz(tmp_path / "a.hdf5", [[3, 4, 5, 0, 0], [7, 8, 9, 1, 2]], [1, 1])
    assert "1-based ids with 0 padding" in load_judgments(padded).notes[0]  # 0 twice: padding, not a stimulus
    inner = write_psiz(tmp_path / "b.hdf5", [[3, 0, 5, 6], [7, 8, 9, 1]], [1, 1])
    assert "stimulus 0 appears inside trials" in load_judgments(inner).notes[0]
    with pytest.raises(InputError, match="index base 1 does not fit the file: stimulus 0 inside a trial"):
        load_judgments(inner, index_base=1)
    with pytest.raises(InputError, match="index base 0 does not fit the file: trailing runs of 0"):
        load_judgments(padded, index_base=0)
    (tmp_path / "t.csv").write_text(f"{HEADER}\n0,1,2,3,1,2\n")
    with pytest.raises(InputError, match="an index base is read only for psiz HDF5 files"):
        load_judgments(tmp_path / "t.csv", index_base=1)


def test_stimuli_of_several_sizes_need_a_preprocessing(tmp_path, capsys, small_world):
    from PIL import Image

    rng = np.random.default_rng(4)
    (tmp_path / "img").mkdir()
    for i in range(6):
        side = 48 if i % 2 else 64
        Image.fromarray(rng.integers(0, 256, (side, side, 3), dtype=np.uint8)).save(tmp_path / "img" / f"{i}.png")
    (tmp_path / "catalog.csv").write_text("id,path\n" + "".join(f"{i},img/{i}.png\n" for i in range(6)))
    trials = csv_file(tmp_path, "0,1,2,3,1,2", "4,5,0,1,5,0")
    argv = ["similarity", "--judgments", str(trials), "--model", small_world["model"], "--layer", "layer4"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "images of different sizes" in err and "imagenet:crop=N" in err
    assert main([*argv, "--preprocess", "imagenet:crop=32", "--json"]) == 0
    capsys.readouterr()
