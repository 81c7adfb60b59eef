"""Every judgments reader (psiz HDF5, the zip release, CSV, and the catalogs beside them) refuses a stimulus id that
is fractional, NaN, infinite, negative or too large, naming the file and the trial. Before: a float 8.5 in a psiz
`stimulus_set` was truncated to 8, and a NaN became INT64_MIN, was taken for -1 padding and silently cost the
trial a reference."""

from __future__ import annotations

import json
import re
import zipfile
from pathlib import Path

import h5py
import numpy as np
import pytest

from probescope.core.errors import InputError
from probescope.core.similarity.readers import load_judgments

BAD_VALUES = {"fractional": 8.5, "NaN": float("nan"), "negative": -5.0, "infinite": float("inf"), "huge": 1e30}
WHY = {"fractional": "not a whole number", "NaN": "not a number", "negative": "out of range",
       "infinite": "not finite", "huge": "out of range"}
# two 8-rank-2 trials over 12 stimuli, psiz rows [query, pick 1, pick 2, the other references]
ROWS = np.array([[0, 1, 2, 3, 4, 5, 6, 7, 8], [9, 10, 11, 1, 2, 3, 4, 5, 6]], dtype=np.float64)


def _psiz(path: Path, rows: np.ndarray, n_select=(2, 2)) -> Path:
    with h5py.File(path, "w") as fh:
        fh["class_name"] = "RankObservations"
        fh["stimulus_set"] = rows
        fh["n_select"] = np.asarray(n_select)
    return path


def _one_bad(value: float, position: int = 4) -> np.ndarray:
    rows = ROWS.copy()
    rows[1, position] = value
    return rows


@pytest.mark.parametrize("case", BAD_VALUES)
def test_psiz_hdf5_refuses_the_id_naming_the_trial(tmp_path, case):
    path = _psiz(tmp_path / "obs.hdf5", _one_bad(BAD_VALUES[case]))
    with pytest.raises(InputError) as caught:
        load_judgments(path, index_base=0)
    message = str(caught.value)
    assert message.startswith(f"{path}: trial 1 (stimulus_set row 1): stimulus id "), message
    assert WHY[case] in message and "\n" not in message


def test_psiz_hdf5_keeps_whole_float_ids_and_its_padding(tmp_path):
    """Ids stored as floats are fine while they are whole: only the value decides, never the dtype."""
    rows = ROWS.copy()
    rows[1, 8] = -1  # padding
    judgments = load_judgments(_psiz(tmp_path / "obs.hdf5", rows), index_base=0)
    np.testing.assert_array_equal(judgments.trials.references[1], [10, 11, 1, 2, 3, 4, 5, -1])


def test_psiz_hdf5_refuses_a_fractional_pick_count(tmp_path):
    path = _psiz(tmp_path / "obs.hdf5", ROWS, n_select=(2, 1.5))
    with pytest.raises(InputError, match=r"obs.hdf5: trial 1: n_select 1.5 is not a whole number"):
        load_judgments(path, index_base=0)


def test_psiz_hdf5_out_of_catalog_names_the_trial(tmp_path):
    from probescope.core.similarity.catalog import Catalog, write_catalog_hdf5

    write_catalog_hdf5(tmp_path / "catalog.hdf5", Catalog(tuple(f"{k}.png" for k in range(11)),
                                                          np.full(11, -1), tmp_path))
    path = _psiz(tmp_path / "obs.hdf5", ROWS)
    with pytest.raises(InputError, match=r"obs.hdf5: trial 1 \(stimulus_set row 1\): stimulus 11 .*has 11 stimuli"):
        load_judgments(path, index_base=0)


def _csv_text(value: str) -> str:
    header = "query," + ",".join(f"ref_{k}" for k in range(1, 9)) + ",choice_1,choice_2\n"
    good = "0,1,2,3,4,5,6,7,8,1,2\n"
    bad = f"9,10,11,{value},2,3,4,5,6,10,11\n"
    return header + good + bad


@pytest.mark.parametrize("case", BAD_VALUES)
def test_csv_refuses_the_id_naming_the_line(tmp_path, case):
    path = tmp_path / "trials.csv"
    path.write_text(_csv_text(repr(BAD_VALUES[case])))
    with pytest.raises(InputError) as caught:
        load_judgments(path)
    assert str(caught.value).startswith(f"{path}: line 3: column 'ref_3' holds "), str(caught.value)


def _release(path: Path, value: object) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("stimuli.txt", "".join(f"{k + 1:x}|img_{k}.jpg|n0\n" for k in range(12)))
        good = {"query": "1", "references": [str(k) for k in range(2, 10)], "choices": ["2", "3"]}
        bad = {"query": "a", "references": ["b", "c", value, "2", "3", "4", "5", "6"], "choices": ["b", "c"]}
        zf.writestr("train_seqs/s0.json", json.dumps({"participant_id": "p", "trials": [good, bad]}))
    return path


@pytest.mark.parametrize("value", [8.5, float("nan"), -5, "-5", "+5", "1_0", True, None, 10**12],
                         ids=["fractional", "NaN", "negative", "negative-text", "signed-text", "underscore", "bool",
                              "null", "huge"])
def test_zip_release_refuses_the_id_naming_the_session_and_trial(tmp_path, value):
    path = _release(tmp_path / "release.zip", value)
    with pytest.raises(InputError) as caught:
        load_judgments(path)
    message = str(caught.value)
    assert message.startswith(f"{path}: train_seqs/s0.json trial 1: "), message
    assert "stimulus id" in message or "stimulus" in message


def test_zip_release_reads_integers_as_their_digits(tmp_path):
    """JSON integers stay read as base-36 digits (what the reader always did): 7 is stimulus '7', row 6."""
    judgments = load_judgments(_release(tmp_path / "release.zip", 7))
    assert judgments.trials.references[1, 2] == 6


@pytest.mark.parametrize("name,value", [("stimulus_id", 2.5), ("stimulus_id", np.nan), ("mirror_of", 1.5),
                                        ("mirror_of", -7.0)])
def test_catalog_hdf5_refuses_fractional_nan_and_negative_ids(tmp_path, name, value):
    path = tmp_path / "catalog.hdf5"
    ids = np.arange(4, dtype=np.float64)
    mirror = np.full(4, -1.0)
    (ids if name == "stimulus_id" else mirror)[2] = value
    with h5py.File(path, "w") as fh:
        fh["stimulus_id"] = ids
        fh["stimulus_filepath"] = np.array([f"{k}.png" for k in range(4)], dtype=h5py.string_dtype())
        fh["mirror_of"] = mirror
    from probescope.core.similarity.catalog import read_catalog

    with pytest.raises(InputError, match=rf"catalog.hdf5: {name} row 2: {name} "):
        read_catalog(path)


@pytest.mark.parametrize("text", ["-5", "+5", "1_0"])
def test_stimuli_txt_refuses_signed_and_underscored_ids(tmp_path, text):
    from probescope.core.similarity.catalog import read_stimuli_txt

    with pytest.raises(InputError, match=re.escape(f"line 2: '{text}' is not a base-36 id")):
        read_stimuli_txt(f"1|a.jpg|n0\n{text}|b.jpg|n0\n", tmp_path / "stimuli.txt")
