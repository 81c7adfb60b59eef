"""The demo world's SIMULATED judgments: deterministic, labelled, read back through the real reader, usable."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from probescope.core.demo import judgments as demo
from probescope.core.similarity.quality import apply_quality_control
from probescope.core.similarity.readers import load_judgments
from probescope.main import main


@pytest.fixture(scope="module")
def cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cache")


def test_demo_judgments(cache: Path) -> None:
    paths = demo.ensure_demo_judgments(cache)
    digest = hashlib.sha256(paths.observations.read_bytes()).hexdigest()
    j = load_judgments(paths.observations)
    assert j.simulated and j.catalog.simulated and j.format == "psiz-hdf5"
    n = demo.N_STIMULI + demo.N_MIRRORED
    assert len(j.catalog) == n and (j.catalog.mirror_of >= 0).sum() == demo.N_MIRRORED
    assert all(j.catalog.image_path(i).is_file() for i in (0, n - 1))
    assert len(j.trials) == demo.N_SESSIONS * demo.SESSION_TRIALS
    kept, report = apply_quality_control(j.trials, j.catalog.mirror_of)
    assert report.catch_trials == 4 * demo.N_SESSIONS == report.dropped["catch"]
    assert report.sessions["unsatisfactory"] > 0 and report.dropped["grade"] > 0  # careless participants caught
    assert report.sessions["premium"] > report.sessions["unsatisfactory"]
    assert np.load(paths.truth).shape == (n, demo.TRUE_DIMS)
    # a second call reuses the files; a damaged marker regenerates identical ones
    assert demo.ensure_demo_judgments(cache) == paths
    (paths.folder / "done.json").write_text("{")
    demo.ensure_demo_judgments(cache)
    assert hashlib.sha256(paths.observations.read_bytes()).hexdigest() == digest
    assert json.loads((paths.folder / "done.json").read_text())["simulated"] is True


def test_similarity_command_on_demo(cache: Path, capsys, monkeypatch) -> None:
    monkeypatch.setenv("PROBESCOPE_CACHE", str(cache))
    paths = demo.ensure_demo_judgments(cache)
    truth = np.load(paths.truth)
    features = np.concatenate([truth, np.random.default_rng(0).normal(0, 0.05, (len(truth), 4))], axis=1)
    np.save(cache / "f.npy", features)
    assert main(["similarity", "--judgments", "demo", "--features", str(cache / "f.npy"), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["simulated"] is True and out["accuracy"]["l2"] > 0.7 and out["dropped"]["catch"] == 320


@pytest.mark.filterwarnings("ignore::FutureWarning")  # torch.jit deprecation notices
def test_similarity_command_with_model_features(cache: Path, capsys, monkeypatch, tmp_path: Path) -> None:
    """--model/--layer: features from the activation extractor over the catalog's images (a tiny TorchScript net)."""
    import torch

    monkeypatch.setenv("PROBESCOPE_CACHE", str(cache))
    torch.manual_seed(0)
    net = torch.jit.script(torch.nn.Sequential(torch.nn.Conv2d(3, 6, 5, stride=4), torch.nn.ReLU()))
    net.save(str(tmp_path / "tiny.pt"))
    argv = ["similarity", "--judgments", "demo", "--model", f"torchscript:{tmp_path / 'tiny.pt'}", "--layer",
            "output", "--distance", "cosine", "--json"]
    assert main(argv) == 2  # TorchScript runs code: refused until trusted
    assert "refusing to load: a TorchScript archive runs code" in capsys.readouterr().err
    assert main([*argv, "--trust", str(tmp_path / "tiny.pt")]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["features"].endswith("output (avg)") and 0.4 < out["accuracy"]["cosine"] < 1.0


def test_catalog_features_are_keyed_by_the_catalog_file_not_by_every_pixel(cache: Path, monkeypatch) -> None:
    """The activation cache knows a file-backed catalog by its file and image paths (no image is decoded to look
    the features up); the features are the stimuli's pooled activations, in catalog order."""
    from probescope.core.data.activations import extract_activations
    from probescope.core.models.loading import load_model
    from probescope.core.similarity.sources import CatalogImages, model_features

    catalog = load_judgments(demo.ensure_demo_judgments(cache).observations).catalog
    first = model_features(catalog, "demo", "layer2", cache_dir=cache / "acts")
    direct = extract_activations(load_model("demo"), "layer2", [CatalogImages(catalog)[i] for i in range(5)], None)
    np.testing.assert_allclose(first[:5], direct.mean(axis=(2, 3)), rtol=1e-5, atol=1e-6)
    decoded = []
    monkeypatch.setattr(CatalogImages, "__getitem__", lambda self, i: decoded.append(i) or pytest.fail("decoded"))
    np.testing.assert_array_equal(model_features(catalog, "demo", "layer2", cache_dir=cache / "acts"), first)
    assert decoded == []
    in_memory = CatalogImages(dataclasses.replace(catalog, source=None))
    assert in_memory.files() is in_memory  # no file of its own: known by its pixels, as before
