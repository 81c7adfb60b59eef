"""Feature visualisation (core/featurevis): the parameterisation against NumPy's FFT, the transformations, and
visualisations of the shipped demo model's layer4 units explained by colour concepts."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from probescope.core.demo.world import COLOR_RGB
from probescope.core.errors import InputError
from probescope.core.featurevis import transforms
from probescope.core.featurevis.directions import concept_direction, upsampling_matrix
from probescope.core.featurevis.image import COLOR_MIX, FourierImage, spectrum_scale
from probescope.core.featurevis.render import cache_key, visualize, weights_hash
from probescope.core.featurevis.settings import Direction, VisSettings
from probescope.core.tasks import Cancelled

STEPS = 512  # lucid's


@pytest.fixture(scope="module", autouse=True)
def one_thread():
    """Each step is a few small ops: on a busy 2-core machine a second torch thread waits more than it works
    (10 ms a step with one thread, 50-200 ms with two under the load of a parallel test run)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_fourier_image_equals_numpy():
    """sigmoid(COLOR_MIX applied to irfft2(spectrum * scale, unitary) / 4), the scale 1 / max(f, 1/size)."""
    gen = torch.Generator().manual_seed(3)
    image = FourierImage(10, gen, decay_power=1.0)
    spectrum = image.spectrum.detach().numpy()
    complex_ = (spectrum[..., 0] + 1j * spectrum[..., 1]) * spectrum_scale(10, 1.0)
    raw = np.fft.irfft2(complex_, s=(10, 10), norm="ortho") / 4.0  # (1, 3, 10, 10)
    want = 1 / (1 + np.exp(-np.einsum("bchw,dc->bdhw", raw, COLOR_MIX)))
    np.testing.assert_allclose(image().detach().numpy(), want, rtol=1e-5, atol=1e-6)
    assert spectrum_scale(4, 1.0)[0, 0] == 4.0 and spectrum_scale(4, 1.0)[0, 2] == 2.0  # f = 0 -> 1/size; f = 1/2
    same = FourierImage(10, torch.Generator().manual_seed(3))
    assert torch.equal(same.spectrum, image.spectrum)


def test_transformations():
    gen = torch.Generator().manual_seed(0)
    x = torch.rand(1, 3, 128, 128, generator=torch.Generator().manual_seed(1))
    out = transforms.standard(x, gen)
    side = out.shape[-1]
    assert out.shape[-2] == side and any(side == int(np.ceil(s * 144)) - 4 for s in transforms.SCALES)
    again = transforms.standard(x, torch.Generator().manual_seed(0))
    assert torch.equal(out, again)  # the seed fixes every draw
    assert torch.equal(transforms.rotate(x, 0), x)
    quarter = transforms.rotate(x, 90)
    assert any(torch.allclose(quarter, torch.rot90(x, k, dims=(2, 3)), atol=1e-5) for k in (1, 3))
    crop = transforms.jitter(x, 8, gen)
    assert crop.shape[-2:] == (120, 120)


@pytest.fixture(scope="module")
def demo_layer(tmp_path_factory):
    """The demo world's 300-image dataset, the shipped model's layer4 over it and its NetDissect labels, with the
    best unit of each colour concept (by IoU)."""
    from probescope.core.data.activations import extract_activations
    from probescope.core.data.broden import BrodenDataset
    from probescope.core.demo.dataset import ensure_demo_dataset
    from probescope.core.dissection.engine import dissect
    from probescope.core.dissection.labels import LabelStore
    from probescope.core.dissection.settings import DissectionSettings
    from probescope.core.models.loading import load_model

    cache = tmp_path_factory.getbasetemp() / "probescope-cache"  # the session's cache (see isolated_cache)
    data = BrodenDataset.open(ensure_demo_dataset(cache, n_images=300))
    model = load_model("demo")
    activations = extract_activations(model, "layer4", data, cache)
    store = LabelStore.build(data)
    result = dissect(store, activations, DissectionSettings(max_length=1))
    best: dict[str, tuple[float, int]] = {}
    for u, r in result.units.items():
        label = r.netdissect.label
        if label in COLOR_RGB and r.netdissect.iou > best.get(label, (0.0, -1))[0]:
            best[label] = (r.netdissect.iou, u)
    return {"model": model, "store": store, "activations": activations, "colour_units": {c: u for c, (_, u) in
                                                                                       best.items()}}


def colour_share(image: np.ndarray, colour: str) -> float:
    """The share of pixels whose nearest demo-world paint colour is `colour`."""
    palette = np.array(list(COLOR_RGB.values()), float)
    nearest = ((image.reshape(-1, 1, 3).astype(float) - palette[None]) ** 2).sum(-1).argmin(axis=1)
    return float((nearest == list(COLOR_RGB).index(colour)).mean())


@pytest.fixture(scope="module")
def colour_visualisations(demo_layer, tmp_path_factory):
    """The red-c unit's visualisation and those of two units explained by other colours (kept in a cache)."""
    units = demo_layer["colour_units"]
    assert "red-c" in units and len(units) >= 3
    others = [c for c in ("black-c", "pink-c", "blue-c", "yellow-c", "green-c", "white-c") if c in units][:2]
    cache = tmp_path_factory.mktemp("vis-cache")
    calls: list[float] = []
    vis = {c: visualize(demo_layer["model"], "layer4", Direction.unit(units[c], 128), VisSettings(steps=STEPS),
                        cache=cache, progress=lambda f, m: calls.append(f)) for c in ["red-c", *others]}
    return vis, cache, calls


def test_a_colour_unit_draws_its_colour(colour_visualisations):
    vis, _, _ = colour_visualisations
    red = colour_share(vis["red-c"].image, "red-c")
    for colour, other in vis.items():
        if colour != "red-c":
            assert red > 2 * colour_share(other.image, "red-c"), colour
            assert colour_share(other.image, colour) > colour_share(vis["red-c"].image, colour), colour


def test_optimisation_goes_far_beyond_the_data(colour_visualisations, demo_layer):
    """The unit's mean over the whole visualisation beats its single highest activation over the dataset, and the
    visualisation's own peak is well above it."""
    vis, _, _ = colour_visualisations
    for colour, v in vis.items():
        unit = demo_layer["colour_units"][colour]
        top = float(np.asarray(demo_layer["activations"][:, unit]).max())
        assert v.objective > top and v.peak > 1.4 * top, (colour, v.objective, v.peak, top)
        assert v.trace[-10:].mean() > 5 * abs(v.trace[0]) and v.image.shape == (128, 128, 3)


def test_progress_cache_and_cancel(colour_visualisations, demo_layer):
    vis, cache, calls = colour_visualisations
    assert len(calls) == len(vis) * STEPS and calls[-1] == 1.0
    model, unit = demo_layer["model"], demo_layer["colour_units"]["red-c"]
    again = visualize(model, "layer4", Direction.unit(unit, 128), VisSettings(steps=STEPS), cache=cache)
    assert again.from_cache and np.array_equal(again.image, vis["red-c"].image)
    assert again.objective == vis["red-c"].objective and np.array_equal(again.trace, vis["red-c"].trace)
    other = VisSettings(steps=STEPS, seed=1)
    assert cache_key(model, "layer4", Direction.unit(unit, 128), other) != cache_key(
        model, "layer4", Direction.unit(unit, 128), VisSettings(steps=STEPS))
    files = sorted(cache.rglob("*.npz"))
    with pytest.raises(Cancelled):
        visualize(model, "layer4", Direction.unit(unit, 128), other, cache=cache, cancel=lambda: True)
    assert sorted(cache.rglob("*.npz")) == files  # nothing half-made is kept


def test_weights_hash_follows_the_weights(demo_layer):
    from probescope.core.demo.model import DemoNet

    net = DemoNet(14, (4, 8, 8, 8))
    before = weights_hash(net)
    with torch.no_grad():
        net.layer1.conv.weight[0, 0, 0, 0] += 1
    assert weights_hash(net) != before and weights_hash(demo_layer["model"].module) == weights_hash(
        demo_layer["model"].module)


def test_a_unit_is_its_own_direction(demo_layer):
    model = demo_layer["model"]
    settings = VisSettings(steps=4)
    axis = np.zeros(128)
    axis[5] = 3.0
    a = visualize(model, "layer4", Direction.unit(5, 128), settings)
    b = visualize(model, "layer4", Direction.of(axis, "axis"), settings)
    assert np.array_equal(a.image, b.image) and a.objective == b.objective
    group = Direction.units([5, 9], 128)
    assert group.vector[[5, 9]] == pytest.approx([2 ** -0.5] * 2) and group.name == "units 5, 9"
    for bad in (lambda: Direction.units([128], 128), lambda: Direction.of(np.zeros(4), "zero"),
                lambda: VisSettings(steps=0), lambda: VisSettings(size=8), lambda: VisSettings(learning_rate=0),
                lambda: visualize(model, "layer9", Direction.unit(0, 128), settings),
                lambda: visualize(model, "layer4", Direction.unit(0, 64), settings)):
        with pytest.raises(InputError):
            bad()


def test_a_model_loaded_in_inference_mode_draws_the_same(demo_layer):
    """The window's compute thread loads models under torch.inference_mode: their weights are then inference tensors,
    which autograd cannot save, and the optimisation runs on copies of them."""
    from probescope.core.models.loading import load_model

    with torch.inference_mode():
        model = load_model("demo")
    assert next(model.module.parameters()).is_inference()
    settings = VisSettings(steps=3)
    with torch.inference_mode():  # (as the compute thread runs every task)
        vis = visualize(model, "layer4", Direction.unit(5, 128), settings)
    assert np.array_equal(vis.image, visualize(demo_layer["model"], "layer4", Direction.unit(5, 128), settings).image)


def test_concept_direction_equals_upsampled_mean(demo_layer):
    """v_c against the brute force: every image's activations upsampled, averaged over the concept's pixels."""
    from probescope.core.demo.world import label_number
    from probescope.core.dissection.formula import AND, Formula
    from probescope.core.dissection.masks import formula_mask
    from probescope.core.dissection.unitmasks import upsample

    store, activations = demo_layer["store"], demo_layer["activations"]
    red = label_number("red-c")
    for formula in (Formula.atom(red), Formula.atom(label_number("roof")).extend(AND, red)):
        got = concept_direction(store, activations, formula)
        total, pixels = np.zeros(128), 0
        for i in range(store.n_images):
            mask = formula_mask(store, i, formula)
            if mask.any():
                up = upsample(np.asarray(activations[i]), mask.shape).numpy().astype(np.float64)
                total += up[:, mask].sum(axis=1)
                pixels += int(mask.sum())
        np.testing.assert_allclose(got, total / pixels, rtol=1e-5)
    assert upsampling_matrix((2, 2), (4, 4)).sum(axis=0) == pytest.approx(np.ones(16))  # weights sum to 1
    with pytest.raises(InputError, match="present in no image"):  # hubcaps are on cars, petals on flowers
        concept_direction(store, activations, Formula.atom(label_number("hubcap")).extend(AND, label_number("petal")))


def test_a_colour_direction_draws_its_colour(demo_layer, colour_visualisations):
    """The red-c concept's mean activation vector, visualised, has more red than a unit explained by another colour
    and rises far above the dataset's best projection onto it."""
    from probescope.core.demo.world import label_number
    from probescope.core.dissection.formula import Formula

    vis, _, _ = colour_visualisations
    vector = concept_direction(demo_layer["store"], demo_layer["activations"], Formula.atom(label_number("red-c")))
    direction = Direction.of(vector, "red-c")
    v = visualize(demo_layer["model"], "layer4", direction, VisSettings(steps=STEPS // 2))
    projections = np.einsum("c,nchw->nhw", direction.vector, np.asarray(demo_layer["activations"]))
    assert v.objective > projections.max()
    others = [c for c in vis if c != "red-c"]
    assert all(colour_share(v.image, "red-c") > colour_share(vis[c].image, "red-c") for c in others)


@pytest.mark.filterwarnings("ignore:`torch.jit:FutureWarning")  # TorchScript is deprecated, still a model format
def test_other_networks_and_the_layer_cut(tmp_path):
    """A torchvision ResNet-18 (random weights) runs only up to layer4 (its head never runs); a TorchScript model
    (trusted), whose only readable layer is its output, is visualised through its class scores."""
    import torchvision

    from probescope.core.data.preprocess import IMAGENET
    from probescope.core.demo.model import DemoNet
    from probescope.core.models.layers import list_layers
    from probescope.core.models.loading import LoadedModel, load_model
    from probescope.core.trust import Trust

    torch.manual_seed(0)
    net = torchvision.models.resnet18(weights=None, num_classes=10).eval()
    model = LoadedModel(net, "resnet18", "resnet18", IMAGENET, None, (224, 224), None, "random", "layer4")
    list_layers(model)  # the layers' layouts: decided once per model, by a pass of two blank images
    heads = []
    net.fc.register_forward_hook(lambda *a: heads.append(1))
    v = visualize(model, "layer4", Direction.unit(7, 512), VisSettings(steps=3, size=64))
    assert v.image.shape == (64, 64, 3) and not heads and np.isfinite(v.trace).all()
    path = tmp_path / "demo.ts"
    torch.jit.script(DemoNet(14, (4, 8, 8, 8)).eval()).save(str(path))
    scripted = load_model(f"torchscript:{path}", trust=Trust.of_files([path]))
    v = visualize(scripted, "output", Direction.unit(2, 14), VisSettings(steps=3, size=32))
    assert v.image.shape == (32, 32, 3) and v.objective == v.peak  # one position: the class score
    with pytest.raises(InputError, match="only 'output'"):
        visualize(scripted, "layer4", Direction.unit(2, 14), VisSettings(steps=1, size=32))


def test_a_damaged_or_unwritable_cache(demo_layer, tmp_path):
    from probescope.core.errors import Note
    from probescope.core.featurevis.render import CACHE_SUBDIR

    model, settings, direction = demo_layer["model"], VisSettings(steps=3), Direction.unit(1, 128)
    first = visualize(model, "layer4", direction, settings, cache=tmp_path)
    (stored,) = (tmp_path / CACHE_SUBDIR).iterdir()
    stored.write_bytes(b"PK\x03\x04 cut short")
    again = visualize(model, "layer4", direction, settings, cache=tmp_path)
    assert not again.from_cache and np.array_equal(again.image, first.image)
    assert visualize(model, "layer4", direction, settings, cache=tmp_path).from_cache  # remade and kept
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    with pytest.warns(Note, match="not cached"):
        kept = visualize(model, "layer4", direction, settings, cache=blocked)
    assert np.array_equal(kept.image, first.image)
