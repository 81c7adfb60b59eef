"""`probescope score` end to end: probabilities, logits, a folder and an .npz through a small classifier."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from PIL import Image

from probescope.main import main

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


@pytest.mark.skipif(not _demo_model_available(), reason="the demo model's weights are not built")
def test_images_too_small_for_the_classifier_get_one_line(tmp_path, capsys):
    """8x8 images end in the demo classifier's pooling: one line naming their size and --resize, whether the
    classifier gives logits alone or features too (--fid); at --resize 64 they score."""
    np.savez(tmp_path / "tiny.npz", images=colour_images(6, 3)[:, :8, :8])
    tiny = str(tmp_path / "tiny.npz")
    for more in ([], ["--fid", tiny]):
        assert main(["score", "--images", tiny, "--splits", "1", *more]) == 2
        error = capsys.readouterr().err.splitlines()[-1]  # (after the progress lines)
        assert error.startswith("probescope score: error: classifier demo cannot run on 8x8 images (") and \
            error.endswith("; choose an input size with --resize N"), error
    assert run_json(capsys, ["--images", tiny, "--fid", tiny, "--splits", "1", "--resize", "64"])["n"] == 6


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message when CUDA is missing")
def test_cuda_requested_without_cuda(tmp_path, capsys, classifier):
    np.save(tmp_path / "x.npy", colour_images(4, 2))
    argv = ["score", "--images", str(tmp_path / "x.npy"), *classifier, "--device", "cuda"]
    assert main(argv) == 2
    assert "device 'cuda' is not on this machine" in capsys.readouterr().err
    (tmp_path / "g.pt").write_bytes(b"any file")  # the device is checked before the generator is loaded
    assert main(["score", "--generator", str(tmp_path / "g.pt"), "--device", "cuda"]) == 2
    assert "device 'cuda' is not on this machine" in capsys.readouterr().err


def test_fid_kid_prc_and_infinite_n(small_world, capsys, tmp_path, isolated_cache):
    from probescope.core.scoring.classifiers import load_classifier
    from probescope.core.scoring.frechet import gaussian_stats
    from probescope.core.scoring.kid import kernel_inception_distance
    from probescope.core.scoring.pipeline import embed_source
    from probescope.core.scoring.precision_recall import precision_recall
    from probescope.core.scoring.reference import load_reference
    from probescope.core.scoring.sources import open_source

    common = ["--images", str(small_world["samples"]), "--classifier", small_world["model"], "--splits", "2"]
    r = run_json(capsys, [*common, "--fid", str(small_world["dataset"]), "--kid", "--kid-subsets", "5",
                          "--kid-subset-size", "8", "--prc", "--fid-inf", "--inf-smallest", "4", "--inf-points", "4",
                          "--save-stats", str(tmp_path / "gen_stats.npz")])
    classifier = load_classifier(small_world["model"])
    features, _ = embed_source(open_source(small_world["samples"]), classifier)
    reference = load_reference(small_world["dataset"], classifier)
    assert r["fid"] == pytest.approx(reference.frechet.distance(gaussian_stats(features)), rel=1e-12)
    kid = kernel_inception_distance(features, reference.features, 5, 8)
    assert (r["kid_mean"], r["kid_std"]) == pytest.approx((kid.mean, kid.std), rel=1e-12)
    prc = precision_recall(features, reference.features)
    assert (r["precision"], r["recall"]) == (prc.precision, prc.recall)
    assert r["fid_inf_fit"]["sizes"] == [4, 6, 8, 10] and np.isfinite([r["fid_inf"], r["is_inf"]]).all()
    assert "'fc'" in r["features"] and "12 images" in r["reference"]
    assert sum(row["generated"] for row in r["coverage"]) == 10
    assert sum(row["real"] for row in r["coverage"]) == 12
    # mu/sigma files as pytorch-fid exchanges them: the reference's give the same FID, the generated set's own 0
    reference.stats.save(tmp_path / "ref_stats.npz")
    again = run_json(capsys, [*common, "--fid", str(tmp_path / "ref_stats.npz")])
    assert again["fid"] == pytest.approx(r["fid"], rel=1e-9) and "mu/sigma" in again["reference"]
    assert run_json(capsys, [*common, "--fid", str(tmp_path / "gen_stats.npz")])["fid"] == pytest.approx(0, abs=1e-9)
    # ... but KID needs the reference's features
    assert main(["score", *common, "--fid", str(tmp_path / "gen_stats.npz"), "--kid", "--kid-subset-size", "8"]) == 2
    assert "holds only mu and sigma" in capsys.readouterr().err


def test_text_output_names_features_and_rounds(small_world, capsys, isolated_cache):
    argv = ["score", "--images", str(small_world["samples"]), "--classifier", small_world["model"], "--splits", "2",
            "--fid", str(small_world["dataset"]), "--prc"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "features: demo input of the last linear layer 'fc' (8-d)" in out
    assert "FID: " in out and "precision " in out and "coverage (top predictions" in out


def test_rounding_for_display_only(tmp_path, capsys):
    np.save(tmp_path / "p.npy", np.array([[1.0, 0.0], [1.0, 0.0], [1.0, 0.0]]))  # H(p(y)) = -0.0, IS = 1
    assert main(["score", "--probs", str(tmp_path / "p.npy"), "--splits", "1"]) == 0
    out = capsys.readouterr().out
    assert "-0.0000" not in out and "marginal entropy     0.0000 nats" in out
    r = run_json(capsys, ["--probs", str(tmp_path / "p.npy"), "--splits", "1"])
    assert r["marginal_entropy"] == 0.0  # the raw value (-0.0 compares equal) stays in JSON


@pytest.mark.parametrize("argv,message", [
    (["--example", "A", "--device", "cpu"], "--device cpu does nothing"),
    (["--example", "A", "--fid", "demo"], "need the images' features"),
    (["--images", "demo", "--kid"], "compare with a reference set"),
    (["--images", "demo", "--n", "5", "--fid", "demo", "--kid"], "KID subsets of 1000 need at least 1000"),
    (["--images", "demo", "--extensions", ","], "no file extensions"),
])
def test_flags_that_would_do_nothing_are_refused(capsys, argv, message):
    assert main(["score", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_is_inf_from_logits(tmp_path, capsys):
    np.save(tmp_path / "l.npy", np.random.default_rng(0).normal(scale=3.0, size=(60, 7)))
    r = run_json(capsys, ["--logits", str(tmp_path / "l.npy"), "--splits", "2", "--fid-inf", "--inf-points", "3"])
    assert r["is_inf_fit"]["sizes"] == [30, 45, 60] and "fid" not in r


def test_extensions_flag(tmp_path, capsys, classifier):
    folder = tmp_path / "mixed"
    folder.mkdir()
    for k, im in enumerate(colour_images(6, 3)):
        Image.fromarray(im).save(folder / f"{k}.{'png' if k % 2 else 'bmp'}")
    common = ["--images", str(folder), *classifier, "--splits", "1"]
    assert run_json(capsys, common)["n"] == 3  # torch-fidelity's png,jpg,jpeg
    assert run_json(capsys, [*common, "--extensions", "png,bmp"])["n"] == 6


def test_per_image_table_and_data_copying(small_world, capsys, tmp_path, isolated_cache):
    """--per-image: one row per sample in input order, equal to the core functions' values. The copy test is not run
    on the 12-image reference alone (too few images to set aside) and says so; calibrated on --held-out renders at
    --copy-alpha 0.05, a planted exact copy of reference image 4 is flagged with that image as its nearest and the
    smallest p-value. --held-out also runs the data-copying test."""
    import csv

    from probescope.core.data.broden import BrodenDataset
    from probescope.core.demo import world
    from probescope.core.demo.sampler import DemoSampler
    from probescope.core.scoring.classifiers import load_classifier
    from probescope.core.scoring.copy_test import calibrate
    from probescope.core.scoring.copying import data_copying
    from probescope.core.scoring.distributions import ClassScores
    from probescope.core.scoring.pipeline import embed_source
    from probescope.core.scoring.realism import sample_neighbours
    from probescope.core.scoring.reference import load_reference
    from probescope.core.scoring.report import score_report
    from probescope.core.scoring.sources import open_source

    dataset = BrodenDataset.open(small_world["dataset"])
    with np.load(small_world["samples"]) as archive:
        images = np.concatenate([archive["images"], np.stack([s.image for s in world.render_batch(4, 13)]),
                                 dataset.load_image(4)[None]])  # 24: the data-copying test needs 20
    planted = len(images) - 1
    np.savez(tmp_path / "planted.npz", images=images)
    held = np.stack([s.image for s in world.render_batch(3, 30)])  # fresh renders, never in the reference
    np.save(tmp_path / "held.npy", held)
    out = tmp_path / "rows.csv"
    common = ["--images", str(tmp_path / "planted.npz"), "--classifier", small_world["model"], "--splits", "1",
              "--fid", str(small_world["dataset"])]
    # the reference alone: 0.2 of 12 images cannot calibrate the test (99 needed at alpha 0.01)
    r = run_json(capsys, [*common, "--per-image", str(out), "--prc-k", "2"])
    assert "99 held-out real images" in r["copy_test_not_run"] and "copy_test_flagged" not in r
    rows = list(csv.DictReader(out.open()))
    assert {row["copy_p_value"] for row in rows} == {""} and {row["possible_copy"] for row in rows} == {"0"}
    text = _text(capsys, [*common, "--per-image", str(out)])
    assert "copy test not run: at alpha 0.01 it needs 99 held-out real images" in text
    assert "possible copies:" not in text
    # calibrated on 30 held-out renders at alpha 0.05 (19 needed)
    calibrated = [*common, "--held-out", str(tmp_path / "held.npy"), "--copy-alpha", "0.05", "--copy-cells", "1"]
    r = run_json(capsys, [*calibrated, "--per-image", str(out), "--prc-k", "2"])
    rows = list(csv.DictReader(out.open()))
    assert [int(row["index"]) for row in rows] == list(range(24)) and r["per_image"] == str(out)
    assert rows[planted]["possible_copy"] == "1" and rows[planted]["nearest_reference"] == "4"
    assert rows[planted]["copied_reference"] == "4" and float(rows[planted]["copy_p_value"]) == 1 / 31
    assert float(rows[planted]["nearest_distance"]) < 1e-3 and r["copy_test_flagged"] >= 1
    assert r["copy_test_alpha"] == 0.05 and r["copy_test_held_out_images"] == 30 and r["copy_test_samples"] == 24
    assert "copy_test_not_run" not in r
    classifier = load_classifier(small_world["model"])
    features, logits = embed_source(open_source(tmp_path / "planted.npz"), classifier)
    reference = load_reference(small_world["dataset"], classifier)
    held_features, _ = embed_source(open_source(tmp_path / "held.npy"), classifier)
    kl = score_report(ClassScores(logits, "logits", ""), splits=1).contributions
    assert [float(row["kl"]) for row in rows] == pytest.approx(kl.tolist(), rel=1e-9)
    nb = sample_neighbours(features, reference.features, 2,
                           calibration=calibrate(reference.features, held_features, alpha=0.05))
    assert [float(row["realism"]) for row in rows] == pytest.approx(nb.realism.tolist(), rel=1e-9)
    assert [int(row["nearest_reference_2"]) for row in rows] == nb.nearest[:, 1].tolist()
    assert [int(row["possible_copy"]) for row in rows] == nb.possible_copy.astype(int).tolist()
    assert [float(row["copy_p_value"]) for row in rows] == nb.copy.p_value.tolist()
    assert [int(row["copied_reference"]) for row in rows] == nb.copied.tolist()
    assert r["copy_test_flagged"] == nb.copies and r["copy_test_threshold"] == pytest.approx(nb.copy.threshold)
    text = _text(capsys, [*calibrated, "--per-image", str(out)])
    assert f"per-image table: {out}\n" in text and f"possible copies: {nb.copies} of 24 samples" in text
    assert "expected 5% at alpha 0.05" in text and "copy test not run" not in text
    # too few held-out images for the alpha asked: refused, with what it needs
    assert main(["score", *common, "--held-out", str(tmp_path / "held.npy"), "--per-image", str(out)]) == 2
    assert "needs at least 99 held-out images and got 30" in capsys.readouterr().err
    # without reference features: the KL column alone
    np.save(tmp_path / "l.npy", np.random.default_rng(0).normal(size=(7, 3)))
    logits_only = ["--logits", str(tmp_path / "l.npy"), "--splits", "1", "--per-image", str(out)]
    assert "(kl only: " in _text(capsys, logits_only)
    rows = list(csv.DictReader(out.open()))
    assert len(rows) == 7 and rows[0]["realism"] == "" and float(rows[0]["kl"]) >= 0
    # the data-copying test: the small dataset as the training set, fresh renders held out
    r = run_json(capsys, ["--images", "demo", "--n", "40", "--classifier", small_world["model"], "--splits", "1",
                          "--fid", str(small_world["dataset"]), "--held-out", str(tmp_path / "held.npy"),
                          "--copy-cells", "2"])
    generated, _ = embed_source(DemoSampler(40), classifier)
    want = data_copying(reference.features, held_features, generated, 2, seed=2020)
    assert r["data_copying_ct"] == pytest.approx(want.statistic, rel=1e-9) and r["data_copying_cells"] <= 2


def _text(capsys, argv: list[str]) -> str:
    assert main(["score", *argv]) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    (["--images", "demo", "--held-out", "demo"], "--held-out compare with a reference set"),
    (["--logits", "x.npy", "--fid", "demo", "--held-out", "demo"], "need the images' features"),
    (["--images", "demo", "--fid", "demo", "--copy-cells", "0"], "--copy-cells: expected a whole number from 1 to"),
])
def test_per_sample_flags_refused(capsys, argv, message):
    assert main(["score", *argv]) == 2
    assert message in capsys.readouterr().err


def test_held_out_images_that_are_the_reference_are_refused(capsys, tmp_path):
    """--held-out naming the --fid reference is refused before anything runs; held-out images that all turn out to
    be reference images are refused once they are seen, and a partial overlap is a caution in the result itself."""
    assert main(["score", "--images", "demo", "--fid", "demo", "--held-out", "demo"]) == 2
    assert "names the --fid reference itself" in capsys.readouterr().err
    from probescope.core.demo import world

    real = np.stack([s.image for s in world.render_batch(40, 120)])
    np.savez(tmp_path / "real.npz", images=real)
    np.savez(tmp_path / "same.npz", images=real[:100])
    common = ["score", "--images", "demo", "--n", "40", "--splits", "1", "--fid", str(tmp_path / "real.npz")]
    assert main([*common, "--held-out", str(tmp_path / "same.npz")]) == 2
    assert "all 100 held-out images are also in the --fid reference" in capsys.readouterr().err
    mixed = np.concatenate([real[:10], np.stack([s.image for s in world.render_batch(41, 110)])])
    np.savez(tmp_path / "mixed.npz", images=mixed)
    assert main([*common, "--held-out", str(tmp_path / "mixed.npz"), "--per-image", str(tmp_path / "rows.csv")]) == 0
    out = capsys.readouterr().out
    assert out.count("CAUTION: 10 of the 120 held-out images are also in the") == 2  # the copy test and C_T


def test_the_word_demo_is_the_builtin_world_beside_a_demo_folder(capsys, tmp_path, monkeypatch):
    """With a ./demo folder in the current directory, 'demo' still means the built-in demo world everywhere, and a
    note says so; ./demo names the folder."""
    from probescope.core.demo.dataset import write_demo_dataset

    write_demo_dataset(tmp_path / "demo", 12)
    monkeypatch.chdir(tmp_path)
    assert main(["info", "demo"]) == 0
    captured = capsys.readouterr()
    assert "architecture     demonet" in captured.out
    assert "'demo' (the spec) is the built-in demo world, not the folder ./demo" in captured.err
    assert main(["info", "./demo"]) == 0
    captured = capsys.readouterr()
    assert "images           12" in captured.out and captured.err == ""
    assert main(["score", "--images", "demo", "--n", "8", "--splits", "1"]) == 0
    assert "'demo' (--images) is the built-in demo world" in capsys.readouterr().err
