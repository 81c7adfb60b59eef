"""Hostile inputs, fourth round: refusals that name what to change, a CSV with a byte-order mark, and `gui`'s exit
code for a refused input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from probescope.core.similarity.readers import load_judgments, read_trials_csv
from probescope.main import main

pytestmark = pytest.mark.usefixtures("isolated_cache")


def image_folder(folder: Path, n: int) -> Path:
    folder.mkdir()
    for k in range(n):
        Image.fromarray(np.full((24, 24, 3), 40 * k, np.uint8)).save(folder / f"r{k}.png")
    return folder


@pytest.mark.parametrize("extra", [["--prc"], ["--per-image", "table.csv"]])
def test_a_reference_too_small_for_prc_k_names_it_and_the_option(tmp_path, capsys, extra):
    ref = image_folder(tmp_path / "ref", 3)
    extra = [str(tmp_path / e) if e.endswith(".csv") else e for e in extra]
    assert main(["score", "--images", "demo", "--n", "20", "--fid", str(ref), *extra]) == 2
    err = capsys.readouterr().err.splitlines()
    error = [line for line in err if "error" in line]
    assert len(error) == 1 and error[0].startswith("probescope score: error: --prc-k 3: "), err
    assert str(ref) in error[0] and "3 images" in error[0] and "at least 4" in error[0]
    assert not (tmp_path / "table.csv").exists()
    # a smaller k is enough
    assert main(["score", "--images", "demo", "--n", "20", "--fid", str(ref), "--prc-k", "2", *extra]) == 0


def test_too_few_samples_for_prc_k_names_the_samples_and_the_option(capsys):
    assert main(["score", "--images", "demo", "--n", "3", "--fid", "--prc"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("probescope score: error: --prc-k 3: the samples demo sampler"), err


CSV = "query,ref_1,ref_2,choice_1\n0,1,2,2\n3,4,5,4\n"


def test_a_trials_csv_with_a_byte_order_mark_is_read(tmp_path):
    """Spreadsheet programs save CSV as UTF-8 with a byte-order mark: the first column is still 'query'."""
    plain, marked = tmp_path / "plain.csv", tmp_path / "marked.csv"
    plain.write_text(CSV, encoding="utf-8")
    marked.write_bytes(b"\xef\xbb\xbf" + CSV.encode())
    a, b = read_trials_csv(plain), read_trials_csv(marked)
    np.testing.assert_array_equal(a.trials.query, b.trials.query)
    np.testing.assert_array_equal(a.trials.references, b.trials.references)
    np.testing.assert_array_equal(b.trials.choices[:, 0], [1, 0])
    (tmp_path / "catalog.csv").write_text("id,path\n" + "".join(f"{i},img/{i}.png\n" for i in range(6)))
    assert load_judgments(marked).trials.query.tolist() == [0, 3]


def test_gui_refusals_exit_2(tmp_path):
    """A refused input ends `gui --screenshot` with exit 2 and one error line, like every other command; no window
    or process is left behind (the subprocess is waited for, killed at the timeout)."""
    env = {**os.environ, "QT_QPA_PLATFORM": "offscreen", "PROBESCOPE_CACHE": str(tmp_path / "cache")}
    out = tmp_path / "out.png"
    command = [sys.executable, "-m", "probescope", "gui", "--model", str(tmp_path / "nonexistent.pth"),
               "--screenshot", str(out), "--settings", str(tmp_path / "s.ini"), "--kernel", "thread"]
    with subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) as proc:
        try:
            _, err = proc.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            raise
    errors = [line for line in err.splitlines() if "error" in line]
    assert proc.returncode == 2, err
    assert len(errors) == 1 and errors[0].startswith("probescope gui: error: ") and "nonexistent.pth" in errors[0]
    assert not out.exists()
