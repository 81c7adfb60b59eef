"""Modern architectures end to end, with random weights saved to files as users get them (nothing is downloaded):
torchvision's ViT-B/16, Swin-T and ConvNeXt-T, a timm ViT with registers on a non-square grid (safetensors), OpenCLIP's
ViT-B/32 visual tower (a whole CLIP state dict) and a DINOv2 ViT-S/14 in Meta's key layout. For each: its layers'
layouts as the architecture means them (and `probescope info`), `probescope dissect` on four demo images, the Image
view of one image, ablating a unit (its channel at every patch token and nowhere else, the class token and registers
untouched; LayerAblation's numbers against full forwards zeroed by hand), drawing a unit, and pooled features (the
patches' mean, the class token). Layers whose layout nothing says are refused with the option that settles it
(--layout) and read as it says. Kept cheap: each model is saved once, four images at most, 2 drawing steps."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from probescope.core.ablation.ablate import LayerAblation, _LayerHook
from probescope.core.ablation.groups import UnitGroup
from probescope.core.data.activations import extract_activations
from probescope.core.data.broden import BrodenDataset
from probescope.core.data.preprocess import IMAGENET
from probescope.core.demo.dataset import write_demo_dataset
from probescope.core.demo.world import SCENES
from probescope.core.dissection.correlation import scene_truth
from probescope.core.dissection.image_view import segment_image
from probescope.core.dissection.labels import LabelStore
from probescope.core.dissection.results import DissectionResult
from probescope.core.errors import InputError
from probescope.core.featurevis.render import visualize
from probescope.core.featurevis.settings import Direction, VisSettings
from probescope.core.models.layers import layer_layout, list_layers
from probescope.core.models.layout import Layout, Undecided
from probescope.core.models.loading import LoadedModel, load_model
from probescope.main import main

N_IMAGES = 4
UNIT = 1  # the unit ablated and drawn
DISSECT = ["--units", "0-3", "--jobs", "1", "--min-samples", "1", "--max-length", "1", "--beam-size", "1",
           "--sweep-length", "0", "--search", "iou"]  # four units, one atom: the least work a dissection does


@dataclass(frozen=True)
class Arch:
    """A saved architecture: the layer dissected, ablated and drawn, with its layout and units (C, h, w) at the
    model's input size, and other layers' (None: undecided)."""

    name: str
    layer: str
    layout: str
    units: tuple[int, int, int]
    others: dict[str, tuple[str | None, tuple[int, int, int] | None]] = field(default_factory=dict)
    input_size: tuple[int, int] | None = None  # what the model is built for (--input-size)
    draw_size: int = 0  # the drawing's side (0: the model's input size)
    ablate: str | None = None  # a layer LayerAblation measures on the classifier (of len(SCENES) outputs); not the
    # last block of a ViT: only its class token reaches a class-token classifier, and ablation never touches it


ARCHES = [
    Arch("vit_b_16", "encoder.layers.encoder_layer_11", "tokens:1:14x14", (768, 14, 14),
         {"conv_proj": ("nchw", (768, 14, 14)), "encoder.layers.encoder_layer_0.mlp": ("tokens:1:14x14", (768, 14, 14)),
          "encoder.ln": ("tokens:1:14x14", (768, 14, 14)), "heads.head": ("flat", (14, 1, 1))}),
    Arch("swin_t", "features.7.1.mlp", "nhwc", (768, 7, 7),
         {"features.0.0": ("nchw", (96, 56, 56)), "features.0.1": ("nhwc", (96, 56, 56)),
          "features.2.reduction": ("nhwc", (192, 28, 28)), "features": ("nhwc", (768, 7, 7)),
          "permute": ("nchw", (768, 7, 7)), "avgpool": ("nchw", (768, 1, 1))}, draw_size=64),
    Arch("convnext_tiny", "features.1.0.block.3", "nhwc", (384, 56, 56),
         {"features.1.0": ("nchw", (96, 56, 56)), "features.1.0.block.0": ("nchw", (96, 56, 56)),
          "features.1.0.block.1": ("nhwc", (96, 56, 56)), "features.1.0.block.4": ("nhwc", (384, 56, 56)),
          "features.1.0.block.6": ("nchw", (96, 56, 56)), "features.7": ("nchw", (768, 7, 7))}, draw_size=64,
         ablate="features.1.0.block.3"),
    Arch("timm_reg", "blocks.11", "tokens:5:16x22", (384, 16, 22),
         {"patch_embed.proj": ("nchw", (384, 16, 22)), "blocks.0.mlp.fc1": ("tokens:5:16x22", (1536, 16, 22)),
          "blocks.0.attn.q_norm": (None, None), "head": ("flat", (14, 1, 1))}, input_size=(224, 320),
         ablate="blocks.10"),
    Arch("openclip", "transformer.resblocks.11", "tokens:1:7x7", (768, 7, 7),
         {"conv1": ("nchw", (768, 7, 7)), "ln_pre": ("tokens:1:7x7", (768, 7, 7)),
          "transformer": ("tokens:1:7x7", (768, 7, 7))}),
    Arch("dinov2", "blocks.11", "tokens:1:16x16", (384, 16, 16),
         {"patch_embed.proj": ("nchw", (384, 16, 16)), "norm": ("tokens:1:16x16", (384, 16, 16)),
          "blocks.0.mlp.fc1": ("tokens:1:16x16", (1536, 16, 16))}),
]


def _save(name: str, folder: Path) -> str:
    """Random weights of `name` saved as its users get them; the spec that opens the file."""
    torch.manual_seed(0)
    if name in ("vit_b_16", "swin_t", "convnext_tiny"):
        from torchvision.models import get_model

        path = folder / f"{name}.pth"
        module = get_model(name, weights=None, num_classes=len(SCENES))
        for name_, p in module.named_parameters():
            if name_.endswith("layer_scale"):  # ConvNeXt's 1e-6: its blocks would barely change anything
                nn.init.constant_(p, 0.5)
        torch.save(module.state_dict(), path)
        return f"{name}:{path}"
    if name == "timm_reg":
        import timm
        from safetensors.torch import save_file

        path = folder / "model.safetensors"
        module = timm.create_model("vit_small_patch14_reg4_dinov2", pretrained=False, img_size=(224, 320),
                                   num_classes=len(SCENES))
        save_file(module.state_dict(), str(path))
        return f"timm:vit_small_patch14_reg4_dinov2:{path}"
    if name == "openclip":
        import open_clip

        path = folder / "open_clip_model.pt"
        torch.save(open_clip.create_model("ViT-B-32", pretrained=None).state_dict(), path)  # the whole CLIP model
        return f"openclip:ViT-B-32:{path}"
    import timm

    path = folder / "dinov2_vits14_pretrain.pth"  # Meta's layout: timm's keys and a mask token
    state = timm.create_model("vit_small_patch14_dinov2", pretrained=False, img_size=518, num_classes=0).state_dict()
    state["mask_token"] = torch.zeros(1, state["cls_token"].shape[-1])
    torch.save(state, path)
    return f"dinov2:vits14:{path}"


@dataclass
class Saved:
    arch: Arch
    spec: str
    model: LoadedModel
    args: list[str]  # --input-size where the model is built for one


@pytest.fixture(scope="module", autouse=True)
def cache(tmp_path_factory):
    """The probescope cache in the test session's folder (as `isolated_cache` gives it), for the whole module: the
    command line and the API calls below share the activations they extract."""
    folder = tmp_path_factory.getbasetemp() / "probescope-cache"
    folder.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROBESCOPE_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = write_demo_dataset(tmp_path_factory.mktemp("demo") / "data", n_images=N_IMAGES)
    dataset = BrodenDataset.open(root)
    return dataset, LabelStore.build(dataset)


@pytest.fixture(scope="module", params=ARCHES, ids=[a.name for a in ARCHES])
def saved(request, tmp_path_factory):
    """One architecture at a time (the tests are grouped by it): saved once, loaded once."""
    arch: Arch = request.param
    spec = _save(arch.name, tmp_path_factory.mktemp(arch.name))
    model = load_model(spec, input_size=arch.input_size)
    args = ["--input-size", "x".join(map(str, arch.input_size))] if arch.input_size else []
    return Saved(arch, spec, model, args)


@pytest.fixture(scope="module")
def dissected(saved, data, tmp_path_factory):
    """`probescope dissect` of the architecture's layer over the demo images: (exit code, output folder)."""
    out = tmp_path_factory.mktemp("dissect") / "out"
    code = main(["dissect", "--model", saved.spec, "--layer", saved.arch.layer, "--dataset", str(data[0].root),
                 "--out", str(out), *saved.args, *DISSECT])
    return code, out


@pytest.fixture(scope="module")
def output(saved, data):
    """(the first two demo images, the layer's raw output for them), read by a hook of our own."""
    images = [data[0].load_image(i) for i in range(2)]
    return images, _raw(saved.model, saved.arch.layer, saved.model.preprocess(images))


def _raw(model: LoadedModel, layer: str, x: torch.Tensor, *hooks) -> torch.Tensor:
    """The layer's output for x as the module gives it, read by a hook of our own (registered after `hooks`)."""
    seen = []
    module = dict(model.module.named_modules())[layer]
    handles = [module.register_forward_hook(h) for h in hooks]
    handles.append(module.register_forward_hook(lambda _m, _i, out: seen.append(out.detach().clone())))
    try:
        with torch.no_grad():
            model.module(x)
    finally:
        for handle in handles:
            handle.remove()
    return seen[-1]


def _by_hand(raw: torch.Tensor, layout: str) -> torch.Tensor:
    """Units (N, C, h, w) of a raw output read without Layout: the patch tokens on their grid, channels moved first."""
    if layout == "nhwc":
        return raw.permute(0, 3, 1, 2)
    if layout == "nchw":
        return raw
    _, prefix, grid = layout.split(":")
    rows, cols = map(int, grid.split("x"))
    n, tokens, channels = raw.shape
    assert tokens == int(prefix) + rows * cols
    out = torch.empty(n, channels, rows, cols)
    for y in range(rows):
        for x in range(cols):
            out[:, :, y, x] = raw[:, int(prefix) + y * cols + x]
    return out


def _tally(out: Path) -> list[dict[str, str]]:
    return list(csv.DictReader((out / "tally.csv").read_text(encoding="utf-8").splitlines()))


# ---- the architectures -------------------------------------------------------------------------------------------

def test_layers_have_the_layouts_the_architecture_means(saved, capsys):
    arch = saved.arch
    layers = {info.name: info for info in list_layers(saved.model)}
    expected = {arch.layer: (arch.layout, arch.units), **arch.others}
    for name, (layout, units) in expected.items():
        info = layers[name]
        if layout is None:
            assert isinstance(info.layout, Undecided) and "--layout" in info.layout.reason, name
        else:
            assert str(info.layout) == layout and info.units == units, (name, info)
    assert str(layer_layout(saved.model, arch.layer)) == arch.layout
    assert main(["info", saved.spec, *saved.args]) == 0
    out = capsys.readouterr().out
    line = next(row for row in out.splitlines() if row.split()[:1] == [arch.layer])
    c, h, w = arch.units
    assert f"  {arch.layout}  {c} units x {h}x{w}" in line, line
    height, width = arch.input_size or (224, 224)
    assert f"layers (output per image for a {height}x{width} input; its layout; units x grid)" in out


def test_dissect_reads_the_layer_through_its_layout(saved, dissected):
    code, out = dissected
    assert code == 0
    rows = _tally(out)
    assert [r["unit"] for r in rows] == ["0", "1", "2", "3"]
    doc = json.loads((out / "dissection.json").read_text(encoding="utf-8"))
    assert doc["n_units"] == saved.arch.units[0]
    assert doc["model"]["layer"] == saved.arch.layer and doc["model"]["layout"] == saved.arch.layout
    assert doc["model"]["input_size"] == list(saved.model.input_size)


def test_the_image_view_of_one_image(saved, dissected, data, cache):
    """The Image view from the dissection and one image's activations (the cache the command line filled)."""
    code, out = dissected
    assert code == 0
    dataset, store = data
    result = DissectionResult.load(out / "dissection.json")
    activations = extract_activations(saved.model, saved.arch.layer, dataset, cache)
    c, h, w = saved.arch.units
    assert activations.shape[:2] == (N_IMAGES, c)
    if saved.model.preprocess.target is not None:  # a fixed input size: its grid
        assert activations.shape[2:] == (h, w)
    view = segment_image(result, activations[0], store=store, image=0)
    assert view.segmentation.shape == tuple(int(s) for s in store.seg_shapes[0])
    assert {u.unit for u in view.units} <= {0, 1, 2, 3}
    assert view.winner.shape == view.segmentation.shape


def test_units_are_the_raw_output_read_by_hand_and_pool_to_features(saved, dissected, output, data, cache):
    """Every consumer's units equal the layer's output read by hand (patch tokens on their grid, channels first);
    pooled, the patches' mean and a token layer's class token (its first token, raw); a map has no class token."""
    model, arch = saved.model, saved.arch
    images, raw = output
    units = extract_activations(model, arch.layer, data[0], cache)[:2]  # the dissection's
    torch.testing.assert_close(torch.from_numpy(np.array(units)), _by_hand(raw, arch.layout), rtol=1e-4, atol=1e-4)
    avg = extract_activations(model, arch.layer, images, None, pool="avg")
    assert avg.shape == (len(images), arch.units[0], 1, 1)
    np.testing.assert_allclose(avg[:, :, 0, 0], np.asarray(units).mean(axis=(2, 3)), rtol=1e-4, atol=1e-5)
    if arch.layout.startswith("tokens"):
        prefix = int(arch.layout.split(":")[1])
        np.testing.assert_allclose(avg[:, :, 0, 0], raw[:, prefix:].mean(1).numpy(), rtol=1e-4, atol=1e-5)
        cls = extract_activations(model, arch.layer, images, None, pool="cls")
        assert cls.shape == (len(images), arch.units[0], 1, 1)
        np.testing.assert_allclose(cls[:, :, 0, 0], raw[:, 0].numpy(), rtol=1e-4, atol=1e-5)
    else:
        with pytest.raises(InputError, match="has no class token"):
            extract_activations(model, arch.layer, images, None, pool="cls")


def test_ablating_a_unit_zeroes_its_channel_at_every_patch_and_nowhere_else(saved, output, data):
    """The hook ablation runs: unit UNIT is 0 at every position of the layer's units, every other value of the output
    (the class token, the registers, the other channels) is as the model made it. With a classifier, LayerAblation's
    numbers equal full forwards with that channel zeroed by a hook of our own."""
    model, arch = saved.model, saved.arch
    hook = _LayerHook(layer_layout(model, arch.layer))
    hook.units, hook.values = torch.tensor([UNIT]), torch.zeros(1)
    images, before = output
    hook.last = 1
    after = _raw(model, arch.layer, model.preprocess(images), hook)
    assert hook.calls == 1
    prefix = int(arch.layout.split(":")[1]) if arch.layout.startswith("tokens") else 0
    zeroed = torch.zeros_like(before, dtype=torch.bool)
    if arch.layout == "nhwc":
        zeroed[..., UNIT] = True
    else:
        zeroed[:, prefix:, UNIT] = True  # the patch tokens only
    assert (after[zeroed] == 0).all() and (before[zeroed] != 0).all()
    assert torch.equal(after[~zeroed], before[~zeroed])  # the class token and registers among them
    if arch.ablate:
        _check_layer_ablation(model, arch, arch.ablate, data)
    if arch.name == "vit_b_16":  # its head reads the class token only: no unit of the last block can matter
        images = _One(data[0])
        truth = scene_truth(data[0], list(SCENES))[:1]
        activations = extract_activations(model, arch.layer, [images.load_image(0)], None)
        with pytest.raises(InputError, match="nothing after layer 'encoder.layers.encoder_layer_11' reads its patch"):
            LayerAblation(model, arch.layer, activations, images, truth, list(SCENES))


class _One:
    """The dataset's first image (labelled): LayerAblation's full forwards over one image."""

    def __init__(self, dataset: BrodenDataset) -> None:
        self.dataset, self.n_images = dataset, 1

    def load_image(self, i: int) -> np.ndarray:
        return self.dataset.load_image(i)


def _check_layer_ablation(model: LoadedModel, arch: Arch, layer: str, data) -> None:
    """LayerAblation's numbers for unit UNIT equal full forwards with its channel zeroed by a hook of our own, and
    differ from the model's own."""
    images = _One(data[0])
    truth = scene_truth(data[0], list(SCENES))[:1]
    assert (truth >= 0).all()
    activations = extract_activations(model, layer, [images.load_image(0)], None)
    ablation = LayerAblation(model, layer, activations, images, truth, list(SCENES))
    result = ablation.run([UnitGroup(f"unit {UNIT}", (UNIT,))])
    assert str(ablation.layout) == arch.layout  # (the blocks ablated here are laid out as the layer dissected)
    if arch.layout.startswith("tokens"):
        assert result.path == "hook"  # its cached activations hold no prefix tokens to run a tail on
    correct, p_true = _by_hand_ablation(model, layer, str(ablation.layout), images, truth, result.class_index)
    np.testing.assert_array_equal(result.correct_after[0], correct)
    np.testing.assert_allclose(result.p_true_after[0], p_true, rtol=1e-4, atol=1e-7)
    assert not np.allclose(result.p_true_after[0], result.p_true_before, rtol=0, atol=1e-7)  # it changed something


def _by_hand_ablation(model, layer, layout, dataset, truth, classes):
    """Per class: images predicted right and the mean probability of the true class, with channel UNIT of the
    layer's output zeroed at the patch tokens (channels last: everywhere) by a hook of our own."""
    prefix = int(layout.split(":")[1]) if layout.startswith("tokens") else 0

    def zero(_m, _i, out):
        out = out.clone()
        if layout == "nhwc":
            out[..., UNIT] = 0
        else:
            out[:, prefix:, UNIT] = 0
        return out

    labelled = np.flatnonzero(truth >= 0)
    x = model.preprocess([dataset.load_image(int(i)) for i in labelled])
    handle = dict(model.module.named_modules())[layer].register_forward_hook(zero)
    try:
        with torch.no_grad():
            logits = model.module(x).reshape(len(labelled), -1)
    finally:
        handle.remove()
    target = torch.from_numpy(truth[labelled])
    right = (logits.argmax(-1) == target).numpy()
    prob = torch.softmax(logits.double(), -1).gather(-1, target[:, None])[:, 0].numpy()
    rows = truth[labelled]
    return (np.array([right[rows == c].sum() for c in classes]),
            np.array([prob[rows == c].mean() for c in classes]))


def test_a_unit_is_drawn(saved):
    model, arch = saved.model, saved.arch
    settings = VisSettings(steps=2, size=arch.draw_size)
    vis = visualize(model, arch.layer, Direction.unit(UNIT, arch.units[0]), settings)
    side = arch.draw_size or model.input_size[0]
    assert vis.image.shape == (side, side, 3) and vis.image.dtype == np.uint8
    assert vis.trace.shape == (2,) and np.isfinite(vis.trace).all()
    assert np.isfinite(vis.objective) and vis.peak >= vis.objective


# ---- layouts nothing says ----------------------------------------------------------------------------------------

class Mix(nn.Module):
    """Functional ops only: nothing says whether its (N, 6, 6, 6) output is channels first or last."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.adaptive_avg_pool2d(x, 6).repeat(1, 2, 1, 1)


class Sixes(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mix = Mix()
        self.head = nn.Linear(216, len(SCENES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.mix(x).flatten(1))


class TokenSequence(nn.Module):
    """A sequence of 1 + 2*2 vectors of 8 in a model that declares no token grid."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(3, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        patches = F.adaptive_avg_pool2d(x, 2).flatten(2).transpose(1, 2)  # (N, 4, 3)
        return self.proj(torch.cat([patches.mean(1, keepdim=True), patches], 1))  # (N, 5, 8)


class Tokens(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.seq = TokenSequence()
        self.head = nn.Linear(8, len(SCENES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.seq(x)[:, 0])


def _opaque(module: nn.Module, layouts: dict[str, Layout] | None = None) -> LoadedModel:
    torch.manual_seed(0)
    for p in module.parameters():
        nn.init.normal_(p)
    return LoadedModel(module=module.eval(), name="custom", arch="pickle", preprocess=IMAGENET, class_names=None,
                       input_size=(224, 224), source=None, source_key="custom", default_layer=None,
                       layouts=layouts or {})


@pytest.mark.parametrize("module,layer,given,units", [
    (Sixes, "mix", "nhwc", (6, 6, 6)),
    (Tokens, "seq", "tokens:1:2x2", (8, 2, 2)),
])
def test_an_undecided_layout_is_refused_until_given(module, layer, given, units, data):
    images = [data[0].load_image(i) for i in range(2)]
    model = _opaque(module())
    info = {i.name: i for i in list_layers(model)}[layer]
    assert isinstance(info.layout, Undecided) and info.units is None
    with pytest.raises(InputError, match="--layout"):
        layer_layout(model, layer)
    with pytest.raises(InputError, match="--layout"):
        extract_activations(model, layer, images, None)
    model = _opaque(module(), {layer: Layout.parse(given)})
    assert str(layer_layout(model, layer)) == given
    act = extract_activations(model, layer, images, None)
    assert act.shape == (len(images), *units)
    raw = _raw(model, layer, model.preprocess(images))
    torch.testing.assert_close(torch.from_numpy(np.asarray(act)), _by_hand(raw, given))
    if given.startswith("tokens"):
        cls = extract_activations(model, layer, images, None, pool="cls")
        np.testing.assert_allclose(cls[:, :, 0, 0], raw[:, 0].numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("module,layer,given,units", [
    (Sixes, "mix", "nhwc", 6),
    (Tokens, "seq", "tokens:1:2x2", 8),
])
def test_dissect_refuses_an_undecided_layout_and_runs_with_one(module, layer, given, units, data, tmp_path, capsys):
    path = tmp_path / "model.pt"
    torch.save(_opaque(module()).module, path)  # a whole-model pickle: its layers are the modules
    spec = f"pickle:{path}"
    assert main(["info", spec, "--trust-code"]) == 0
    line = next(row for row in capsys.readouterr().out.splitlines() if row.split()[:1] == [layer])
    assert "  ?  (undecided: " in line and "--layout" in line
    out = tmp_path / "out"
    base = ["dissect", "--model", spec, "--trust-code", "--layer", layer, "--dataset", str(data[0].root),
            "--out", str(out), *DISSECT]
    assert main(base) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith("probescope dissect: error:") and "--layout" in err[-1], err
    assert not (out / "tally.csv").exists()
    assert main([*base, "--layout", given]) == 0
    assert len(_tally(out)) == 4
    doc = json.loads((out / "dissection.json").read_text(encoding="utf-8"))
    assert doc["model"]["layout"] == given and doc["n_units"] == units
