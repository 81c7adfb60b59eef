"""The similarity, embed and propose commands on a small generated CSV experiment."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from oracles.simulated_trials import clustered_points, simulate_trials
from probescope.core.similarity.readers import load_judgments
from probescope.core.similarity.writers import write_trials_csv
from probescope.main import main


@pytest.fixture(scope="module")
def experiment(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("experiment")
    rng = np.random.default_rng(0)
    z = clustered_points(40, 2, 4, rng)
    trials = simulate_trials(z, 600, rng)
    rt = rng.lognormal(np.log(4000), 0.5, len(trials))
    trials = type(trials).make(trials.query, trials.references, trials.choices, np.arange(len(trials)) // 50,
                               np.arange(len(trials)) // 50, rt)
    write_trials_csv(folder / "trials.csv", trials)
    (folder / "catalog.csv").write_text("id,path\n" + "".join(f"{i},img/{i}.png\n" for i in range(40)))
    np.save(folder / "good.npy", np.concatenate([z, rng.normal(0, 0.01, (40, 3))], axis=1))
    np.save(folder / "noise.npy", rng.normal(size=(40, 5)))
    return folder


def run_json(capsys, argv: list[str]) -> dict:
    assert main(argv + ["--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_similarity_embed_propose(experiment: Path, capsys) -> None:
    base = ["--judgments", str(experiment / "trials.csv")]
    good = run_json(capsys, ["similarity", *base, "--features", str(experiment / "good.npy")])
    noise = run_json(capsys, ["similarity", *base, "--features", str(experiment / "noise.npy"), "--distance", "l1"])
    assert good["triplets"] == 13 * good["trials"] and set(good["accuracy"]) == {"cosine", "l1", "l2"}
    assert good["accuracy"]["l2"] > 0.7 > noise["accuracy"]["l1"] and set(noise["accuracy"]) == {"l1"}
    assert good["dropped"]["catch"] == 0 and good["dropped"]["rt"] + good["trials"] == 600
    assert good["trials_read"] == 600 and good["simulated"] is False

    emb = experiment / "emb.npz"
    fit = run_json(capsys, ["embed", *base, "--dims", "2", "--ensemble", "2", "--max-epochs", "40",
                            "--out", str(emb)])
    assert fit["dims"] == 2 and len(fit["member_loss"]) == 2 and emb.is_file()
    assert fit["training_triplet_accuracy"] > 0.7 and fit["within_ensemble_correlation"]["pearson"] > 0.5

    with_emb = run_json(capsys, ["similarity", *base, "--features", str(experiment / "good.npy"),
                                 "--embedding", str(emb), "--no-rt-filter"])
    assert with_emb["dropped"]["rt"] == 0 and with_emb["embedding"]["accuracy"] > 0.7
    assert with_emb["embedding"]["correlation"]["cosine"]["pairs"] == 780

    out = experiment / "next.csv"
    prop = run_json(capsys, ["propose", *base, "--embedding", str(emb), "--out", str(out), "--queries", "5",
                             "--candidates", "40", "--neighbors", "12"])
    assert prop["trials"] == 5 * 3 + 5 and prop["mean_info_gain"]["active"] > 0
    proposed = load_judgments(out, catalog=experiment / "catalog.csv").trials
    assert len(proposed) == 20 and (proposed.n_select == 0).all() and proposed.references.shape[1] == 8

    assert main(["similarity", *base, "--features", str(experiment / "good.npy")]) == 0  # the text report
    text = capsys.readouterr().out
    assert "triplet accuracy" in text and "per-trial agreement" in text


def test_bad_input_exits_2(experiment: Path, capsys) -> None:
    base = ["similarity", "--judgments", str(experiment / "trials.csv")]
    np.save(experiment / "short.npy", np.zeros((10, 3)))
    assert main([*base, "--features", str(experiment / "short.npy")]) == 2
    assert "short.npy: features have 10 rows but the catalog has 40" in capsys.readouterr().err
    assert main([*base, "--features", str(experiment / "good.npy"), "--distance", "cos"]) == 2
    assert main([*base]) == 2
    assert main(["embed", "--judgments", str(experiment / "missing.csv")]) == 2
    assert "missing.csv: judgments file not found" in capsys.readouterr().err
    assert main(["embed", "--judgments", str(experiment / "trials.csv"), "--dims", "x"]) == 2
