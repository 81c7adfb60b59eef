"""A refusal that is about a file names it: the statistics of the wrong dimension, predictions of the wrong length,
a label map naming no class of the model, activations with NaN, randomly assembled trials beyond the embedding, a
model that cannot take the probing size. Each through the command line, one line, the path in it."""

from __future__ import annotations

import numpy as np
import pytest

from probescope.main import main


@pytest.fixture
def files(small_world, tmp_path):
    from oracles.simulated_trials import simulate_trials
    from probescope.core.demo.world import SCENES
    from probescope.core.scoring.frechet import GaussianStats
    from probescope.core.similarity.writers import write_trials_csv

    GaussianStats(np.zeros(64), np.eye(64)).save(tmp_path / "stats64.npz")
    np.savez(tmp_path / "samples.npz", images=np.random.default_rng(0).integers(0, 255, (6, 32, 32, 3), np.uint8))
    act = np.random.default_rng(1).random((12, 4, 3, 3), dtype=np.float32)
    np.save(tmp_path / "act.npy", act)
    act[3, 2, 1, 1] = np.nan
    np.save(tmp_path / "nan.npy", act)
    np.save(tmp_path / "pred.npy", np.zeros(5, np.int64))
    (tmp_path / "names.txt").write_text("\n".join(SCENES))
    (tmp_path / "map.csv").write_text("label,class\nbeach-s,no_such_class\n")
    rng = np.random.default_rng(0)
    (tmp_path / "judged").mkdir()
    write_trials_csv(tmp_path / "judged" / "trials.csv", simulate_trials(rng.normal(size=(12, 2)), 30, rng))
    far = simulate_trials(rng.normal(size=(40, 2)), 5, rng)
    write_trials_csv(tmp_path / "judged" / "coarse.csv", far)
    return tmp_path


CASES = {
    "statistics of another dimension": (
        ["score", "--images", "{t}/samples.npz", "--fid", "{t}/stats64.npz", "--splits", "1"], "{t}/stats64.npz",
        "features have 128 dimensions, these reference statistics 64"),
    "predictions of the wrong length": (
        ["dissect", "--dataset", "{w}", "--activations", "{t}/act.npy", "--out", "{t}/o1", "--predictions",
         "{t}/pred.npy", "--class-names", "{t}/names.txt", "--min-samples", "1"], "{t}/pred.npy",
        "predictions hold 5 images"),
    "a label map naming no class": (
        ["dissect", "--dataset", "{w}", "--activations", "{t}/act.npy", "--out", "{t}/o2", "--predictions",
         "{t}/pred.npy", "--class-names", "{t}/names.txt", "--label-map", "{t}/map.csv"], "{t}/map.csv",
        "'no_such_class' is not one of the model's classes"),
    "activations with NaN": (
        ["dissect", "--dataset", "{w}", "--activations", "{t}/nan.npy", "--out", "{t}/o3"], "{t}/nan.npy",
        "non-finite"),
    "coarse trials beyond the embedding": (
        ["embed", "--judgments", "{t}/judged/trials.csv", "--coarse", "{t}/judged/coarse.csv", "--dims", "2",
         "--ensemble", "1", "--max-epochs", "3", "--out", "{t}/e.npz"], "{t}/judged/coarse.csv",
        "but the embedding has 12 stimuli"),
}


@pytest.mark.parametrize("case", CASES)
def test_the_refusal_names_the_file(files, small_world, capsys, case):
    argv, path, message = CASES[case]
    fill = {"t": files, "w": small_world["dataset"]}
    code = main([a.format(**fill) for a in argv])
    errors = [line for line in capsys.readouterr().err.splitlines() if "error:" in line]
    assert code == 2 and len(errors) == 1, errors
    assert f"error: {path.format(**fill)}: " in errors[0] and message in errors[0], errors[0]


def test_a_model_that_cannot_take_the_probing_size_is_named(capsys):
    from probescope.core.demo.model import DEMO_WEIGHTS

    assert main(["info", "demo", "--input-size", "1"]) == 2
    err = capsys.readouterr().err
    assert f"{DEMO_WEIGHTS}: demo: a 1x1 input does not run" in err
