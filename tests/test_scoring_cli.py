"""`probescope score` end to end: probabilities, logits, a folder and an .npz through a small classifier."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from probescope.app.cli import main

# TorchScript is deprecated in torch 2.x but is still the format of the test classifier
pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:FutureWarning")


class _ColourNet(torch.nn.Module):
    """Logits from the mean colour: images of a clear colour get confident, distinct predictions."""

    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(3, 3)
        with torch.no_grad():
            self.fc.weight.copy_(torch.eye(3) * 8.0)
            self.fc.bias.zero_()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.mean(dim=(2, 3)))


@pytest.fixture(scope="module")
def classifier(tmp_path_factory) -> list[str]:
    """The classifier options: a TorchScript file, trusted (it runs code when loaded)."""
    path = tmp_path_factory.mktemp("model") / "colour.pt"
    torch.jit.script(_ColourNet()).save(str(path))
    return ["--classifier", f"torchscript:{path}", "--trust", str(path)]


def colour_images(n: int, colours: int) -> np.ndarray:
    images = np.zeros((n, 16, 16, 3), np.uint8)
    for k in range(n):
        images[k, :, :, k % colours] = 255
    return images


def run_json(capsys, argv: list[str]) -> dict:
    assert main(["score", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_probs_and_logits(tmp_path, capsys):
    logits = np.random.default_rng(0).normal(scale=3.0, size=(50, 6))
    p = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    np.save(tmp_path / "l.npy", logits)
    np.save(tmp_path / "p.npy", p)
    a = run_json(capsys, ["--logits", str(tmp_path / "l.npy"), "--splits", "5"])
    b = run_json(capsys, ["--probs", str(tmp_path / "p.npy"), "--splits", "5"])
    assert a["n"] == 50 and a["splits"] == 5 and a["seed"] == 2020
    assert a["is_mean"] == pytest.approx(b["is_mean"], rel=1e-12)
    assert a["mutual_information"] == pytest.approx(np.log(a["is_all"]), rel=1e-12)
    c = run_json(capsys, ["--logits", str(tmp_path / "l.npy"), "--splits", "5", "--no-shuffle"])
    assert c["is_all"] == a["is_all"] and c["is_mean"] != a["is_mean"] and c["seed"] is None


def test_errors_exit_2_with_one_line(tmp_path, capsys):
    np.save(tmp_path / "bad.npy", np.array([[0.5, 0.6], [0.5, 0.5]]))
    assert main(["score", "--probs", str(tmp_path / "bad.npy"), "--splits", "1"]) == 2
    err = capsys.readouterr().err
    assert "bad.npy: probability row 0 sums to 1.1" in err and len(err.strip().splitlines()) == 1
    assert main(["score", "--example", "A"]) == 2
    assert "N=3 images into 10 splits" in capsys.readouterr().err


def test_worked_example_text(capsys):
    assert main(["score", "--example", "D", "--splits", "1"]) == 0
    out = capsys.readouterr().out
    assert "1.5215" in out and "classes never predicted: 1 of 3: husky" in out


def test_images_folder_and_npz_agree(tmp_path, capsys, classifier):
    images = colour_images(30, 3)
    np.savez(tmp_path / "images.npz", images=images)
    (tmp_path / "folder").mkdir()
    for k, im in enumerate(images):
        Image.fromarray(im).save(tmp_path / "folder" / f"{k:02d}.png")
    common = [*classifier, "--splits", "3", "--batch-size", "7"]
    a = run_json(capsys, ["--images", str(tmp_path / "images.npz"), *common, "--save-logits", str(tmp_path / "l.npy")])
    b = run_json(capsys, ["--images", str(tmp_path / "folder"), *common])
    assert a["is_mean"] == pytest.approx(b["is_mean"], rel=1e-6)
    assert a["is_all"] > 2.5  # three confident, equally frequent classes: close to the maximum 3
    assert a["classes_never_predicted"] == [] and a["lossy_inputs"] is False
    assert np.load(tmp_path / "l.npy").shape == (30, 3)
    collapsed = colour_images(30, 1)  # one colour only: mode collapse
    np.save(tmp_path / "collapsed.npy", collapsed)
    c = run_json(capsys, ["--images", str(tmp_path / "collapsed.npy"), *common])
    assert c["is_all"] == pytest.approx(1.0, abs=1e-6) and c["classes_never_predicted"] == [1, 2]


def test_demo_sampler_through_the_command(capsys, classifier):
    r = run_json(capsys, ["--images", "demo", "--n", "12", "--diversity", "2", *classifier, "--splits", "2"])
    assert r["n"] == 12 and r["source"].startswith("demo sampler (2 scenes")


def _demo_model_available() -> bool:
    from probescope.core.demo import model as demo

    return demo.DEMO_WEIGHTS.is_file()


@pytest.mark.skipif(not _demo_model_available(), reason="the demo model's weights are not built")
def test_demo_knobs_move_the_score(capsys):
    def score(*knobs: str) -> float:
        return run_json(capsys, ["--images", "demo", "--n", "64", "--splits", "2", *knobs])["is_all"]

    full = score()
    assert score("--diversity", "1") < score("--diversity", "4") < full  # mode collapse lowers IS
    assert score("--fidelity", "0.2") < full  # so does unrecognisable output


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message when CUDA is missing")
def test_cuda_requested_without_cuda(tmp_path, capsys, classifier):
    np.save(tmp_path / "x.npy", colour_images(4, 2))
    argv = ["score", "--images", str(tmp_path / "x.npy"), *classifier, "--device", "cuda"]
    assert main(argv) == 2
    assert "CUDA is not available" in capsys.readouterr().err
