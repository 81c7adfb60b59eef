"""`probescope info`: model specs and dataset folders."""

from __future__ import annotations

import torch

from probescope.core.demo.model import DemoNet
from probescope.core.demo.world import SCENES
from probescope.main import main


def test_info_model(tmp_path, capsys):
    path = tmp_path / "demo.pt"
    torch.save(DemoNet(len(SCENES)).state_dict(), path)
    assert main(["info", f"demo:{path}", "--preprocess", "classic"]) == 0
    out = capsys.readouterr().out
    rows = {line[:16].strip(): line[17:] for line in out.splitlines() if not line.startswith(" ")}
    assert rows["architecture"].startswith("demonet") and rows["preprocess"].startswith("classic")
    assert rows["classes"].startswith(f"{len(SCENES)}: harbor-s") and rows["default layer"] == "layer4"
    layer4 = next(line for line in out.splitlines() if line.strip().startswith("layer4 "))
    assert layer4.split()[2:] == ["128x8x8", "nchw", "128", "units", "x", "8x8"]  # output, layout, units x grid


def test_info_dataset(tmp_path, capsys):
    from probescope.core.demo.dataset import write_demo_dataset

    root = write_demo_dataset(tmp_path / "ds", n_images=5)
    assert main(["info", str(root)]) == 0
    out = capsys.readouterr().out
    assert "\nimages           5\n" in out
    counts = dict(line.split() for line in out.split("concepts per category")[1].splitlines()[1:] if line.strip())
    assert int(counts["color"]) == 11 and int(counts["scene"]) == len(SCENES)
    assert main(["info", str(root / "index.csv")]) == 0


def test_info_bad_file(tmp_path, capsys):
    path = tmp_path / "junk.pth"
    path.write_bytes(b"\x00\x01 garbage")
    assert main(["info", f"resnet18:{path}"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and str(path) in err and "not a PyTorch weights file" in err


def test_the_open_model_dialogs_names_are_listed_by_a_child_once_per_install(tmp_path, monkeypatch):
    """The window never imports torch, timm or OpenCLIP: their architecture names come from a child interpreter
    (families.model_architectures there) and are read from the cache until a package's version changes."""
    import subprocess

    from probescope.core.models import architecture_names as names_module

    listed = names_module.architecture_names(tmp_path)
    assert "vit_b_16" in listed["torchvision"] and "vit_small_patch14_dinov2" in listed["timm"]
    assert "ViT-B-32" in listed["openclip"] and "vits14-reg" in listed["dinov2"]
    assert (tmp_path / "architecture_names.json").is_file()

    def no_child(*_args, **_kwargs):
        raise AssertionError("listed again although nothing was upgraded")

    monkeypatch.setattr(subprocess, "run", no_child)
    assert names_module.architecture_names(tmp_path) == listed
    upgraded = {**names_module._versions(), "timm": "99.0"}  # noqa: SLF001
    monkeypatch.setattr(names_module, "_versions", lambda: upgraded)
    monkeypatch.setattr(subprocess, "run", lambda *a, **k: subprocess.CompletedProcess(a, 0, '{"timm": ["x"]}\n', ""))
    assert names_module.architecture_names(tmp_path) == {"timm": ("x",)}
