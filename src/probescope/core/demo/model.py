"""The demo world's scene classifier: a small CNN whose last conv block ('layer4') is the one to dissect.

Four conv blocks (widths 32-64-128-128, BatchNorm, ReLU), global average pooling, a linear classifier. A 128x128
input gives a 64x64 map after the strided first conv, then 32, 16 and 8 after the max-pools: 'layer4' holds
128 units on an 8x8 grid, close to the 7x7 of ResNet-18's layer4 at 224, and its receptive field (73 px) covers
most of an object so that units for objects, colours and their compositions can appear.
"""

from __future__ import annotations

import json
from collections import OrderedDict
from pathlib import Path

import torch
from torch import nn

from probescope.assets import ASSETS_DIR
from probescope.core.data.preprocess import IMAGENET, Preprocess
from probescope.core.demo.world import SCENES
from probescope.core.errors import InputError

DEMO_ARCH = "demonet"
DEMO_LAYER = "layer4"
DEMO_INPUT_SIZE = 128
DEMO_WIDTHS = (32, 64, 128, 128)
DEMO_PREPROCESS: Preprocess = IMAGENET  # ImageNet mean/std at native size (128x128), no crop
DEMO_WEIGHTS: Path = ASSETS_DIR / "demo_model.pt"


def _block(c_in: int, c_out: int, stride: int, pool: bool) -> nn.Sequential:
    layers: dict[str, nn.Module] = {
        "conv": nn.Conv2d(c_in, c_out, 3, stride=stride, padding=1, bias=False),
        "bn": nn.BatchNorm2d(c_out),
        "relu": nn.ReLU(inplace=True),
    }
    if pool:
        layers["pool"] = nn.MaxPool2d(2)
    return nn.Sequential(OrderedDict(layers))


class DemoNet(nn.Module):
    """Scene classifier for the demo world (see the module docstring for the shapes)."""

    def __init__(self, num_classes: int, widths: tuple[int, int, int, int] = DEMO_WIDTHS):
        super().__init__()
        w1, w2, w3, w4 = widths
        self.layer1 = _block(3, w1, stride=2, pool=True)
        self.layer2 = _block(w1, w2, stride=1, pool=True)
        self.layer3 = _block(w2, w3, stride=1, pool=True)
        self.layer4 = _block(w3, w4, stride=1, pool=False)
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(w4, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def demo_net_for(state_dict: dict[str, torch.Tensor], path: Path) -> DemoNet:
    """An untrained DemoNet sized after a saved state dict (widths and class count from the weight shapes)."""
    try:
        widths = tuple(int(state_dict[f"layer{k}.conv.weight"].shape[0]) for k in range(1, 5))
        num_classes = int(state_dict["fc.weight"].shape[0])
    except (KeyError, IndexError) as exc:
        raise InputError(f"keys do not match {DEMO_ARCH}: no {exc.args[0]}", path) from None
    return DemoNet(num_classes, widths)  # type: ignore[arg-type]


def demo_metrics(weights: Path) -> dict[str, object]:
    """The training record saved beside the weights (`<name>.json`), or {} if there is none."""
    sidecar = weights.with_suffix(".json")
    if not sidecar.is_file():
        return {}
    try:
        data = json.loads(sidecar.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"demo model record is not valid JSON ({exc})", sidecar) from None
    return data if isinstance(data, dict) else {}


def demo_class_names(num_classes: int, weights: Path) -> list[str]:
    """The demo world's scene names, checked against the classifier size and the training record."""
    recorded = demo_metrics(weights).get("classes")
    if recorded is not None and list(recorded) != list(SCENES):
        raise InputError("demo model was trained on other scenes than the demo world has now: retrain it", weights)
    if num_classes != len(SCENES):
        raise InputError(f"demo model has {num_classes} outputs, the demo world {len(SCENES)} scenes", weights)
    return list(SCENES)
