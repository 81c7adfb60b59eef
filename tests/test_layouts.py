"""Layer layouts (probescope.core.models.layout): one reading of channels-first maps, channels-last maps and token
sequences as units, decided from what the model says and refused when it says nothing that settles it.

- The same features handed on as (N, C, h, w), as (N, h, w, C) and as a token sequence with a class token and
  registers (three torch.export programs) give byte-identical tallies.
- A model whose token k copies a planted concept's patch fraction dissects to that concept with the IoU an
  independent computation (the mask reference, on the raw tokens) gives.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from probescope.core.errors import InputError
from probescope.core.models.layout import Layout, Undecided, decide, on_image_grid
from probescope.main import main

pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")


# ---- the layout itself ------------------------------------------------------------------------------------------

def test_layouts_parse_print_and_refuse():
    for text in ("nchw", "nhwc", "flat", "tokens:5:16x22"):
        assert str(Layout.parse(text)) == text
    assert Layout.parse("tokens:1:14x14").describe() == "tokens: 1 prefix + 14x14 patches"
    for bad in ("tokens:1:14", "nchw2", "tokens:-1:2x2", "tokens:1:0x3"):
        with pytest.raises(InputError, match="layout"):
            Layout.parse(bad)


def test_every_reading_is_a_view_of_channels_first_units_that_writes_through():
    """to_units gives (N, C, h, w) of the patch tokens; writing into it writes the layer's output and never a
    prefix token (what ablation relies on); the same for NumPy arrays (activation files)."""
    base = torch.arange(2 * 3 * 2 * 4, dtype=torch.float32).reshape(2, 3, 2, 4)  # (N, C, h, w)
    nhwc = base.permute(0, 2, 3, 1).contiguous()
    prefix = torch.full((2, 2, 3), -7.0)
    tokens = torch.cat([prefix, nhwc.reshape(2, 8, 3)], dim=1)  # (N, 2 + 2*4, C)
    for layout, out in ((Layout("nchw"), base.clone()), (Layout("nhwc"), nhwc.clone()),
                        (Layout("tokens", 2, (2, 4)), tokens.clone())):
        units = layout.to_units(out)
        assert torch.equal(units, base)
        units[:, 1] = 0.0
        assert torch.equal(layout.to_units(out)[:, 1], torch.zeros(2, 2, 4))
        assert torch.equal(layout.to_units(out)[:, 0], base[:, 0])
        assert np.array_equal(layout.to_units(out.numpy()), layout.to_units(out).numpy())
    assert torch.equal(tokens[:, :2], prefix)  # (the clone was written, the prefix of the clone untouched)
    assert torch.equal(Layout("flat").to_units(torch.ones(2, 5)), torch.ones(2, 5, 1, 1))
    with pytest.raises(InputError, match="10 tokens per image, but layout tokens:1:2x4 means 1 \\+ 2\\*4 = 9"):
        Layout("tokens", 1, (2, 4)).to_units(tokens)


@pytest.mark.parametrize(("shape", "stated", "tokens", "want"), [
    ((512, 7, 7), "nchw", None, "nchw"),
    ((512, 7, 7), None, None, "nchw"),  # only channels first puts a 7x7 grid on a square image
    ((56, 56, 96), "nhwc", None, "nhwc"),
    ((56, 56, 96), None, None, "nhwc"),
    ((1000,), None, None, "flat"),
    ((7, 10, 768), None, None, "nhwc"),  # a 224x320 image: 7x10 is its grid, 10x768 is not
    ((197, 768), None, (1, (14, 14)), "tokens:1:14x14"),
    ((196, 768), None, (1, (14, 14)), "tokens:0:14x14"),  # patch embedding: no prefix yet
    ((261, 384), None, (5, (16, 16)), "tokens:5:16x16"),  # class token and 4 registers
])
def test_decided_layouts(shape, stated, tokens, want):
    image = (224, 320) if shape == (7, 10, 768) else (224, 224)
    assert str(decide(shape, image, stated=stated, tokens=tokens)) == want


@pytest.mark.parametrize(("shape", "stated", "tokens", "batch_first", "says"), [
    ((56, 56, 56), None, None, True, "--layout nchw or --layout nhwc"),  # both readings fit
    ((64, 49, 64), "nhwc", None, True, "not a map of a 224x224 image"),  # MaxViT's windows: groups x positions
    ((64, 49, 64), None, None, True, "neither C x h x w nor h x w x C"),
    ((197, 768), None, None, True, "--layout tokens:P:HxW"),  # a sequence, no grid declared
    ((200, 768), None, (1, (14, 14)), True, "200 tokens per image"),
    ((197, 197), None, (1, (14, 14)), True, "same count"),
    ((2, 768), None, (1, (14, 14)), False, "first axis is not the batch"),  # sequence-first attention
])
def test_undecided_layouts_say_what_to_pass(shape, stated, tokens, batch_first, says):
    decision = decide(shape, (224, 224), stated=stated, tokens=tokens, batch_first=batch_first)
    assert isinstance(decision, Undecided) and says in decision.reason


def test_the_image_grid_allows_one_cell_of_rounding():
    assert on_image_grid(13, 13, (227, 227)) and on_image_grid(8, 10, (227, 320))
    assert not on_image_grid(49, 64, (224, 224))


# ---- three layouts, one tally -----------------------------------------------------------------------------------

class _Patches(nn.Module):
    """A 16-pixel patch embedding with ReLU: (N, 12, 8, 8) for 128-pixel images."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(3)
        self.proj = nn.Conv2d(3, 12, 16, stride=16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.proj(x))


class _ChannelsFirst(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.patches, self.feat = _Patches(), nn.ReLU()  # (a module with an operation: export keeps it)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.feat(self.patches(x)).mean(dim=(2, 3))


class _ChannelsLast(_ChannelsFirst):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.feat(self.patches(x).permute(0, 2, 3, 1)).mean(dim=(1, 2))


class _Tokens(_ChannelsFirst):
    """A class token and 4 registers before the 8x8 patch tokens."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("prefix", torch.linspace(-3, 3, 5 * 12).reshape(1, 5, 12))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        patches = self.patches(x).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.prefix.expand(x.shape[0], -1, -1), patches], dim=1)
        return self.feat(tokens)[:, 0]


@pytest.fixture(scope="module")
def three_programs(tmp_path_factory):
    import tqdm

    from probescope.core.demo.dataset import write_demo_dataset

    tqdm.tqdm.monitor_interval = 0
    root = tmp_path_factory.mktemp("layouts")
    write_demo_dataset(root / "dataset", n_images=10)
    x = torch.zeros(2, 3, 128, 128)
    paths = {}
    for name, module in (("nchw", _ChannelsFirst()), ("nhwc", _ChannelsLast()), ("tokens", _Tokens())):
        program = torch.export.export(module.eval(), (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))
        torch.export.save(program, root / f"{name}.pt2")
        paths[name] = root / f"{name}.pt2"
    return root, paths


def test_the_same_features_in_three_layouts_give_byte_identical_tallies(three_programs, capsys):
    root, paths = three_programs

    def dissect(name: str, *layout: str) -> int:
        return main(["dissect", "--model", f"export:{paths[name]}", "--trust", str(paths[name]), "--layer", "feat",
                     "--dataset", str(root / "dataset"), "--out", str(root / f"out-{name}"), "--min-samples", "1",
                     *layout])

    assert dissect("tokens") == 2  # an exported program declares no token grid: refused, never guessed
    err = capsys.readouterr().err
    assert "layer 'feat'" in err and "a sequence of 69 vectors of 12" in err and "--layout tokens:P:HxW" in err
    assert not (root / "out-tokens" / "tally.csv").exists()
    assert dissect("nchw") == 0 and dissect("nhwc") == 0 and dissect("tokens", "--layout", "tokens:5:8x8") == 0
    tallies = [(root / f"out-{name}" / "tally.csv").read_bytes() for name in ("nchw", "nhwc", "tokens")]
    assert tallies[0] == tallies[1] == tallies[2] and tallies[0].count(b"\n") == 13  # header + 12 units
    layouts = [json.loads((root / f"out-{name}" / "dissection.json").read_text())["model"]["layout"]
               for name in ("nchw", "nhwc", "tokens")]
    assert layouts == ["nchw", "nhwc", "tokens:5:8x8"]


def test_info_shows_each_layers_layout_and_units(three_programs, capsys):
    _root, paths = three_programs
    assert main(["info", f"export:{paths['nhwc']}", "--trust", str(paths["nhwc"])]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines() if line.startswith("  ")}
    assert "8x8x12  nhwc  12 units x 8x8" in lines["feat"]
    assert "12x8x8  nchw  12 units x 8x8" in lines["patches.proj"]


@pytest.mark.gui
def test_the_window_asks_for_a_layout_the_model_does_not_say(qtbot, window, answer_trust, three_programs,
                                                             monkeypatch):
    """The layer box says a layer's layout is undecided and offers to give it; given, the model is opened again
    reading the layer so (its request keeps the layout, as the command line's --layout), and the layer stays."""
    from PySide6.QtWidgets import QInputDialog
    from windows import WAIT_MS

    from probescope.jobs.inputs import OpenRequest

    _root, paths = three_programs
    answer_trust(True)
    with qtbot.waitSignal(window.opened, timeout=WAIT_MS):
        window.open(OpenRequest("model", f"export:{paths['tokens']}"))
    window.state.set_layer("feat")
    note = window.source_bar.layout_note
    assert "layout undecided: give it…" in note.text() and "<a href" in note.text()
    window.notify("tokens.pt2 (export): layer 'feat': a sequence of 69 vectors of 12 ...")  # a dissection's refusal
    monkeypatch.setattr(QInputDialog, "getText", lambda *args, **kwargs: ("tokens:5:8x8", True))
    with qtbot.waitSignal(window.opened, timeout=WAIT_MS):
        note.linkActivated.emit("layout")
    qtbot.waitUntil(lambda: window.state.layer == "feat", timeout=WAIT_MS)
    loaded = window.state.get("model")
    assert loaded.value.request.layouts == (("feat", "tokens:5:8x8"),)
    assert next(i for i in loaded.layers if i.name == "feat").units == (12, 8, 8)
    assert note.text().strip() == "12 units · 5 + 8×8 tokens"
    assert not window.notification.isVisible()  # the refusal the layout answered is gone, not left standing


# ---- a planted concept in a token ----------------------------------------------------------------------------

class _PlantedViT(nn.Module):
    """A ViT-shaped model (a class token, 16-pixel patches: timm's `num_prefix_tokens` and `patch_embed`) whose
    token channel 2 is the share of white pixels in its patch, channel 1 the share of grey ones, 0 and 3 constant."""

    num_prefix_tokens = 1

    def __init__(self) -> None:
        super().__init__()
        self.patch_embed = nn.Identity()
        self.patch_embed.patch_size = (16, 16)
        self.block = nn.Identity()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        white = F.avg_pool2d((x[:, :1] > 1.5).float(), 16)  # ImageNet-normalised red: 255 -> 2.25, 128 -> 0.07
        grey = F.avg_pool2d(((x[:, :1] > -0.5) & (x[:, :1] < 1.0)).float(), 16)
        ones = torch.ones_like(white)
        patches = torch.cat([ones, grey, white, 0.5 * ones], dim=1).flatten(2).transpose(1, 2)
        tokens = torch.cat([torch.full((len(x), 1, 4), 9.0), patches], dim=1)
        return self.block(tokens)[:, 0]


def _planted_dataset(root: Path, n: int = 16, side: int = 112):
    """Images white where 'pond' is, grey where 'lawn' is, black elsewhere; label maps at image size."""
    from oracles.synthetic_broden import ListBroden
    from probescope.core.data.broden import Label
    from probescope.core.data.broden_write import BrodenImage, write_broden

    labels = [Label(1, "pond", "object"), Label(2, "lawn", "object")]
    rng = np.random.default_rng(7)
    items, layers = [], []
    for i in range(n):
        objects = np.zeros((side, side), np.int32)
        for number in (2, 1):  # the pond over the lawn
            h, w = rng.integers(side // 6, side // 2, 2)
            y, x = rng.integers(0, side - h), rng.integers(0, side - w)
            objects[y:y + h, x:x + w] = number
        image = np.zeros((side, side, 3), np.uint8)
        image[objects == 1] = 255
        image[objects == 2] = 128
        items.append(BrodenImage(f"planted/{i:03d}", image, {"object": [objects]}))
        layers.append([("object", objects)])
    write_broden(root, items, labels, image_format="png")
    return ListBroden(layers, [[] for _ in range(n)], {label.number: label for label in labels})


def test_a_planted_token_dissects_to_its_concept_with_the_independent_iou(tmp_path):
    from oracles.mask_reference import MaskReference
    from probescope.core.data.activations import extract_activations
    from probescope.core.data.broden import BrodenDataset
    from probescope.core.data.preprocess import IMAGENET
    from probescope.core.models.layers import layer_layout
    from probescope.core.models.loading import LoadedModel

    reference = MaskReference(_planted_dataset(tmp_path / "ds"), min_samples=1)
    dataset = BrodenDataset.open(tmp_path / "ds")
    model = LoadedModel(module=_PlantedViT().eval(), name="planted", arch="planted", preprocess=IMAGENET,
                        class_names=None, input_size=(112, 112), source=None, source_key="planted",
                        default_layer="block")
    assert str(layer_layout(model, "block")) == "tokens:1:7x7"  # declared by the model, not passed
    raw = []
    model.module.block.register_forward_hook(lambda _m, _i, out: raw.append(out.detach().clone()))
    acts = extract_activations(model, "block", dataset, None, batch_size=5)
    tokens = torch.cat(raw).numpy()
    assert acts.shape == (16, 4, 7, 7)
    np.save(tmp_path / "act.npy", acts)
    share = round(float(reference.concept_mask(1).mean()), 3)  # the top quantile as large as the pond's share
    assert main(["dissect", "--activations", str(tmp_path / "act.npy"), "--dataset", str(tmp_path / "ds"),
                 "--out", str(tmp_path / "out"), "--min-samples", "1", "--units", "2", "--quantile", str(share)]) == 0
    with open(tmp_path / "out" / "tally.csv", newline="") as fh:
        row = next(csv.DictReader(fh))
    maps = tokens[:, 1:, 2].reshape(16, 7, 7)  # the independent reading: class token dropped, rows of 7 patches
    _threshold, mask = reference.unit_mask(maps, share)
    pond = reference.concept_mask(1)
    assert row["netdissect_label"] == "pond"
    assert float(row["netdissect_iou"]) == pytest.approx(reference.iou(mask, pond), abs=1e-6)
    assert reference.iou(mask, pond) > 0.5
