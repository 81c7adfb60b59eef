"""Feature networks for the distances (core/scoring/features.py): DINOv2 in Meta's layout computes what Meta's hub
model computes, FD_DINOv2, KID and precision/recall equal torch-fidelity 0.4's with its DINOv2 extractor on the same
weights and images, CLIP embeddings are unit length, a model's layer serves as features, and bad specs get one
line."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from oracles.dinov2_reference import MetaDinoV2, random_state
from probescope.core.errors import InputError
from probescope.core.scoring.feature_spec import CLASSIFIER, check_spec
from probescope.core.scoring.features import load_feature_network
from probescope.main import main

N = 24  # images per set: enough for every score's protocol, small enough for the suite (the benchmark runs 400)


@pytest.fixture(scope="module")
def dinov2_weights(tmp_path_factory):
    path = tmp_path_factory.mktemp("dinov2") / "dinov2_vits14_pretrain.pth"
    torch.save(random_state(0), path)
    return path


@pytest.fixture(scope="module")
def image_sets(tmp_path_factory):
    """Demo-world renders (real) and demo-sampler images (generated), 128x128, as uint8 arrays and .npz files."""
    from probescope.core.demo import world
    from probescope.core.demo.sampler import DemoSampler

    folder = tmp_path_factory.mktemp("images")
    real = np.stack([s.image for s in world.render_batch(21, N)])
    generated = np.concatenate([task() for task in DemoSampler(N, diversity=5, fidelity=0.7, seed=3).batch_tasks(N)])
    np.savez(folder / "real.npz", images=real)
    np.savez(folder / "generated.npz", images=generated)
    np.savez(folder / "few.npz", images=generated[:6])
    return {"real": real, "generated": generated, "real_path": folder / "real.npz",
            "generated_path": folder / "generated.npz", "few_path": folder / "few.npz"}


def test_dinov2_features_are_metas_class_token(dinov2_weights, image_sets):
    """Our DINOv2 (timm's blocks, Meta's position-embedding interpolation) equals a plain Meta-style forward."""
    network = load_feature_network(f"dinov2:vits14:{dinov2_weights}")
    prepared = network.prepare(list(image_sets["real"][:6]))
    assert tuple(prepared.shape) == (6, 3, 224, 224)
    with torch.no_grad():
        want = MetaDinoV2(random_state(0))(prepared).numpy()
    got = network.embed(prepared)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)
    assert network.label == "FD_DINOv2" and "TF1 bilinear" in network.note and network.precision == "fp32"
    assert "|meta-positions" in network.key  # (caches made while timm's rule resampled the positions are not read)


class _Images(torch.utils.data.Dataset):
    """uint8 (3, H, W) tensors, as torch-fidelity reads its inputs."""

    def __init__(self, images: np.ndarray):
        self.images = images

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(self.images[i])).permute(2, 0, 1)


def test_fd_dinov2_kid_and_prc_equal_torch_fidelity(dinov2_weights, image_sets, capsys, monkeypatch):
    """torch-fidelity's DINOv2 extractor with the same weights given to its hub call (here the Meta-style oracle:
    no internet), against `probescope score --features dinov2:...` on the same images: equal within 1e-4."""
    import torch_fidelity
    import tqdm

    monkeypatch.setattr(tqdm.tqdm, "monitor_interval", 0)  # its (disabled) progress bars would leave a thread
    monkeypatch.setattr(torch.hub, "load", lambda *a, **k: MetaDinoV2(random_state(0)))
    theirs = torch_fidelity.calculate_metrics(
        input1=_Images(image_sets["generated"]), input2=_Images(image_sets["real"]), fid=True, kid=True, prc=True,
        feature_extractor="dinov2-vit-s-14", kid_subsets=20, kid_subset_size=20, cuda=False, verbose=False,
        cache=False, batch_size=32, save_cpu_ram=True)
    assert main(["score", "--images", str(image_sets["generated_path"]), "--fid", str(image_sets["real_path"]),
                 "--features", f"dinov2:vits14:{dinov2_weights}", "--kid", "--kid-subsets", "20",
                 "--kid-subset-size", "20", "--prc", "--splits", "1", "--json"]) == 0
    ours = json.loads(capsys.readouterr().out)
    assert ours["fd_name"] == "FD_DINOv2" and ours["feature_precision"] == "fp32"
    assert ours["fid"] == pytest.approx(theirs["frechet_inception_distance"], rel=1e-4)
    assert ours["kid_mean"] == pytest.approx(theirs["kernel_inception_distance_mean"], rel=1e-4)
    assert ours["precision"] == pytest.approx(theirs["precision"], rel=1e-4)
    assert ours["recall"] == pytest.approx(theirs["recall"], rel=1e-4)


def test_text_names_the_distance_and_the_features(dinov2_weights, image_sets, capsys):
    assert main(["score", "--images", str(image_sets["few_path"]), "--fid", str(image_sets["few_path"]),
                 "--features", f"dinov2:vits14:{dinov2_weights}", "--feature-resize", "dgm-eval",
                 "--splits", "1"]) == 0
    out = capsys.readouterr().out
    assert "FD_DINOv2: " in out and "PIL bicubic stretch to 224x224 (dgm-eval's)" in out and "\nFID:" not in out


def test_layer_features_are_the_layer_mean(image_sets, demo_model):
    """model:LAYER:SPEC: the layer's maps averaged over positions, through the model's own preprocessing."""
    network = load_feature_network("model:layer4:demo")
    images = list(image_sets["real"][:5])
    seen = []
    handle = dict(demo_model.module.named_modules())["layer4"].register_forward_hook(lambda m, i, o: seen.append(o))
    with torch.no_grad():
        demo_model.module(demo_model.preprocess(images))
    handle.remove()
    np.testing.assert_allclose(network.embed(network.prepare(images)), seen[0].mean(dim=(2, 3)).numpy(), rtol=1e-5,
                               atol=1e-6)
    assert network.label == "FD" and "layer layer4" in network.note


def test_precision_needs_a_gpu_and_names_itself(dinov2_weights):
    network = load_feature_network(f"dinov2:vits14:{dinov2_weights}", precision="auto")
    assert network.precision == "fp32"  # on the CPU, auto is float32
    with pytest.raises(InputError, match="bf16 features need a GPU"):
        load_feature_network(f"dinov2:vits14:{dinov2_weights}", precision="bf16")


@pytest.mark.parametrize("spec,message", [
    ("vgg:x.pth", "unknown feature network 'vgg:x.pth'"),
    ("model:layer4", "expected model:LAYER:SPEC"),
    ("model:nolayer:demo", "has no layer 'nolayer'"),
    ("dinov2:vits14:/nonexistent/w.pth", "dl.fbaipublicfiles.com/dinov2"),
    ("inception-tf:", "names no weights file"),
])
def test_bad_specs_are_one_line(spec, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace(".", r"\.")):
        load_feature_network(spec)
    assert check_spec(CLASSIFIER) is None


def test_cli_refusals(capsys):
    assert main(["score", "--images", "demo", "--fid", "demo", "--cmmd"]) == 2
    assert "--cmmd is measured on CLIP image embeddings" in capsys.readouterr().err
    assert main(["score", "--images", "demo", "--features", "vgg:x"]) == 2
    assert "unknown feature network" in capsys.readouterr().err


def test_cmmd_on_clip_embeddings(tmp_path, image_sets, capsys):
    """--cmmd with an OpenCLIP tower: the embeddings are unit length and CMMD is the unbiased MMD^2 of them."""
    import open_clip

    from probescope.core.scoring.cmmd import cmmd

    path = tmp_path / "open_clip_model.pt"
    torch.save(open_clip.create_model("ViT-B-32", pretrained=None).state_dict(), path)
    network = load_feature_network(f"openclip:ViT-B-32:{path}")
    real = network.embed(network.prepare(list(image_sets["real"][:12])))
    fake = network.embed(network.prepare(list(image_sets["generated"][:6])))
    np.testing.assert_allclose(np.linalg.norm(real, axis=1), 1.0, rtol=1e-5)
    np.savez(tmp_path / "real.npz", images=image_sets["real"][:12])
    assert main(["score", "--images", str(image_sets["few_path"]), "--fid", str(tmp_path / "real.npz"),
                 "--features", f"openclip:ViT-B-32:{path}", "--cmmd", "--splits", "1", "--json"]) == 0
    ours = json.loads(capsys.readouterr().out)
    assert ours["fd_name"] == "FD_CLIP" and ours["cmmd_estimator"] == "unbiased"
    assert ours["cmmd"] == pytest.approx(cmmd(fake, real).value, rel=1e-5)
