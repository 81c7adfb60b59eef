"""Layer activations of a model over a set of images, through forward hooks, cached on disk as .npy memmaps.

Images go in at their native size unless the model's Preprocess says otherwise (the dissection protocol feeds
them uncropped; a model with a fixed input size, such as a ViT, gets them resized to it). Decoding runs in a small
thread pool a couple of batches ahead of inference. The result is float32 (N, units, h, w): each layer's output is
read through its layout (probescope.core.models.layout: channels last and token sequences become channels-first
maps of the patch tokens; a flat output (N, F) is stored as (N, F, 1, 1)).

The cache (where the arrays are kept, how they are checked) is probescope.core.data.activation_cache.
"""

from __future__ import annotations

import contextlib
import os
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch
from torch import nn

from probescope.core.atomic import write_json
from probescope.core.data.activation_cache import (
    CACHE_SUBDIR,
    BlockChecksums,
    Images,
    Source,
    allocate,
    cache_fields,
    cache_key,
    load_cached,
    source_of,
    temp_file,
)
from probescope.core.errors import InputError, first_line
from probescope.core.models.layers import layer_layout
from probescope.core.models.layout import Layout
from probescope.core.models.loading import TORCHSCRIPT_OUTPUT, LoadedModel
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report

POOLS = (None, "avg", "cls")  # none, the mean over the map's positions (patch tokens), a token layer's class token


def extract_activations(
    model: LoadedModel,
    layer: str,
    images: Images,
    cache_dir: str | Path | None,
    *,
    batch_size: int = 32,
    device: str | torch.device | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelCheck | None = None,
    workers: int = 2,
    pool: str | None = None,
) -> np.ndarray:
    """float32 (N, units, h, w) activations of `layer`: a read-only memmap of the cache, rebuilt if missing or
    stale; an in-memory array when cache_dir is None. Moves the model to `device` when one is given. Raises
    Cancelled (leaving no cache) when cancel() returns True; one hooked pass per model at a time (model.lock).
    `pool='avg'` averages each map over its positions as the batches come (N, units, 1, 1), so features of a conv
    layer for 50,000 stimuli never hold, nor cache, the whole maps (20 GB for ResNet-50 layer4); a token layer's
    positions are its patch tokens. `pool='cls'` keeps a token layer's class token (its first token) instead."""
    return extract_layers(model, [layer], images, cache_dir, batch_size=batch_size, device=device,
                          progress=progress, cancel=cancel, workers=workers, pool=pool)[layer]


def extract_layers(
    model: LoadedModel,
    layers: Sequence[str],
    images: Images,
    cache_dir: str | Path | None,
    *,
    batch_size: int = 32,
    device: str | torch.device | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelCheck | None = None,
    workers: int = 2,
    pool: str | None = None,
) -> dict[str, np.ndarray]:
    """The activations of several layers, as `extract_activations` gives each one, from ONE pass over the images
    for all those not cached yet (each cached file is the same as a single-layer extraction writes)."""
    if pool not in POOLS:
        raise InputError(f"pooling must be 'avg', 'cls' or none, got {pool!r}")
    source = source_of(images)
    if source.n == 0:
        raise InputError("no images to extract activations from")
    layers = list(dict.fromkeys(layers))
    for layer in layers:
        _check_layer(model, layer, pool)
    if device is not None:
        model.to(device)
    if cache_dir is None:
        return _run(model, layers, source, {}, batch_size, progress, cancel, workers, pooling=pool)
    folder = Path(cache_dir) / CACHE_SUBDIR
    fields = {layer: cache_fields(model, layer, source, pool) for layer in layers}
    paths = {layer: folder / f"{cache_key(fields[layer])}.npy" for layer in layers}
    out: dict[str, np.ndarray] = {}
    for layer in layers:
        report(progress, 0.0, f"{layer}: checking the activation cache")
        cached = load_cached(paths[layer], fields[layer], source.n)
        if cached is not None:
            report(progress, 1.0, f"{layer}: read cached activations")
            out[layer] = cached
    missing = [layer for layer in layers if layer not in out]
    if not missing:
        return out
    temps: dict[str, tuple[Path, int]] = {}  # layer -> (locked temporary file, its descriptor)
    checksums: dict[str, BlockChecksums] = {}
    try:
        for layer in missing:
            temps[layer] = temp_file(folder, paths[layer].name)
            paths[layer].with_suffix(".json").unlink(missing_ok=True)
        arrays = _run(model, missing, source, {layer: tmp for layer, (tmp, _fd) in temps.items()}, batch_size,
                      progress, cancel, workers, checksums=checksums, pooling=pool)
        shapes = {layer: list(array.shape) for layer, array in arrays.items()}
        for array in arrays.values():
            array.flush()
        del arrays
    except BaseException:
        for tmp, fd in temps.values():
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(tmp)
        raise
    for _tmp, fd in temps.values():
        os.close(fd)  # the locks go before the renames (Windows renames no open file); a cleaner spares fresh files
    for layer in missing:
        tmp, _fd = temps.pop(layer)
        try:
            os.replace(tmp, paths[layer])
        except OSError as exc:
            for rest in [tmp, *(t for t, _ in temps.values())]:
                with contextlib.suppress(OSError):
                    os.unlink(rest)
            raise InputError(f"could not write the activation cache ({exc.strerror or exc})", paths[layer]) from None
        write_json(paths[layer].with_suffix(".json"), {"fields": fields[layer], "shape": shapes[layer],
                                                       "model_name": model.name,
                                                       "checksums": checksums[layer].to_json()})
        out[layer] = np.load(paths[layer], mmap_mode="r")
    return {layer: out[layer] for layer in layers}


def _check_layer(model: LoadedModel, layer: str, pool: str | None) -> None:
    """The model has the layer, and (for `pool='cls'`) the layer has a class token."""
    if not model.hookable:
        if layer != TORCHSCRIPT_OUTPUT:
            raise InputError(
                f"{model.name}: TorchScript models run no forward hooks, so only layer "
                f"{TORCHSCRIPT_OUTPUT!r} (the model output) can be read, not {layer!r}"
            )
    else:
        names = [name for name, _ in model.module.named_modules() if name]
        if layer not in names:
            hint = ", ".join(names[-6:])
            raise InputError(f"{model.name} has no layer {layer!r} (last layers: {hint}; `probescope info` lists all)")
    if pool == "cls":
        layout = layer_layout(model, layer)
        if layout.kind != "tokens" or layout.prefix < 1:
            raise InputError(f"{model.name}: layer {layer!r} ({layout}) has no class token; pool its patches ('avg')")


class _StopForward(Exception):
    """Raised from a hook to skip the rest of the network once the wanted layer has run."""


class _Capture:
    """A forward hook keeping a copy of the layer's last output (copied at once: later in-place ops change it).
    `fired` (shared by the captures of one pass) records the order the hooked layers ran in."""

    def __init__(self, fired: list[_Capture]) -> None:
        self.output: torch.Tensor | None = None
        self.calls = 0
        self.stop_early = False
        self.fired = fired

    def __call__(self, _mod: nn.Module, _inp: object, out: object) -> None:
        if not isinstance(out, torch.Tensor):
            raise InputError(f"layer output is a {type(out).__name__}, not a tensor")
        self.output = out.detach().float().clone()
        self.calls += 1
        self.fired.append(self)
        if self.stop_early:
            raise _StopForward


def _forward(model: LoadedModel, x: torch.Tensor, captures: dict[str, _Capture]) -> dict[str, torch.Tensor]:
    """Every hooked layer's output for the batch x; the rest of the network is skipped once the last one ran (after
    the first batch showed each runs once per forward: later calls would overwrite them)."""
    if not model.hookable:
        out = run_model(model, x)
        if not isinstance(out, torch.Tensor):
            raise InputError(f"{model.name}: output is a {type(out).__name__}, not a tensor")
        return {layer: out.float() for layer in captures}
    first = all(c.calls == 0 and not c.stop_early for c in captures.values())
    for c in captures.values():
        c.output, c.calls = None, 0
    fired = next(iter(captures.values())).fired
    fired.clear()
    with contextlib.suppress(_StopForward):
        run_model(model, x)
    for layer, c in captures.items():
        if c.output is None:
            raise InputError(f"{model.name}: layer {layer!r} did not run in the forward pass")
    if first and all(c.calls == 1 for c in captures.values()):
        fired[-1].stop_early = True
    return {layer: c.output for layer, c in captures.items()}


def run_model(model: LoadedModel, x: torch.Tensor) -> object:
    """The model's output for the batch x; a model that does not take it (a program exported for another input
    shape, a model for other images) is refused in one line naming its file and the batch's shape."""
    try:
        return model.module(x)
    except (RuntimeError, ValueError, AssertionError) as exc:  # (torchvision's ViT asserts its input's size)
        raise InputError(f"{model.name} does not run on images of shape {tuple(x.shape[1:])} "
                         f"({first_line(exc)})", model.source) from None


def _as_units(model: LoadedModel, t: torch.Tensor, layer: str, layout: Layout, pooling: str | None) -> np.ndarray:
    """A batch of the layer's outputs as float32 (N, units, h, w), pooled to (N, units, 1, 1) when asked."""
    problem = layout.problem(tuple(t.shape[1:]))
    if problem:
        raise InputError(f"{model.name}: layer {layer!r}: {problem} (`probescope info` shows its layout; --layout "
                         "sets it)")
    if pooling == "cls":
        return layout.prefix_tokens(t)[:, 0, :, None, None].cpu().numpy()
    units = layout.to_units(t).cpu().numpy()
    return units.mean(axis=(2, 3), keepdims=True) if pooling == "avg" else units


def _batches(source: Source, batch_size: int, pool: ThreadPoolExecutor, ahead: int = 2):
    """Yield (start, images) per batch while the next `ahead` batches decode in the pool."""
    starts = list(range(0, source.n, batch_size))
    pending: deque[tuple[int, list[Future]]] = deque()

    def submit(start: int) -> None:
        pending.append((start, [pool.submit(source.load, i) for i in range(start, min(start + batch_size, source.n))]))

    try:
        for start in starts[:ahead]:
            submit(start)
        for k in range(len(starts)):
            start, futures = pending.popleft()
            if k + ahead < len(starts):
                submit(starts[k + ahead])
            yield start, [f.result() for f in futures]
    finally:
        for _, futures in pending:
            for f in futures:
                f.cancel()


@contextlib.contextmanager
def _hooked(model: LoadedModel, captures: dict[str, _Capture]) -> Iterator[None]:
    """Hold the model's lock with each capture hooked on its layer (TorchScript: no hook, its output is the layer)."""
    with model.lock:
        modules = dict(model.module.named_modules()) if model.hookable else {}
        handles = [modules[layer].register_forward_hook(c) for layer, c in captures.items()] if modules else []
        try:
            yield
        finally:
            for handle in handles:
                handle.remove()


def _run(
    model: LoadedModel,
    layers: list[str],
    source: Source,
    out_paths: dict[str, Path],
    batch_size: int,
    progress: ProgressCallback | None,
    cancel: CancelCheck | None,
    workers: int,
    checksums: dict[str, BlockChecksums] | None = None,
    pooling: str | None = None,
) -> dict[str, np.ndarray]:
    """One pass over the images with every layer of `layers` hooked; each written to its path in `out_paths` (a
    memmap) or kept in memory when it has none; with `pooling='avg'` each map is averaged over its positions first;
    with `checksums` (an empty dict), each layer's CRC-32 blocks of what was written."""
    fired: list[_Capture] = []
    captures = {layer: _Capture(fired) for layer in layers}
    layouts = {layer: layer_layout(model, layer) for layer in layers}
    device = model.device
    out: dict[str, np.ndarray] = {}
    names = ", ".join(layers)
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    batches = contextlib.closing(_batches(source, max(1, batch_size), pool))  # closed first: cancels pending decodes
    with _hooked(model, captures), pool, torch.inference_mode(), batches as loaded:
        for start, imgs in loaded:
            check_cancel(cancel)
            try:
                x = model.preprocess(imgs, device=device)
            except InputError as exc:
                raise InputError(f"{exc} (batch starting at {source.describe(start)})") from None
            outputs = _forward(model, x, captures)
            for layer, tensor in outputs.items():
                acts = _as_units(model, tensor, layer, layouts[layer], pooling)
                if not np.isfinite(acts).all():
                    bad = int(np.argmin(np.isfinite(acts).reshape(len(acts), -1).all(axis=1)))
                    raise InputError(f"{model.name}: layer {layer!r} gives non-finite values (NaN or Inf) for "
                                     f"{source.describe(start + bad)}")
                if layer not in out:
                    out[layer] = allocate(out_paths.get(layer), (source.n, *acts.shape[1:]))
                    if checksums is not None:
                        checksums[layer] = BlockChecksums(acts[0].nbytes)
                elif acts.shape[1:] != out[layer].shape[1:]:
                    raise InputError(
                        f"layer {layer!r} gives {acts.shape[1:]} for {source.describe(start)} but "
                        f"{out[layer].shape[1:]} for the first image: images differ in size; resize them (a "
                        "preprocessing such as imagenet:stretch=N or imagenet:crop=N)"
                    )
                out[layer][start : start + len(acts)] = acts
                if checksums is not None:
                    checksums[layer].add(start, out[layer][start : start + len(acts)])
            done = start + len(x)
            report(progress, done / source.n, f"{names}: {done}/{source.n} images")
    return out
