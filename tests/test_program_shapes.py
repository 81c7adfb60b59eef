"""A trusted program that does not fit the data is refused in one line naming its file, by every command that runs
one (the class of the hostile round's "a program exported for 1-channel input given RGB images"); a program
exported for a non-square input gets the images stretched to it and runs."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from probescope.main import main

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")


class _Net(nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, 4, 3)
        self.fc = nn.Linear(4, 14)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).mean((2, 3)))


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    import tqdm

    from probescope.core.demo.dataset import write_demo_dataset

    tqdm.tqdm.monitor_interval = 0
    root = tmp_path_factory.mktemp("shapes")
    write_demo_dataset(root / "dataset", n_images=6)
    batch = torch.export.Dim("batch")
    out = {"root": root}
    for name, channels, size in (("gray", 1, (32, 32)), ("wide", 3, (32, 48))):
        program = torch.export.export(_Net(channels).eval(), (torch.zeros(2, channels, *size),),
                                      dynamic_shapes=({0: batch},))
        torch.export.save(program, root / f"{name}.pt2")
        out[name] = root / f"{name}.pt2"
    (root / "classes.txt").write_text("\n".join(f"c{k}" for k in range(14)))
    return out


def _commands(p, name: str) -> dict[str, list[str]]:
    spec, trust, data = f"export:{p[name]}", ["--trust", str(p[name])], str(p["root"] / "dataset")
    manifest = p["root"] / f"{name}.toml"
    manifest.write_text(f'[dataset]\npath = "dataset"\n[[models]]\nspec = "{spec}"\nlayers = ["conv"]\n')
    return {
        "info": ["info", spec, *trust],
        "dissect": ["dissect", "--model", spec, *trust, "--layer", "conv", "--dataset", data, "--units", "0-1",
                    "--out", str(p["root"] / f"d-{name}")],
        "ablate": ["ablate", "--model", spec, *trust, "--layer", "conv", "--dataset", data, "--units", "0",
                   "--class-names", str(p["root"] / "classes.txt"), "--out", str(p["root"] / f"a-{name}")],
        "batch": ["batch", str(manifest), *trust, "--out", str(p["root"] / f"b-{name}")],
    }


@pytest.mark.parametrize("command", ["info", "dissect", "ablate", "batch", "similarity", "gui"])
def test_a_program_for_other_channels_is_refused_naming_it(programs, small_world, command, capsys, qtbot):
    spec, trust = f"export:{programs['gray']}", ["--trust", str(programs["gray"])]
    argv = {
        "similarity": ["similarity", "--judgments", str(small_world["judgments"]), "--catalog",
                       str(small_world["catalog"]), "--images", str(small_world["image_root"]), "--model", spec,
                       *trust, "--layer", "conv"],
        "gui": ["gui", "--model", spec, *trust, "--dataset", str(programs["root"] / "dataset"), "--kernel", "thread",
                "--screenshot", str(programs["root"] / "gray.png"), "--settings", str(programs["root"] / "s.ini")],
    }.get(command) or _commands(programs, "gray")[command]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert "gray.pt2: exported for 1-channel images" in err[-1] and "Traceback" not in "\n".join(err)


def test_a_program_for_a_non_square_input_gets_the_images_stretched_to_it(programs, capsys):
    from probescope.core.models.loading import load_model
    from probescope.core.trust import Trust

    model = load_model(f"export:{programs['wide']}", trust=Trust.of_files([programs["wide"]]))
    assert model.input_size == (32, 48) and model.preprocess.target == (32, 48)
    assert main(_commands(programs, "wide")["dissect"]) == 0


def test_a_model_that_does_not_run_on_the_images_is_refused_naming_it(programs):
    """Whatever the model's own complaint (a shape; torchvision's ViT asserts its input's size), listing its layers
    and extracting a layer say it in one line naming the model's file."""
    from probescope.core.data.activations import extract_activations
    from probescope.core.data.preprocess import IMAGENET
    from probescope.core.errors import InputError
    from probescope.core.models.layers import list_layers
    from probescope.core.models.loading import LoadedModel

    class Fixed(_Net):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            assert x.shape[-1] == 32, f"Wrong image width! Expected 32 but got {x.shape[-1]}!"
            return super().forward(x)

    gray = LoadedModel(_Net(1).eval(), "gray net", "custom", IMAGENET, None, (32, 32), programs["gray"], "gray",
                       "conv")
    with pytest.raises(InputError, match=r"gray.pt2: gray net: a 32x32 input does not run \(RuntimeError: "):
        list_layers(gray)
    fixed = LoadedModel(Fixed(3).eval(), "fixed net", "custom", IMAGENET, None, (32, 32), programs["wide"], "fixed",
                        "conv")
    images = [np.zeros((40, 40, 3), np.uint8)] * 2
    with pytest.raises(InputError, match=r"wide.pt2: fixed net does not run on images of shape \(3, 40, 40\) "
                                         r"\(AssertionError: Wrong image width! Expected 32 but got 40!\)"):
        extract_activations(fixed, "conv", images, None)
