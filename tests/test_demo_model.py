"""The demo world's scene classifier: shapes, training script, shipped weights."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from probescope.core.demo import train as demo_train
from probescope.core.demo.model import DEMO_LAYER, DEMO_WEIGHTS, DemoNet
from probescope.core.demo.world import SCENES
from probescope.core.models.layers import list_layers
from probescope.core.models.loading import load_model
from probescope.core.tasks import Cancelled


def test_shapes():
    net = DemoNet(len(SCENES)).eval()
    with torch.no_grad():
        assert net.layer4(net.layer3(net.layer2(net.layer1(torch.zeros(2, 3, 128, 128))))).shape == (2, 128, 8, 8)
        assert net(torch.zeros(2, 3, 128, 128)).shape == (2, len(SCENES))


def _toy(n: int, seed: int):
    """Two classes a CNN separates at once: reddish versus bluish noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, 2, n)
    images = rng.integers(0, 128, (n, 32, 32, 3), dtype=np.uint8)  # DemoNet runs at any size
    images[labels == 0, :, :, 0] += 120
    images[labels == 1, :, :, 2] += 120
    return images, labels.astype(np.int64)


def test_training_is_seeded_and_cancellable():
    images, labels = _toy(32, 0)
    config = demo_train.TrainConfig(epochs=3, batch_size=8, lr=1e-2)
    a = demo_train.train(images, labels, 2, config)
    b = demo_train.train(images, labels, 2, config)
    for (name, x), y in zip(a.state_dict().items(), b.state_dict().values()):
        assert torch.equal(x, y), name
    assert demo_train.evaluate(a, *_toy(32, 1)) >= 0.9
    with pytest.raises(Cancelled):
        demo_train.train(images, labels, 2, config, cancel=lambda: True)


def test_training_script_end_to_end(tmp_path):
    out = tmp_path / "demo_model.pt"
    assert demo_train.main(["--out", str(out), "--n-train", "28", "--n-heldout", "14", "--epochs", "1",
                            "--threads", "1"]) == 0
    record = json.loads(out.with_suffix(".json").read_text())
    assert record["classes"] == list(SCENES) and 0.0 <= record["heldout_accuracy"] <= 1.0
    state = torch.load(out, weights_only=True)  # a plain state dict
    assert "layer4.conv.weight" in state
    model = load_model(f"demo:{out}")
    assert model.metadata["heldout"]["seed"] == demo_train.HELDOUT_SEED


@pytest.mark.skipif(not DEMO_WEIGHTS.exists(), reason="assets/demo_model.pt not trained yet")
def test_shipped_demo_model():
    assert DEMO_WEIGHTS.stat().st_size < 10 * 2**20
    model = load_model("demo")
    assert model.class_names == list(SCENES) and model.default_layer == DEMO_LAYER
    layers = {info.name: info.out_shape for info in list_layers(model)}
    assert 64 <= layers[DEMO_LAYER][0] <= 256
    assert model.metadata["heldout_accuracy"] >= 0.9
    images, labels = demo_train.render_split(demo_train.HELDOUT_SEED, 42)
    assert demo_train.evaluate(model.module, images, labels) >= 0.85
