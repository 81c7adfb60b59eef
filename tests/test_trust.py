"""Files that run code when loaded (TorchScript, whole-model pickles) run only after a trust decision of the person at
the keyboard: every way in is tried with payloads whose marker file must not appear without one."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from oracles.payloads import pickled_payload, scripted_payload
from probescope.core.errors import InputError
from probescope.core.models.loading import load_model
from probescope.core.trust import Trust, UntrustedFile, sha256_of
from probescope.main import main

pytestmark = pytest.mark.filterwarnings("ignore:`torch.jit:FutureWarning")


@pytest.fixture
def payloads(tmp_path):
    marker = tmp_path / "marker"
    return {"marker": marker, "scripted": scripted_payload(tmp_path / "model.pt", marker),
            "generator": scripted_payload(tmp_path / "generator.pt", marker, generator=True),
            "pickled": pickled_payload(tmp_path / "whole.pth.tar", marker)}


def _refused(capsys, argv: list[str], kind: str) -> str:
    """The command exits 2 with its last stderr line saying why (a batch logs its steps before it)."""
    assert main(argv) == 2
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"probescope {argv[0]}: error: ") and "Traceback" not in err
    assert f"refusing to load: a {kind} runs code from the file when loaded" in last and "--trust FILE" in last
    return last


def test_torchscript_runs_only_when_trusted(payloads, capsys, tmp_path):
    marker, scripted = payloads["marker"], payloads["scripted"]
    np.save(tmp_path / "images.npy", np.zeros((2, 8, 8, 3), np.uint8))
    for argv in (["info", str(scripted)], ["info", f"torchscript:{scripted}"],
                 ["score", "--images", str(tmp_path / "images.npy"), "--classifier", f"torchscript:{scripted}"]):
        err = _refused(capsys, argv, "TorchScript archive")
        assert sha256_of(scripted) in err
        assert not marker.exists()
    assert main(["info", str(scripted), "--trust", str(scripted), "--input-size", "8"]) == 0
    assert marker.read_bytes() == b"!!!!"  # the payload is real: it ran once trusted


def test_generator_runs_only_when_trusted(payloads, capsys, small_world):
    marker, generator = payloads["marker"], payloads["generator"]
    argv = ["score", "--generator", str(generator), "--z-dim", "4", "--n", "4", "--classifier", small_world["model"]]
    _refused(capsys, argv, "TorchScript generator")
    assert not marker.exists()
    assert main([*argv, "--trust-code", "--splits", "1", "--resize", "64"]) == 0
    assert marker.exists()


def test_pickle_runs_only_when_trusted(payloads, capsys, tmp_path):
    marker, pickled = payloads["marker"], payloads["pickled"]
    _refused(capsys, ["info", f"pickle:{pickled}"], "whole-model pickle")
    _refused(capsys, ["info", str(pickled)], "whole-model pickle")  # detected as a pickle of Python objects
    assert main(["info", f"resnet18:{pickled}"]) == 2  # read as weights: refused in our words, one line
    err = capsys.readouterr().err
    assert "holds pickled Python objects" in err and len(err.strip().splitlines()) == 1
    assert "WeightsUnpickler" not in err and "add_safe_globals" not in err
    assert not marker.exists()
    assert main(["info", f"pickle:{pickled}", "--trust", str(pickled)]) == 2  # it ran, then is not a model
    assert marker.exists() and "holds a dict, not a whole model" in capsys.readouterr().err


def test_trust_is_for_the_content_not_the_name(payloads, tmp_path):
    scripted = payloads["scripted"]
    trust = Trust.of_files([scripted])
    other = tmp_path / "other.pt"
    torch.jit.script(nn.Identity()).save(str(other))
    other.replace(scripted)  # another file under the trusted name
    with pytest.raises(UntrustedFile):
        load_model(f"torchscript:{scripted}", trust=trust)
    assert not payloads["marker"].exists()
    with pytest.raises(InputError, match="--trust: no such file"):
        Trust.of_files([tmp_path / "missing.pt"])


def test_manifest_cannot_trust(payloads, capsys, tmp_path):
    marker, pickled = payloads["marker"], payloads["pickled"]
    manifest = tmp_path / "zoo.toml"
    manifest.write_text(f'[dataset]\npath = "broden"\n[[models]]\nspec = "pickle:{pickled}"\nlayers = ["fc"]\n'
                        "trust_pickle = true\n")
    assert main(["batch", str(manifest), "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "a manifest cannot trust a model file to run code" in err and "--trust FILE" in err
    assert not marker.exists()


def test_batch_asks_the_command_line(payloads, capsys, tmp_path, small_world):
    marker, scripted = payloads["marker"], payloads["scripted"]
    manifest = tmp_path / "zoo.toml"
    manifest.write_text(f'[dataset]\npath = "{small_world["dataset"]}"\n[[models]]\nspec = "torchscript:{scripted}"\n'
                        'layers = ["output"]\n')
    _refused(capsys, ["batch", str(manifest), "--out", str(tmp_path / "out")], "TorchScript archive")
    assert not marker.exists()


def test_dissect_asks_the_command_line(payloads, capsys, tmp_path, small_world):
    marker, pickled = payloads["marker"], payloads["pickled"]
    argv = ["dissect", "--dataset", str(small_world["dataset"]), "--model", f"pickle:{pickled}", "--out",
            str(tmp_path / "out")]
    _refused(capsys, argv, "whole-model pickle")
    assert not marker.exists()
