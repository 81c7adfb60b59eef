"""What a unit (or a direction in a layer) would draw: activation maximisation as in Olah et al. 2017 and the
lucid/lucent libraries, with progress, cancel and a cache.

    vis = visualize(model, "layer4", Direction.unit(12, 128), VisSettings(), cache=cache_dir())

Each step renders the Fourier-parameterised image (image.py), applies lucid's random transformations
(transforms.py) from a generator seeded with `settings.seed`, normalises it with the model's preprocessing (its
mean and std; the size is the visualisation's), runs the network up to the layer and takes one Adam step on the
spectrum to raise the objective: the mean over the layer's positions of d . a(p), with a(p) the layer's activation
vector at position p and d the direction (unit-normed; a unit's direction is its axis, so the objective is the
unit's mean activation, lucid's `channel`). The layer's output is read through its layout (a ViT's patch tokens,
a Swin stage's channels-last map), and a model with a fixed input size (a ViT) gets each transformed image resized
back to that size, so the random shifts, zooms and turns still reach it.

Such images show what CAN drive a unit, not what drives it on real data (Geirhos et al. 2023: visualisations can
be made to show anything while the network's behaviour is unchanged); the views say so beside them.

Cache: <cache>/feature_vis/<key>.npz, the key hashing the network's weights (their bytes, not the file's name), its
preprocessing, the layer, the direction's values and every setting.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import warnings
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from probescope.core.atomic import atomic_open
from probescope.core.errors import InputError, Note
from probescope.core.featurevis import transforms
from probescope.core.featurevis.image import FourierImage
from probescope.core.featurevis.settings import Direction, VisSettings, Visualization
from probescope.core.files import NUMPY_FILE_ERRORS
from probescope.core.models.layers import layer_layout
from probescope.core.models.layout import Layout
from probescope.core.models.loading import TORCHSCRIPT_OUTPUT, LoadedModel
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report

CACHE_SUBDIR = "feature_vis"
CACHE_VERSION = 1
def visualize(model: LoadedModel, layer: str, direction: Direction, settings: VisSettings = VisSettings(), *,
              cache: str | Path | None = None, progress: ProgressCallback | None = None,
              cancel: CancelCheck | None = None) -> Visualization:
    """The visualisation of `direction` at `layer`: from `cache` (a cache folder) when it was made before, else
    optimised (raises Cancelled when cancel() turns true) and stored there."""
    path = _path(model, layer, direction, settings, cache)
    found = _read(path, direction, layer, settings, _size(model, settings))
    if found is not None:
        report(progress, 1.0, f"{direction.name}: visualisation from the cache")
        return found
    vis = _optimise(model, layer, direction, settings, progress, cancel)
    if path is not None:
        try:
            with atomic_open(path, "wb") as fh:
                np.savez(fh, image=vis.image, trace=vis.trace, objective=vis.objective, peak=vis.peak)
        except InputError as exc:  # the image is made: a full or read-only cache only means it is not kept
            warnings.warn(Note(f"{exc}; the visualisation is not cached"), stacklevel=2)
    return vis


def cached_visualization(model: LoadedModel, layer: str, direction: Direction, settings: VisSettings,
                         cache: str | Path) -> Visualization | None:
    """The visualisation `visualize` would take from `cache`, or None when it would have to optimise (a view asks
    before it offers to start the optimisation)."""
    return _read(_path(model, layer, direction, settings, cache), direction, layer, settings, _size(model, settings))


def _path(model: LoadedModel, layer: str, direction: Direction, settings: VisSettings,
          cache: str | Path | None) -> Path | None:
    return None if cache is None else Path(cache) / CACHE_SUBDIR / f"{cache_key(model, layer, direction, settings)}.npz"


def cache_key(model: LoadedModel, layer: str, direction: Direction, settings: VisSettings) -> str:
    fields = {"version": CACHE_VERSION, "weights": weights_hash(model.module), "preprocess": model.preprocess.key(),
              "size": _size(model, settings), "layer": layer, "direction": direction.key(),
              "settings": asdict(settings)}
    if layer in model.layouts:  # the user's reading of the layer (the model's own follows from its weights)
        fields["layout"] = str(model.layouts[layer])
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]


def weights_hash(module: torch.nn.Module) -> str:
    """SHA-256 of the network's class, and its parameters' and buffers' names, types, shapes and bytes."""
    digest = hashlib.sha256(type(module).__name__.encode())
    for name, tensor in module.state_dict().items():
        t = tensor.detach().cpu().contiguous()
        digest.update(f"{name}:{t.dtype}:{tuple(t.shape)};".encode())
        digest.update(t.view(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return digest.hexdigest()


def _size(model: LoadedModel, settings: VisSettings) -> int:
    return settings.size or int(model.input_size[0])


def _read(path: Path | None, direction: Direction, layer: str, settings: VisSettings,
          size: int) -> Visualization | None:
    """A cached visualisation, or None when there is none or it is unreadable or damaged (it is then made again)."""
    if path is None or not path.is_file():
        return None
    try:
        with np.load(path, allow_pickle=False) as archive:
            vis = Visualization(archive["image"], archive["trace"], float(archive["objective"]),
                                float(archive["peak"]), direction.name, layer, settings, from_cache=True)
    except NUMPY_FILE_ERRORS:  # (a damaged entry: made again)
        return None
    whole = vis.image.shape == (size, size, 3) and vis.image.dtype == np.uint8 and vis.trace.shape == (settings.steps,)
    return vis if whole else None


class _Stop(Exception):
    """Raised from the hook once the layer has run: the rest of the network is not needed."""


@contextlib.contextmanager
def _layer_output(model: LoadedModel, layer: str):
    """Yields run(x) -> the layer's output for x (with its graph), the model's lock held while hooked."""
    if not model.hookable:
        if layer != TORCHSCRIPT_OUTPUT:
            raise InputError(f"{model.name}: a TorchScript model runs no hooks; only {TORCHSCRIPT_OUTPUT!r} (its "
                             f"output) can be visualised, not {layer!r}")
        with model.lock:
            yield model.module
        return
    modules = dict(model.module.named_modules())
    if layer not in modules or not layer:
        raise InputError(f"{model.name} has no layer {layer!r} (`probescope info` lists them)")
    seen: list[torch.Tensor] = []

    def hook(_module, _inputs, output) -> None:
        if not isinstance(output, torch.Tensor):
            raise InputError(f"layer {layer!r} outputs a {type(output).__name__}, not a tensor")
        seen.append(output)
        raise _Stop

    weights = _trainable_copy(model.module)

    def run(x: torch.Tensor) -> torch.Tensor:
        seen.clear()
        with contextlib.suppress(_Stop):
            if weights is None:
                model.module(x)
            else:
                torch.func.functional_call(model.module, weights, (x,))
        if not seen:
            raise InputError(f"{model.name}: layer {layer!r} did not run in the forward pass")
        return seen[0]

    with model.lock:
        handle = modules[layer].register_forward_hook(hook)
        try:
            yield run
        finally:
            handle.remove()


def _trainable_copy(module: torch.nn.Module) -> dict[str, torch.Tensor] | None:
    """Copies of the network's parameters and buffers when some were made in inference mode (a model loaded in the
    window's compute thread, which runs under torch.inference_mode): autograd cannot save those for the input's
    gradient. None when the network's own tensors serve."""
    tensors = dict(module.named_parameters()) | dict(module.named_buffers())
    if not any(t.is_inference() for t in tensors.values()):
        return None
    return {name: t.detach().clone() for name, t in tensors.items()}


def _along(output: torch.Tensor, layout: Layout, direction: torch.Tensor) -> torch.Tensor:
    """d . a(p) per position of the layer's units, (positions,): a flat (1, F) output is one position."""
    output = layout.to_units(output)
    if output.shape[1] != len(direction):
        raise InputError(f"the direction has {len(direction)} channels, the layer's output is {tuple(output.shape)}")
    return torch.einsum("c,chw->hw", direction, output[0].float()).reshape(-1)


@torch.enable_grad()
@torch.inference_mode(False)  # (the window's compute thread runs every task in inference mode)
def _optimise(model: LoadedModel, layer: str, direction: Direction, settings: VisSettings,
              progress: ProgressCallback | None, cancel: CancelCheck | None) -> Visualization:
    device = model.device
    generator = torch.Generator().manual_seed(settings.seed)
    image = FourierImage(_size(model, settings), generator, settings.decay_power, settings.decorrelate).to(device)
    optimizer = torch.optim.Adam([image.spectrum], lr=settings.learning_rate)
    mean = torch.tensor(model.preprocess.mean, dtype=torch.float32, device=device).view(1, 3, 1, 1)
    std = torch.tensor(model.preprocess.std, dtype=torch.float32, device=device).view(1, 3, 1, 1)
    d = torch.from_numpy(direction.vector).to(device)
    trace = np.empty(settings.steps)
    layout = layer_layout(model, layer)
    fixed = model.preprocess.target
    with _layer_output(model, layer) as run:
        for step in range(settings.steps):
            check_cancel(cancel)
            x = image()
            if settings.transforms:
                x = transforms.standard(x, generator)
            if fixed is not None and tuple(x.shape[-2:]) != fixed:
                x = torch.nn.functional.interpolate(x, size=fixed, mode="bilinear", align_corners=False)
            objective = _along(run((255.0 * x - mean) / std), layout, d).mean()
            (grad,) = torch.autograd.grad(-objective, [image.spectrum])  # the network's weights get no gradient
            image.spectrum.grad = grad
            optimizer.step()
            trace[step] = float(objective.detach())
            report(progress, (step + 1) / settings.steps, f"{direction.name}: step {step + 1}/{settings.steps}, "
                   f"objective {trace[step]:.3g}")
        with torch.no_grad():
            final = (image() * 255.0).round()  # the uint8 image that is kept and shown
            shown = final if fixed is None else torch.nn.functional.interpolate(final, size=fixed, mode="bilinear",
                                                                                align_corners=False)
            along = _along(run((shown - mean) / std), layout, d)
    pixels = final[0].permute(1, 2, 0).cpu().numpy().astype(np.uint8)
    return Visualization(pixels, trace, float(along.mean()), float(along.max()), direction.name, layer, settings)
