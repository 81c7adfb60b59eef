"""Model specs, checkpoint dialects, bad weights files, preprocessing, layer listing."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from probescope.core.data.preprocess import CLASSIC, IMAGENET, parse_preprocess
from probescope.core.errors import InputError
from probescope.core.models import checkpoint as ckpt
from probescope.core.models.class_names import read_class_names
from probescope.core.models.layers import list_layers
from probescope.core.models.loading import TORCHSCRIPT_OUTPUT, load_model
from probescope.core.trust import Trust, UntrustedFile, sha256_of


def resnet18(**kwargs) -> nn.Module:
    """torchvision's ResNet-18 (imported here: its import costs every xdist worker seconds at collection)."""
    from torchvision.models import resnet18 as make

    return make(**kwargs)


def _same_outputs(a: nn.Module, b: nn.Module, size: int = 64) -> bool:
    x = torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        return torch.allclose(a.eval()(x), b.eval()(x), atol=1e-5)


@pytest.fixture(scope="module")
def resnet18_365():
    torch.manual_seed(1)
    return resnet18(num_classes=365).eval()


@pytest.fixture(scope="module")
def places_ckpt(tmp_path_factory, resnet18_365):
    """A Places365-style checkpoint as released: {epoch, arch, state_dict, best_prec1}, `module.` keys, no
    num_batches_tracked, the legacy (pre-zip) torch format, best_prec1 a numpy scalar pickled by numpy 1."""
    sd = {f"module.{k}": v for k, v in resnet18_365.state_dict().items() if not k.endswith("num_batches_tracked")}
    path = tmp_path_factory.mktemp("places") / "resnet18_places365.pth.tar"
    obj = {"epoch": 90, "arch": "resnet18", "state_dict": sd, "best_prec1": np.float64(54.7)}
    torch.save(obj, path, _use_new_zipfile_serialization=False)
    data = path.read_bytes()
    assert data.count(b"numpy._core.multiarray\nscalar") == 1
    path.write_bytes(data.replace(b"numpy._core.multiarray\nscalar", b"numpy.core.multiarray\nscalar"))
    return path


# ---- preprocessing ----------------------------------------------------------------------------------------------

def test_classic_recipe_by_hand():
    # BGR mean [109.5388, 118.6897, 124.6901] -> RGB mean (124.6901, 118.6897, 109.5388); scale 255 * 0.224 = 57.12
    img = torch.tensor([182, 119, 0], dtype=torch.uint8).view(1, 1, 1, 3).expand(1, 2, 2, 3).numpy()
    x = CLASSIC(img)
    want = torch.tensor([(182 - 124.6901) / 57.12, (119 - 118.6897) / 57.12, (0 - 109.5388) / 57.12])
    assert x.shape == (1, 3, 2, 2)
    assert torch.allclose(x[0, :, 1, 1], want, atol=1e-5)


def test_imagenet_mean_maps_to_zero_and_white_to_known_value():
    img = torch.zeros(1, 1, 1, 3, dtype=torch.uint8).numpy() + 255
    x = IMAGENET(img)[0, :, 0, 0]
    want = (torch.ones(3) - torch.tensor([0.485, 0.456, 0.406])) / torch.tensor([0.229, 0.224, 0.225])
    assert torch.allclose(x, want, atol=1e-5)


def test_resize_policies():
    rng = np.random.default_rng(0)
    wide = rng.integers(0, 256, (40, 100, 3), dtype=np.uint8)
    crop = parse_preprocess("imagenet:crop=20")
    stretch = parse_preprocess("imagenet:stretch=20")
    assert crop([wide]).shape == (1, 3, 20, 20)
    # the centre crop is the middle 40x40 square, then resized like stretch would resize that square
    assert torch.allclose(crop([wide]), stretch([wide[:, 30:70]]), atol=1e-5)
    assert parse_preprocess("classic") is CLASSIC
    with pytest.raises(InputError, match="different sizes"):
        IMAGENET([wide, wide[:, :50].copy()])
    with pytest.raises(InputError, match="resize policy"):
        parse_preprocess("imagenet:zoom=3")
    with pytest.raises(InputError, match="uint8"):
        IMAGENET([wide.astype(np.float32)])
    assert crop.key() != stretch.key() != IMAGENET.key()


# ---- checkpoint dialects ----------------------------------------------------------------------------------------

def test_places365_checkpoint(places_ckpt, resnet18_365):
    model = load_model(f"places365:resnet18:{places_ckpt}")
    assert _same_outputs(model.module, resnet18_365)
    assert model.preprocess is CLASSIC and model.default_layer == "layer4"
    assert model.metadata["epoch"] == 90 and model.metadata["num_classes"] == 365
    shapes = {info.name: info.out_shape for info in list_layers(model)}
    assert shapes["layer4"] == (512, 7, 7) and shapes["fc"] == (365,)
    auto = load_model(str(places_ckpt))  # a bare path: the checkpoint names its arch
    assert auto.arch == "resnet18" and _same_outputs(auto.module, resnet18_365)


def test_plain_state_dict_infers_class_count(tmp_path):
    torch.manual_seed(2)
    net = resnet18(num_classes=10).eval()
    path = tmp_path / "r18.pth"
    torch.save(net.state_dict(), path)
    model = load_model(f"resnet18:{path}")
    assert model.metadata["num_classes"] == 10 and model.preprocess is IMAGENET
    assert _same_outputs(model.module, net)
    names = tmp_path / "classes.txt"
    names.write_text("\n".join(f"/{c[0]}/{c} {i}" for i, c in enumerate("abcdefghij")) + "\n")
    assert load_model(f"resnet18:{path}", class_names=names).class_names == list("abcdefghij")
    names.write_text("cat\ndog\n")
    with pytest.raises(InputError, match="2 class names for a model with 10 outputs"):
        load_model(f"resnet18:{path}", class_names=names)
    with pytest.raises(InputError, match="cannot tell the architecture") as err:
        load_model(str(path))
    assert str(path) in str(err.value)


def test_alexnet_and_old_densenet_key_names():
    """features.module.N (AlexNet DataParallel) and norm.1 (old DenseNet) map onto today's torchvision names."""
    for arch in ("alexnet", "densenet121"):
        keys = list(ckpt.build_arch(arch, 365, meta=True).state_dict())
        if arch == "alexnet":
            old = [k.replace("features.", "features.module.") for k in keys]
        else:
            old = [f"module.{k}" for k in keys]
            for new_name in ("norm1", "norm2", "conv1", "conv2", "relu1"):
                old = [k.replace(f".{new_name}.", f".{new_name[:-1]}.{new_name[-1]}.") for k in old]
        assert old != keys
        fake = {k: torch.zeros(1) for k in old}
        assert list(ckpt.normalize_keys(fake)) == keys


def test_torchscript(tmp_path):
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten()).eval()
    path = tmp_path / "scripted.pt"
    torch.jit.save(torch.jit.script(net), str(path))
    for spec in (f"torchscript:{path}", str(path)):
        with pytest.raises(UntrustedFile, match="TorchScript archive runs code"):
            load_model(spec)
        model = load_model(spec, trust=Trust.of_files([path]))
        assert model.arch == "torchscript" and not model.hookable
        assert [(i.name, i.out_shape) for i in list_layers(model)] == [(TORCHSCRIPT_OUTPUT, (4,))]
        assert _same_outputs(model.module, net, size=16)


def test_pickle_needs_trust(tmp_path):
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU()).eval()
    path = tmp_path / "whole.pth.tar"
    torch.save(net, path)
    with pytest.raises(UntrustedFile, match="whole-model pickle runs code") as err:
        load_model(f"pickle:{path}")
    assert str(path) in str(err.value) and err.value.sha256 == sha256_of(path)
    with pytest.raises(UntrustedFile):
        load_model(str(path))  # auto-detection sees a pickle of Python objects: the same trust decision
    with pytest.raises(InputError, match="open it as 'pickle:"):
        load_model(f"resnet18:{path}")
    model = load_model(f"pickle:{path}", trust=Trust.of_files([path]))
    assert _same_outputs(model.module, net, size=8)
    assert [i.name for i in list_layers(model, (8, 8))] == ["0", "1"]


# ---- bad input ----------------------------------------------------------------------------------------------------

def test_checkpoint_for_another_architecture(places_ckpt, resnet18_365, tmp_path):
    with pytest.raises(InputError, match="checkpoint is for resnet18, not resnet34") as err:
        load_model(f"places365:resnet34:{places_ckpt}")
    assert str(places_ckpt) in str(err.value)
    plain = tmp_path / "r18.pth"  # no arch recorded: the keys tell
    torch.save(resnet18_365.state_dict(), plain)
    with pytest.raises(InputError, match="keys do not match resnet34: .* missing") as err:
        load_model(f"resnet34:{plain}")
    assert str(plain) in str(err.value)


def test_class_count_mismatch(tmp_path):
    path = tmp_path / "r18_1000.pth"
    torch.save(resnet18(num_classes=1000).state_dict(), path)
    with pytest.raises(InputError, match=r"class count does not match for resnet18: fc.weight is \(1000, 512\)"):
        load_model(f"places365:resnet18:{path}")


def test_not_a_torch_file(tmp_path):
    path = tmp_path / "notes.pth"
    path.write_text("these are not weights\n")
    with pytest.raises(InputError, match="not a PyTorch weights file") as err:
        load_model(f"resnet18:{path}")
    assert str(path) in str(err.value)
    with pytest.raises(InputError, match="not a TorchScript archive"):
        load_model(f"torchscript:{path}")
    path.write_bytes(b"\x80\x02 not a pickle either")
    with pytest.raises(InputError, match="not a PyTorch weights file"):
        load_model(f"resnet18:{path}")
    torch.save({"weights": [1, 2, 3]}, path)
    with pytest.raises(InputError, match="not a state dict"):
        load_model(f"resnet18:{path}")


def test_bad_specs(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        load_model(f"resnet18:{tmp_path / 'missing.pth'}")
    with pytest.raises(InputError, match="unknown architecture or kind 'resnet99'"):
        load_model("resnet99:/x.pth")
    with pytest.raises(InputError, match="places365:<arch>:<checkpoint file>"):
        load_model("places365:/x.pth")


def test_class_names_file_forms(tmp_path):
    path = tmp_path / "names.txt"
    path.write_text("/a/abbey 0\n/a/airport_terminal 1\n\n")
    assert read_class_names(path) == ["abbey", "airport_terminal"]
    path.write_text("living room\nstreet\n")
    assert read_class_names(path) == ["living room", "street"]
    huge = tmp_path / "huge.txt"
    with huge.open("wb") as fh:  # sparse: 40 GB declared, nothing written
        fh.truncate(40 << 30)
    with pytest.raises(InputError, match=r"class names file is 42,949,672,960 bytes: not a list of names \(at most "
                                         r"64 MiB is read\)") as caught:
        read_class_names(huge)
    assert "huge.txt" in str(caught.value)
