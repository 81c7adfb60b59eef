"""An output option given one of the command's inputs, or a path inside an input folder (where it would be read as
an input next time), is refused in one line naming the option and the file, before anything is written."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from probescope.jobs.outputs import check_outputs
from probescope.main import main

pytestmark = pytest.mark.usefixtures("isolated_cache")

# every output option of `score`, each refused when it names an input or a path inside an input folder
SCORE_OUTPUTS = ["--per-image", "--save-logits", "--save-stats"]


def samples(tmp_path: Path) -> dict[str, Path]:
    """A sample array file and a sample folder, each a valid --images input."""
    images = np.random.default_rng(0).integers(0, 255, (8, 24, 24, 3), dtype=np.uint8)
    array = tmp_path / "samples.npy"
    np.save(array, images)
    folder = tmp_path / "samples"
    folder.mkdir()
    for k, image in enumerate(images):
        Image.fromarray(image).save(folder / f"p{k:02d}.png")
    return {"array": array, "folder": folder}


@pytest.mark.parametrize("option", SCORE_OUTPUTS)
@pytest.mark.parametrize("where", ["the input file", "inside the input folder", "inside the reference folder"])
def test_score_refuses_an_output_that_is_an_input(tmp_path, capsys, option, where):
    given = samples(tmp_path)
    if where == "the input file":
        argv, target = ["--images", str(given["array"])], given["array"]
    elif where == "inside the input folder":
        argv, target = ["--images", str(given["folder"])], given["folder"] / "p03.png"
    else:
        argv, target = ["--images", str(given["array"]), "--fid", str(given["folder"])], given["folder"] / "p03.png"
    before = target.read_bytes()
    listing = sorted(p.name for p in tmp_path.rglob("*"))
    assert main(["score", *argv, option, str(target)]) == 2
    captured = capsys.readouterr()
    err = captured.err.strip().splitlines()
    assert captured.out == "" and len(err) == 1, err
    assert err[0].startswith(f"probescope score: error: {option} {target}: "), err
    assert target.read_bytes() == before
    assert sorted(p.name for p in tmp_path.rglob("*")) == listing  # nothing written anywhere


@pytest.mark.parametrize("option", SCORE_OUTPUTS)
def test_score_writes_outputs_beside_its_inputs(tmp_path, option):
    """An output beside an input folder, not inside it, is written."""
    given = samples(tmp_path)
    out = tmp_path / ("out.csv" if option == "--per-image" else "out.npz" if option == "--save-stats" else "out.npy")
    assert main(["score", "--images", str(given["folder"]), option, str(out), "--splits", "2", "--json"]) == 0
    assert out.exists()


def test_check_outputs_sees_links_and_specs(tmp_path):
    weights = tmp_path / "weights.pth"
    weights.write_bytes(b"w")
    link = tmp_path / "link.pth"
    link.symlink_to(weights)
    hard = tmp_path / "hard.pth"
    hard.hardlink_to(weights)
    for out in (link, hard, tmp_path / "." / "weights.pth"):
        with pytest.raises(Exception, match=r"^--out .*: this is the --classifier input file"):
            check_outputs([("--out", out)], [("--classifier", f"inception-tf:{weights}")])
    check_outputs([("--out", tmp_path / "other.pth"), ("--save", None)], [("--classifier", f"torchscript:{weights}"),
                                                                          ("--images", "demo"), ("--fid", None)])


def similarity_inputs(tmp_path: Path) -> dict[str, Path]:
    """A trials CSV with its catalog, a release folder and an embedding file (refused before any is read)."""
    trials = tmp_path / "trials.csv"
    trials.write_text("query,ref_1,ref_2,choice_1\n0,1,2,1\n")
    catalog = tmp_path / "catalog.csv"
    catalog.write_text("id,path\n0,a.png\n1,b.png\n2,c.png\n")
    release = tmp_path / "release"
    release.mkdir()
    (release / "stimuli.txt").write_text("a.png\nb.png\nc.png\n")
    embedding = tmp_path / "embedding.npz"
    np.savez(embedding, x=np.zeros(3))
    return {"trials": trials, "catalog": catalog, "release": release, "embedding": embedding}


# (command, the input option the output collides with, which input, the output path: the input itself or inside it)
SIMILARITY_CASES = [
    ("embed", "--judgments", "trials", None),
    ("embed", "--catalog", "catalog", None),
    ("embed", "--judgments", "release", "stimuli.txt"),
    ("propose", "--judgments", "trials", None),
    ("propose", "--embedding", "embedding", None),
    ("propose", "--catalog", "catalog", None),
    ("propose", "--judgments", "release", "stimuli.txt"),
]


@pytest.mark.parametrize(("command", "collides", "which", "inside"), SIMILARITY_CASES)
def test_embed_and_propose_refuse_an_out_that_is_an_input(tmp_path, capsys, command, collides, which, inside):
    given = similarity_inputs(tmp_path)
    judgments = given["release"] if which == "release" else given["trials"]
    argv = [command, "--judgments", str(judgments), "--catalog", str(given["catalog"])]
    if command == "propose":
        argv += ["--embedding", str(given["embedding"])]
    target = given[which] / inside if inside else given[which]
    before = target.read_bytes()
    assert main([*argv, "--out", str(target)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"probescope {command}: error: --out {target}: "), err
    assert collides in err[0]
    assert target.read_bytes() == before
