"""What a dissection job reads: the dataset's identity, activations (a file, or extracted from a model) and the
model's predictions. `probescope dissect` and `probescope batch` both go through these functions, so they record
the same identities, a batch's results are byte-identical to single-machine runs, and either can resume the other.

They run in the command line's process, a batch driver or remote workers (extraction as one task per model): they
take and return plain values (paths, arrays, dicts) only.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from probescope.core.cache import cache_dir
from probescope.core.data.broden import BrodenDataset
from probescope.core.dissection.blocks import release_pages
from probescope.core.errors import InputError
from probescope.core.files import readable_file
from probescope.core.models.layout import LAYOUT_HELP, Layout
from probescope.core.tasks import CancelCheck, ProgressCallback
from probescope.core.trust import NO_TRUST, Trust

if TYPE_CHECKING:
    from probescope.core.models.loading import LoadedModel


@dataclass
class LayerInput:
    """One layer ready to dissect: activations (images, units, h, w) (or, from a remote extraction, their object
    store reference), the layer's width, the model identity recorded in dissection.json, and the model's predicted
    class per image with its class names (None when unknown)."""

    layer: str
    activations: Any
    n_units: int
    model_info: dict
    predictions: np.ndarray | None = None
    class_names: list[str] | None = None


def dataset_identity(dataset: BrodenDataset) -> dict:
    """What a dissection depends on in the dataset: folder, index file name, row filter, size and modification time."""
    stat = dataset.index_path.stat()
    return {"root": str(dataset.root.resolve()), "index": dataset.index_path.name, "source": dataset.source,
            "n_images": dataset.n_images, "index_bytes": stat.st_size, "index_mtime_ns": stat.st_mtime_ns}


def model_identity(model: LoadedModel, spec: str, layer: str) -> dict:
    """What a dissection depends on in the model: its spec, weights identity, layer, the layout its output was read
    with (probescope.core.models.layout), the input size it was built or probed at and the preprocessing."""
    # (torch: the window's process imports this module, never torch)
    from probescope.core.models.layers import layer_layout

    return {"spec": spec, "name": model.name, "layer": layer, "source_key": model.source_key,
            "layout": str(layer_layout(model, layer)), "input_size": list(model.input_size),
            "preprocess": model.preprocess.describe()}


def require_spatial_map(shape: tuple[int, ...], layer: str, path: Path | str | None = None) -> None:
    """Refuse a layer whose units per image (`shape`, (C, h, w) as its layout reads them) have no spatial map: a
    classifier's logits or a pooled vector, (F,) or (C, 1, 1). Network Dissection compares where a unit fires with
    where a concept is; dissected, such a unit's 'mask' is the whole image, and every number would look
    interpretable."""
    shape = tuple(int(v) for v in shape)
    if len(shape) == 3 and shape[1] * shape[2] > 1:
        return
    size = "x".join(map(str, shape))
    raise InputError(f"layer {layer!r} has no spatial map (its output is {size} per image, not channels x height x "
                     "width): Network Dissection measures where in an image a unit fires; choose a layer with a "
                     "spatial map, such as a convolution's (`probescope info` lists each layer's output)", path)


def open_dataset(root: Path, index: str, source: str) -> tuple[BrodenDataset, dict]:
    """The dataset and its identity."""
    dataset = BrodenDataset.open(root, index, only_source=source or None)
    return dataset, dataset_identity(dataset)


def load_activation_file(path: Path, n_images: int, layout: Layout | None = None) -> tuple[np.ndarray, dict]:
    """A read-only memmap of ACT.npy, checked (float, one row per image, finite), and its identity. The rows are
    (units, h, w) unless `layout` says how they are laid out (channels last, a token sequence: then the array is
    read through a view as (images, units, h, w) of the patch tokens; probescope.core.models.layout)."""
    readable_file(path)
    try:
        raw = np.load(path, mmap_mode="r", allow_pickle=False)
    except (ValueError, OSError) as exc:
        raise InputError(f"not a readable .npy array ({exc})", path) from None
    if raw.dtype.kind != "f" or raw.ndim < 2:
        raise InputError(f"expected float activations, one row per image, got {raw.dtype} {raw.shape}", path)
    problem = layout.problem(raw.shape[1:]) if layout is not None else None
    if problem:
        raise InputError(f"layout {layout}: {problem}", path)
    act = raw if layout is None else layout.to_units(raw)
    if act.ndim != 4:
        raise InputError(f"expected float activations (images, units, h, w), got {raw.dtype} {raw.shape}; for "
                         f"another layout pass --layout ({LAYOUT_HELP})", path)
    if act.shape[0] != n_images:
        raise InputError(f"{act.shape[0]} images, but the dataset index has {n_images} rows", path)
    require_spatial_map(act.shape[1:], path.stem, path)
    for start in range(0, n_images, 256):
        if not np.isfinite(act[start:start + 256]).all():
            raise InputError(f"non-finite activations (first in images {start}-{min(n_images, start + 256) - 1})",
                             path)
    release_pages(act)  # the check read the whole file through the mapping
    stat = path.stat()
    info = {"activations": str(path.resolve()), "shape": list(raw.shape), "bytes": stat.st_size,
            "mtime_ns": stat.st_mtime_ns}
    return act, info if layout is None else {**info, "layout": str(layout)}


def head_layer(model: LoadedModel) -> str | None:
    """The layer whose output is the model's class scores: the last module (a TorchScript model's output), when the
    model names its classes; None otherwise."""
    # (torch: the window's process imports this module, never torch)
    from probescope.core.models.loading import TORCHSCRIPT_OUTPUT

    if not model.class_names:
        return None
    if not model.hookable:
        return TORCHSCRIPT_OUTPUT
    leaves = [name for name, m in model.module.named_modules() if name and not list(m.children())]
    return leaves[-1] if leaves else None


def _argmax(model: LoadedModel, logits: np.ndarray) -> np.ndarray | None:
    """The predicted class per image, when the head is as wide as the model's class names."""
    flat = np.asarray(logits).reshape(len(logits), -1)
    return flat.argmax(axis=1) if flat.shape[1] == len(model.class_names or ()) else None


def predicted_classes(model: LoadedModel, dataset: BrodenDataset, cache: Path | None, *, device: str | None = None,
                      progress: ProgressCallback | None = None,
                      cancel: CancelCheck | None = None) -> tuple[str, np.ndarray] | None:
    """(head layer, predicted class per image): the argmax of the last module's output (the classifier head; a
    TorchScript model's output), when the model names its classes and the head is as wide; None otherwise."""
    # (torch: the window's process imports this module, never torch)
    from probescope.core.data.activations import extract_activations

    head = head_layer(model)
    if head is None:
        return None
    predictions = _argmax(model, extract_activations(model, head, dataset, cache, device=device, progress=progress,
                                                     cancel=cancel))
    return None if predictions is None else (head, predictions)


def extract_model_layers(spec: str, layers: list[str | None], root: Path, index: str, source: str,
                         device: str = "cpu", trust: Trust = NO_TRUST, cache: Path | None = None, *,
                         class_names: Path | None = None, predict: bool = True,
                         progress: ProgressCallback | None = None, input_size: int | tuple[int, int] | None = None,
                         layouts: dict[str | None, Layout] | None = None) -> list[LayerInput]:
    """Load the model once and extract every asked layer (None = the model's default layer) over the dataset, in one
    pass through the activation cache at `cache` (default: the user cache folder). With `predict`, predictions are
    the argmax of the last module's output (the classifier head, captured in the same pass) when its width matches
    the model's class names. `input_size` and `layouts` as `load_model` takes them."""
    # (torch: the window's process imports this module, never torch)
    from probescope.core.data.activations import extract_layers
    from probescope.core.models.loading import load_model

    dataset, _ = open_dataset(root, index, source)
    folder = cache if cache is not None else cache_dir()
    model = load_model(spec, trust=trust, device=device, class_names=class_names, input_size=input_size,
                       layouts=layouts)
    names = []
    for asked in layers:
        layer = asked or model.default_layer
        if not layer:
            raise InputError(f"{model.name}: no default layer; name one (see `probescope info {spec}`)")
        names.append(layer)
    head = head_layer(model) if predict else None
    arrays = extract_layers(model, names + ([head] if head else []), dataset, folder, device=device,
                            progress=progress)
    for layer in names:
        require_spatial_map(arrays[layer].shape[1:], layer)
    predictions = _argmax(model, arrays[head]) if head else None
    return [LayerInput(layer, arrays[layer], int(arrays[layer].shape[1]), model_identity(model, spec, layer),
                       predictions, model.class_names) for layer in names]
