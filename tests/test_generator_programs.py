"""A trusted generator program that does not fit the data is refused in one line naming its file and the option, exit
2, before any sampling (the hostile round's "score --generator gen.pt2 --z-dim 17" for a 16-d generator, and a
classifier given as --generator); a generator whose samples are not finite is refused naming the file and how many
samples were, instead of being quantised and scored; a well-formed generator still scores."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from probescope.core.errors import InputError
from probescope.main import main

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")

Z_DIM = 16
SIZE = 32  # the demo classifier runs on 32x32 samples


class _Generator(nn.Module):
    """z (N, 16) -> (N, 3, 32, 32) in [-1, 1]; `poison` 'nan' makes every sample NaN, 'inf' makes the samples whose
    first noise value is positive infinite."""

    def __init__(self, poison: str = "") -> None:
        super().__init__()
        self.lin = nn.Linear(Z_DIM, 3 * 4 * 4)
        self.poison = poison

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        x = torch.tanh(self.lin(z)).view(z.shape[0], 3, 4, 4)
        x = x.repeat_interleave(8, dim=2).repeat_interleave(8, dim=3)  # to SIZE x SIZE
        if self.poison == "nan":
            return x * float("nan")
        if self.poison == "inf":
            return torch.where((z[:, 0] > 0)[:, None, None, None], torch.full_like(x, float("inf")), x)
        return x


class _Classifier(nn.Module):
    """(N, 3, 16, 16) images -> 5 logits: a program that is not a generator."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.fc = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.conv(x).mean(dim=(2, 3)))


def _export(module: nn.Module, example: torch.Tensor, path: Path) -> Path:
    program = torch.export.export(module.eval(), (example,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    torch.export.save(program, path)
    return path


@pytest.fixture(scope="module")
def programs(tmp_path_factory) -> dict[str, Path]:
    """torch.export programs (dynamic batch) of 16-d generators (well-formed, NaN, partly infinite) and of a
    classifier, and the well-formed generator and the classifier as TorchScript."""
    import tqdm

    tqdm.tqdm.monitor_interval = 0  # torch.export's progress bars would leave tqdm's monitor thread running
    root = tmp_path_factory.mktemp("generators")
    torch.manual_seed(0)
    z, x = torch.zeros(2, Z_DIM), torch.zeros(2, 3, 16, 16)
    paths = {
        "good": _export(_Generator(), z, root / "gen.pt2"),
        "nan": _export(_Generator("nan"), z, root / "nan.pt2"),
        "inf": _export(_Generator("inf"), z, root / "inf.pt2"),
        "classifier": _export(_Classifier(), x, root / "classifier.pt2"),
        "good_script": root / "gen.pt",
        "classifier_script": root / "classifier.pt",
    }
    torch.jit.script(_Generator().eval()).save(str(paths["good_script"]))
    torch.jit.script(_Classifier().eval()).save(str(paths["classifier_script"]))
    return paths


def _score(path: Path, *extra: str) -> list[str]:
    return ["score", "--generator", str(path), "--trust", str(path), "--n", "12", "--batch-size", "6",
            "--splits", "2", *extra]


def _refusal(capsys, argv: list[str], *wanted: str, alone: bool = True) -> str:
    """The one stderr line of a refused run (exit 2, no traceback), which names the file and `wanted`; `alone`: the
    only line on stderr (refused before any stage of the run began)."""
    assert main(argv) == 2
    captured = capsys.readouterr()
    lines = captured.err.strip().splitlines()
    assert "Traceback" not in captured.err and "Warning" not in captured.err, captured.err
    assert not alone or len(lines) == 1, captured.err
    errors = [line for line in lines if line.startswith("probescope score: error: ")]
    assert len(errors) == 1 and errors[0] == lines[-1], captured.err
    for text in (Path(argv[argv.index("--generator") + 1]).name, *wanted):
        assert text in errors[0], (text, errors[0])
    assert captured.out == ""
    return errors[0]


@pytest.mark.parametrize("kind", ["good", "good_script"])
def test_a_generator_given_another_noise_size_is_refused_naming_the_file_and_z_dim(programs, capsys, kind):
    """A torch.export program is refused from its input signature (it says which size it takes); a TorchScript
    generator, which has none, from one tiny batch run before any sampling."""
    line = _refusal(capsys, _score(programs[kind], "--z-dim", "17"), "--z-dim 17")
    if kind == "good":
        assert "takes 16-d noise" in line and "--z-dim 16" in line


@pytest.mark.parametrize("kind", ["classifier", "classifier_script"])
def test_a_classifier_given_as_a_generator_is_refused_naming_the_file(programs, capsys, kind):
    line = _refusal(capsys, _score(programs[kind], "--z-dim", str(Z_DIM)))
    assert "--generator" in line or "--z-dim" in line
    if kind == "classifier":
        assert "(N, 3, 16, 16)" in line and "not a generator" in line


def test_a_class_input_that_the_program_lacks_is_refused_naming_gen_classes(programs, capsys):
    _refusal(capsys, _score(programs["good"], "--z-dim", str(Z_DIM), "--gen-classes", "3"), "--gen-classes 3")


def test_non_finite_samples_are_refused_with_their_count(programs, capsys):
    """NaN samples were quantised to 0 and scored (exit 0): now the first batch holding any is refused, counting
    them. The stage line of the run may come first (the samples are only known once generated)."""
    _refusal(capsys, _score(programs["nan"], "--z-dim", str(Z_DIM)), "NaN or infinity", "6 of the 6 samples 0-5",
             alone=False)


def test_the_count_is_of_the_non_finite_samples_only(programs):
    from probescope.core.scoring.sources import TorchScriptGeneratorSource
    from probescope.core.trust import Trust

    path = programs["inf"]
    source = TorchScriptGeneratorSource(path, Z_DIM, 12, seed=3, trust=Trust.of_files([path]))
    z = np.random.RandomState(3).randn(6, Z_DIM)  # the first batch's noise, drawn as the source draws it
    bad = int((z[:, 0] > 0).sum())
    assert 0 < bad < 6
    with pytest.raises(InputError) as caught:
        list(source.batches(6))
    assert f"{bad} of the 6 samples 0-5 (first: sample {int(np.argmax(z[:, 0] > 0))})" in str(caught.value)
    assert str(caught.value).startswith(str(path))


@pytest.mark.parametrize("kind", ["good", "good_script"])
def test_a_well_formed_generator_still_scores(programs, capsys, kind):
    assert main([*_score(programs[kind], "--z-dim", str(Z_DIM)), "--json"]) == 0
    captured = capsys.readouterr()
    result = json.loads(captured.out)
    assert result["n"] == 12 and np.isfinite(result["is_mean"]) and "error" not in captured.err
