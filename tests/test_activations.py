"""Activation extraction: equals a direct forward pass, is cached and reused, invalidated, cancellable, safe."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from probescope.core.data.activation_cache import cache_path
from probescope.core.data.activations import extract_activations, extract_layers
from probescope.core.data.preprocess import CLASSIC
from probescope.core.demo.model import DemoNet
from probescope.core.demo.world import SCENES
from probescope.core.errors import InputError
from probescope.core.models.layers import list_layers
from probescope.core.models.loading import load_model
from probescope.core.tasks import Cancelled
from probescope.core.trust import Trust


def _save_demo(path, seed: int):
    torch.manual_seed(seed)
    net = DemoNet(len(SCENES))
    with torch.no_grad():  # non-trivial BatchNorm statistics
        for m in net.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 2.0)
    torch.save(net.state_dict(), path)
    return path


@pytest.fixture
def demo(tmp_path):
    return load_model(f"demo:{_save_demo(tmp_path / 'demo.pt', 0)}")


@pytest.fixture(scope="module")
def images():
    return np.random.default_rng(0).integers(0, 256, (8, 64, 64, 3), dtype=np.uint8)


def _count_forwards(model):
    calls = []
    model.module.register_forward_pre_hook(lambda *_: calls.append(1))
    return calls


def _brute(model, images, upto):
    """Run each image alone through the blocks by hand."""
    out = []
    with torch.no_grad():
        for im in images:
            x = model.preprocess(im[None])
            for name in ("layer1", "layer2", "layer3", "layer4"):
                x = getattr(model.module, name)(x)
                if name == upto:
                    break
            out.append(x[0].numpy())
    return np.stack(out)


def test_matches_direct_forward(demo, images, tmp_path):
    for layer in ("layer4", "layer2"):
        acts = extract_activations(demo, layer, images, tmp_path / "cache", batch_size=3)
        assert acts.dtype == np.float32
        np.testing.assert_allclose(acts, _brute(demo, images, layer), rtol=1e-4, atol=1e-4)
    assert acts.shape == (8, 64, 8, 8)
    logits = extract_activations(demo, "fc", images, None, batch_size=3)
    with torch.no_grad():
        want = demo.module(demo.preprocess(images)).numpy()
    np.testing.assert_allclose(logits[:, :, 0, 0], want, rtol=1e-4, atol=1e-4)


def test_several_layers_in_one_pass(tmp_path, images):
    """extract_layers runs the network once for every layer not cached, stops after the deepest one, and leaves the
    same cache files as one extraction per layer."""
    weights = _save_demo(tmp_path / "demo.pt", 0)
    model = load_model(f"demo:{weights}")
    list_layers(model)  # the layers' layouts, decided once per model by a pass of two blank images
    calls = _count_forwards(model)
    ran_fc = []
    model.module.fc.register_forward_hook(lambda *_: ran_fc.append(1))
    together = extract_layers(model, ["layer4", "layer2", "layer4"], images, tmp_path / "a", batch_size=3)
    assert list(together) == ["layer4", "layer2"] and len(calls) == 3  # three batches, one pass each
    assert len(ran_fc) == 1  # only the first batch runs to the end (to learn each layer runs once)
    for layer in ("layer4", "layer2"):
        alone = extract_activations(load_model(f"demo:{weights}"), layer, images, tmp_path / "b", batch_size=3)
        assert np.array_equal(together[layer], alone)
        assert (cache_path(model, layer, images, tmp_path / "a").read_bytes()
                == cache_path(model, layer, images, tmp_path / "b").read_bytes())
    with_head = extract_layers(model, ["layer2", "fc"], images, tmp_path / "a", batch_size=3)
    assert len(calls) == 6 and np.array_equal(with_head["layer2"], together["layer2"])  # only fc was missing
    in_memory = extract_layers(model, ["fc", "layer3"], images, None, batch_size=4)
    np.testing.assert_allclose(in_memory["layer3"], _brute(model, images, "layer3"), rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(in_memory["fc"], with_head["fc"], rtol=1e-4, atol=1e-5)  # other batch size


def test_pooled_extraction_keeps_only_the_averages(tmp_path, images):
    """pool='avg' stores each map's mean over its positions, equal to averaging the full maps, in a cache entry of
    its own (the unpooled one is neither read nor written)."""
    model = load_model(f"demo:{_save_demo(tmp_path / 'demo.pt', 0)}")
    full = extract_activations(model, "layer3", images, None, batch_size=3)
    pooled = extract_activations(model, "layer3", images, tmp_path / "cache", batch_size=3, pool="avg")
    assert pooled.shape == (8, 128, 1, 1)
    np.testing.assert_array_equal(pooled[:, :, 0, 0], full.mean(axis=(2, 3)))
    assert [p.name for p in (tmp_path / "cache" / "activations").glob("*.npy")] == [
        cache_path(model, "layer3", images, tmp_path / "cache", pool="avg").name]
    assert cache_path(model, "layer3", images, tmp_path / "cache") != cache_path(model, "layer3", images,
                                                                                tmp_path / "cache", pool="avg")
    with pytest.raises(InputError, match="pooling"):
        extract_activations(model, "layer3", images, None, pool="max")


def test_cache_reused_and_invalidated(tmp_path, images):
    weights = _save_demo(tmp_path / "demo.pt", 0)
    cache = tmp_path / "cache"
    model = load_model(f"demo:{weights}")
    list_layers(model)  # the layouts, decided once per model
    calls = _count_forwards(model)
    progress = []
    first = np.array(extract_activations(model, "layer4", images, cache, batch_size=3,
                                         progress=lambda f, m: progress.append(f)))
    assert len(calls) == 3 and progress[-1] == 1.0 and progress == sorted(progress)
    again = extract_activations(model, "layer4", images, cache, batch_size=3)
    assert len(calls) == 3  # read from the cache: no forward pass
    assert isinstance(again, np.memmap) and np.array_equal(again, first)
    assert list((cache / "activations").glob("*.npy")) == [cache_path(model, "layer4", images, cache)]

    # preprocessing is part of the key
    classic = model.with_preprocess(CLASSIC)
    extract_activations(classic, "layer4", images, cache, batch_size=3)
    assert len(calls) == 6

    # new weights in the same file: a new key, new values
    _save_demo(weights, 1)
    changed = load_model(f"demo:{weights}")
    list_layers(changed)
    calls2 = _count_forwards(changed)
    other = extract_activations(changed, "layer4", images, cache, batch_size=3)
    assert len(calls2) == 3 and not np.allclose(other, first)

    # a damaged cache (sidecar says another shape) is rebuilt, not trusted
    sidecar = next(p for p in (cache / "activations").glob("*.json"))
    sidecar.write_text('{"fields": {}, "shape": [1]}')
    before = len(calls) + len(calls2)
    for m in (model, classic, changed):
        extract_activations(m, "layer4", images, cache, batch_size=3)
    assert len(calls) + len(calls2) == before + 3  # exactly one of the three was rebuilt (3 batches)


def test_cancel_leaves_no_cache(demo, images, tmp_path):
    cache = tmp_path / "cache"
    seen = []

    def cancel():
        return len(seen) >= 1

    with pytest.raises(Cancelled):
        extract_activations(demo, "layer4", images, cache, batch_size=3, progress=lambda f, m: seen.append(f),
                            cancel=cancel)
    assert seen and seen[0] < 1.0
    assert list((cache / "activations").iterdir()) == []  # no .npy, no sidecar, no temp file
    done = extract_activations(demo, "layer4", images, cache, batch_size=3)
    assert done.shape == (8, 128, 4, 4)


def test_unwritable_cache_folder(demo, images, tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("x")
    with pytest.raises(InputError, match="cache folder is not writable") as err:
        extract_activations(demo, "layer4", images, blocker / "cache")
    assert str(blocker) in str(err.value)


def test_bad_layer_and_image(demo, images):
    with pytest.raises(InputError, match="has no layer 'layer9'"):
        extract_activations(demo, "layer9", images, None)
    with pytest.raises(InputError, match="image 0: expected uint8"):
        extract_activations(demo, "layer4", [images[0].astype(np.float32)], None)
    with pytest.raises(InputError, match="different sizes"):
        extract_activations(demo, "layer4", [images[0], images[1][:32]], None)


def test_module_called_twice_gives_last_call():
    """A shared ReLU runs twice per forward: extraction keeps its last output and still runs to the end."""

    class Twice(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 2, 1)
            self.relu = nn.ReLU()

        def forward(self, x):
            return self.relu(self.conv(self.relu(x - 100)) + 1)

    torch.manual_seed(0)
    net = Twice().eval()
    from probescope.core.models.loading import LoadedModel

    model = LoadedModel(net, "twice", "test", CLASSIC, None, (4, 4), None, "test", None)
    imgs = np.random.default_rng(1).integers(0, 256, (5, 4, 4, 3), dtype=np.uint8)
    acts = extract_activations(model, "relu", imgs, None, batch_size=2)
    with torch.no_grad():
        np.testing.assert_allclose(acts, net(CLASSIC(imgs)).numpy(), rtol=1e-5, atol=1e-6)


def test_dataset_input_and_undecodable_image(demo, tmp_path):
    from probescope.core.data.broden import BrodenDataset
    from probescope.core.demo.dataset import write_demo_dataset

    root = write_demo_dataset(tmp_path / "ds", n_images=5)
    ds = BrodenDataset.open(root)
    cache = tmp_path / "cache"
    calls = _count_forwards(demo)
    acts = extract_activations(demo, "layer4", ds, cache, batch_size=3)
    want = extract_activations(demo, "layer4", [ds.load_image(i) for i in range(5)], None)
    np.testing.assert_allclose(acts, want, rtol=1e-5, atol=1e-6)
    n = len(calls)
    extract_activations(demo, "layer4", BrodenDataset.open(root), cache, batch_size=3)
    assert len(calls) == n  # same dataset opened again: cached

    ds.image_path(4).write_bytes(b"not an image")
    index = root / "index.csv"
    index.write_text(index.read_text())  # touch the index: the dataset identity changes
    with pytest.raises(InputError, match="image does not decode: not a PNG, JPEG, BMP, WebP or TIFF file") as err:
        extract_activations(demo, "layer4", BrodenDataset.open(root), cache, batch_size=3)
    assert str(ds.image_path(4)) in str(err.value)
    assert len(list((cache / "activations").glob("*.npy"))) == 1  # only the earlier, complete cache
    assert not list((cache / "activations").glob(".*.tmp"))


def test_torchscript_output_only(tmp_path, images):
    net = nn.Sequential(nn.Conv2d(3, 4, 3, stride=4), nn.ReLU()).eval()
    path = tmp_path / "ts.pt"
    torch.jit.save(torch.jit.script(net), str(path))
    model = load_model(f"torchscript:{path}", trust=Trust(everything=True))
    acts = extract_activations(model, "output", images[:3], None)
    with torch.no_grad():
        np.testing.assert_allclose(acts, net(model.preprocess(images[:3])).numpy(), rtol=1e-5, atol=1e-5)
    with pytest.raises(InputError, match="only layer 'output'"):
        extract_activations(model, "0", images[:3], None)
