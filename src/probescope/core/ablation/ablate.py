"""Ablation of units at a layer (Bau et al., PNAS 2020): replace the units' activations, run the rest of the network,
and count per class how often the model is still right on the labelled probing images.

    ablation = LayerAblation(model, layer, activations, dataset, truth, class_names, mode="zero")
    result = ablation.run(each_unit(range(n_units)), progress=..., cancel=...)    # an AblationResult

`activations` are the layer's cached activations over `dataset` (core/data/activations.py); `truth` the true class
per image (-1: no label; core/dissection/correlation.py scene_truth). Zero ablation sets the units to 0, mean
ablation to their mean over every image and position of the dataset.

Two ways to run the network after the layer, and the result says which one ran:
- 'tail': only the operations after the layer (core/ablation/tail.py), on the cached activations with the units
  replaced. Ablating each unit of ResNet-18's layer4 costs one avgpool + fc per unit, not a full forward.
- 'hook': full forward passes from the images with a forward hook replacing the units in the layer's output, for
  models whose tail cannot be separated (or on request: path='hook').
Before anything runs, one forward pass over a few labelled images checks that the cached activations are the layer's
output and that the tail reproduces the model's output from them; when it does not, the hook path runs instead.

A unit is a channel of the layer's output read through its layout (probescope.core.models.layout): removing it
writes its channel at every position of that reading, so in a ViT's token sequence at every patch token and never
in the class token or the registers. A token layer runs the hook path (its cached activations hold no prefix tokens
to feed a tail).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np
import torch
from torch import nn

from probescope.core.ablation import tail as tails
from probescope.core.ablation.groups import UnitGroup
from probescope.core.ablation.results import AblationResult
from probescope.core.data.activation_cache import ImageDataset
from probescope.core.data.activations import run_model
from probescope.core.errors import InputError, first_line
from probescope.core.models.layers import layer_layout
from probescope.core.models.layout import Layout
from probescope.core.models.loading import LoadedModel
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report

MODES = ("zero", "mean")
PATHS = ("auto", "tail", "hook")
CHECK_IMAGES = 4  # images of the forward pass that checks the activations and the tail
_CHUNK_BYTES = 64 << 20  # activation copies (groups x images) handed to the tail at once
_MATCH = 1e-2  # cached activations vs the layer's output now: largest difference / largest value (devices differ)
_TAIL_MATCH = 1e-3  # tail(layer output) vs the model's output in the same pass


class _LayerHook:
    """Forward hook on the layer: counts its calls in a pass, keeps the last call's output (`keep`) and replaces
    `units` by `values` in the output of the pass's last call (`last`), the call activation extraction keeps."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout
        self.calls = 0
        self.last = 0
        self.keep = False
        self.output: torch.Tensor | None = None
        self.units: torch.Tensor | None = None
        self.values: torch.Tensor | None = None

    def __call__(self, _mod: nn.Module, _inp: object, out: object) -> torch.Tensor | None:
        if not isinstance(out, torch.Tensor):
            raise InputError(f"the layer's output is a {type(out).__name__}, not a tensor")
        self.calls += 1
        if self.keep:
            self.output = out.detach().float().clone()
        if self.units is None or self.calls != self.last:
            return None
        out = out.clone()
        self.layout.to_units(out)[:, self.units] = self.values.to(out.dtype).view(-1, 1, 1)
        return out


def labelled_images(truth: np.ndarray) -> np.ndarray:
    """The images with a true class (InputError when there are none: nothing to measure)."""
    labelled = np.flatnonzero(np.asarray(truth) >= 0)
    if not len(labelled):
        raise InputError("no image's scene label names one of the model's classes: nothing to measure "
                         "(a label map CSV label,class can match them)")
    return labelled


def _logits(out: object, n: int, model: LoadedModel) -> torch.Tensor:
    if not isinstance(out, torch.Tensor):
        raise InputError(f"{model.name}: the output is a {type(out).__name__}, not a tensor of class scores")
    return out.reshape(n, -1).float()


def _largest_difference(a: torch.Tensor, b: torch.Tensor) -> float:
    """max |a - b| relative to max(1, max |b|)."""
    return float((a - b).abs().max()) / max(1.0, float(b.abs().max()))


class LayerAblation:
    """A layer of a model ready for ablation on the labelled images of a probing dataset (see the module docstring).

    Construction runs one forward pass over CHECK_IMAGES images; `run` then costs one tail pass (or one full
    forward) per group over the labelled images. The first `run` also measures the model unablated."""

    def __init__(self, model: LoadedModel, layer: str, activations: np.ndarray, images: ImageDataset,
                 truth: np.ndarray, class_names: Sequence[str], *, mode: str = "zero", path: str = "auto",
                 batch_size: int = 64, model_info: dict | None = None, dataset_info: dict | None = None) -> None:
        if mode not in MODES:
            raise InputError(f"ablation mode {mode!r}: expected one of {', '.join(MODES)}")
        if path not in PATHS:
            raise InputError(f"ablation path {path!r}: expected one of {', '.join(PATHS)}")
        if not model.hookable:
            raise InputError(f"{model.name}: TorchScript models run no forward hooks, so no unit inside can be ablated")
        if activations.ndim != 4:
            raise InputError(f"activations must be (images, units, h, w), got shape {activations.shape}")
        truth = np.asarray(truth, np.int64)
        if not len(activations) == images.n_images == len(truth):
            raise InputError(f"{len(activations)} activation rows, {images.n_images} images and {len(truth)} true "
                             "labels: they must be the same images")
        if truth.max(initial=-1) >= len(class_names):
            raise InputError(f"true class {truth.max()} but the model has {len(class_names)} class names")
        self.labelled = labelled_images(truth)
        self.model, self.layer, self.activations, self.images = model, layer, activations, images
        self.truth, self.class_names, self.mode = truth, list(class_names), mode
        self.batch_size = max(1, int(batch_size))
        self.model_info, self.dataset_info = model_info or {}, dataset_info or {}
        self.rows = np.unique(truth[self.labelled])  # the evaluated classes (model output indices)
        self._row_of = np.full(len(class_names), -1, np.int64)
        self._row_of[self.rows] = np.arange(len(self.rows))
        self.layout = layer_layout(model, layer)
        self._hook = _LayerHook(self.layout)
        self._before: tuple[np.ndarray, np.ndarray] | None = None
        self._buffer: torch.Tensor | None = None  # the tail's input, one copy of a batch per ablation, reused
        self.tail: nn.Module | None = None
        self.path, self.path_note = "hook", ""
        self._check(path)
        self.values = self._unit_values()

    @property
    def n_units(self) -> int:
        return int(self.activations.shape[1])

    # ---- setup --------------------------------------------------------------------------------------------------

    def _check(self, path: str) -> None:
        """One forward pass: the layer's shape and calls per pass, the activations checked against it, the tail."""
        model, device = self.model, self.model.device
        idx = self.labelled[:CHECK_IMAGES]
        x = model.preprocess([self.images.load_image(int(i)) for i in idx], device=device)
        hook = self._hook
        hook.keep, hook.calls = True, 0
        with model.lock, torch.inference_mode():
            handle = self._module().register_forward_hook(hook)
            try:
                logits = _logits(run_model(model, x), len(idx), model)
            finally:
                handle.remove()
                hook.keep = False
            if hook.output is None:
                raise InputError(f"{model.name}: layer {self.layer!r} did not run in the forward pass")
            output, hook.output = hook.output, None
            hook.last = hook.calls
            if logits.shape[1] != len(self.class_names):
                raise InputError(f"{model.name} has {logits.shape[1]} outputs but {len(self.class_names)} class names")
            self.layer_shape = tuple(output.shape[1:])
            problem = self.layout.problem(self.layer_shape)
            if problem:
                raise InputError(f"{model.name}: layer {self.layer!r}: {problem}")
            units = self.layout.to_units(output)
            cached = np.asarray(self.activations[idx], dtype=np.float32)
            if cached.shape[1:] != units.shape[1:]:
                raise InputError(f"activations of shape {cached.shape[1:]} per image, but layer {self.layer!r} "
                                 f"gives {tuple(units.shape[1:])} units x positions on these images")
            mismatch = _largest_difference(torch.from_numpy(cached).to(device), units)
            if mismatch > _MATCH:
                raise InputError(f"the activations are not layer {self.layer!r} of {model.name} on these images "
                                 f"(relative difference {mismatch:.3g}): extracted from another model, layer or "
                                 "preprocessing?")
            if path == "hook":
                self.path_note = "full forward passes (asked for)"
                return
            if self.layout.kind == "tokens":
                self._check_patches_reach_the_output(x, logits)
                if path == "tail":
                    raise InputError(f"{model.name}: no tail after {self.layer!r}: its cached activations hold no "
                                     "prefix tokens (class token, registers) to run it on")
                self.path_note = "full forward passes: a token layer's tail needs its prefix tokens"
                return
            try:
                tail = tails.split_tail(model.module, self.layer)
                try:
                    rebuilt = tail(output.clone())
                except (RuntimeError, TypeError, ValueError) as exc:
                    raise tails.NotSeparable(f"the separated tail does not run ({first_line(exc)})") from None
                mismatch = _largest_difference(_logits(rebuilt, len(idx), model), logits)
                if mismatch > _TAIL_MATCH:
                    raise tails.NotSeparable(f"the separated tail does not reproduce the model's output (relative "
                                             f"difference {mismatch:.3g})")
            except tails.NotSeparable as exc:
                if path == "tail":
                    raise InputError(f"{model.name}: no tail after {self.layer!r}: {exc}") from None
                self.path_note = f"full forward passes: {exc}"
                return
        self.tail, self.path, self.path_note = tail, "tail", tails.describe(tail)

    def _check_patches_reach_the_output(self, x: torch.Tensor, logits: torch.Tensor) -> None:
        """Refuse a token layer none of whose patch tokens reach the output (a ViT's last block, when the head reads
        only the class token): every ablation there would measure no change, which looks like a finding."""
        hook = self._hook
        hook.units = torch.arange(self.n_units, device=x.device)
        hook.values = torch.zeros(self.n_units, device=x.device)
        handle = self._module().register_forward_hook(hook)
        try:
            hook.calls = 0
            zeroed = _logits(self.model.module(x), len(x), self.model)
        finally:
            handle.remove()
            hook.units = hook.values = None
        if _largest_difference(zeroed, logits) == 0.0:
            raise InputError(f"{self.model.name}: nothing after layer {self.layer!r} reads its patch tokens (the "
                             "output is the same with all of them zeroed; the head reads the class token): "
                             "ablating its units cannot change the output; choose an earlier block")

    def _module(self) -> nn.Module:
        modules = dict(self.model.module.named_modules())
        if self.layer not in modules or not self.layer:
            raise InputError(f"{self.model.name} has no layer {self.layer!r} (`probescope info` lists them)")
        return modules[self.layer]

    def _unit_values(self) -> torch.Tensor:
        """What an ablated unit is set to: 0, or its mean over every image and position of the dataset."""
        if self.mode == "zero":
            return torch.zeros(self.n_units, device=self.model.device)
        total = np.zeros(self.n_units, np.float64)
        step = max(1, _CHUNK_BYTES // max(1, self.activations[0].nbytes))
        for lo in range(0, len(self.activations), step):
            total += np.asarray(self.activations[lo:lo + step], np.float64).sum(axis=(0, 2, 3))
        count = len(self.activations) * self.activations.shape[2] * self.activations.shape[3]
        return torch.from_numpy(total / count).float().to(self.model.device)

    # ---- running ------------------------------------------------------------------------------------------------

    def run(self, groups: Sequence[UnitGroup], progress: ProgressCallback | None = None,
            cancel: CancelCheck | None = None) -> AblationResult:
        """Ablate each group in turn (the others untouched) and measure every class; raises Cancelled."""
        groups = list(groups)
        for g in groups:
            bad = [u for u in g.units if not 0 <= u < self.n_units]
            if not g.units or bad:
                raise InputError(f"{g.name}: " + (f"unit {bad[0]} out of range (the layer has {self.n_units} units)"
                                                  if bad else "no units"))
        sets: list[tuple[int, ...]] = [g.units for g in groups]
        if self._before is None:
            sets = [(), *sets]
        correct = np.zeros((len(sets), len(self.rows)), np.int64)
        p_true = np.zeros((len(sets), len(self.rows)), np.float64)
        n, done = len(self.labelled), 0
        total = len(sets) * -(-n // self.batch_size)
        with self.model.lock, torch.no_grad():  # not inference_mode: the buffer's version counter is read
            for lo in range(0, n, self.batch_size):
                idx = self.labelled[lo:lo + self.batch_size]
                inputs = self._inputs(idx)
                target = torch.from_numpy(self.truth[idx]).to(self.model.device)
                rows = torch.from_numpy(self._row_of[self.truth[idx]]).to(self.model.device)
                for first, logits in self._ablated_logits(inputs, len(idx), sets, cancel):
                    k = len(logits)
                    right = (logits.argmax(-1) == target).double()  # (k, images)
                    prob = torch.softmax(logits, -1).gather(-1, target.expand(k, -1)[..., None])[..., 0].double()
                    correct[first:first + k] += np.rint(self._per_class(right, rows)).astype(np.int64)
                    p_true[first:first + k] += self._per_class(prob, rows)
                    done += k
                    report(progress, done / total, f"{self.layer}: {len(sets)} ablations, images "
                                                   f"{lo + len(idx)}/{n}")
        self._buffer = None
        images = np.bincount(self._row_of[self.truth[self.labelled]], minlength=len(self.rows))
        p_true /= images
        if self._before is None:
            self._before = (correct[0], p_true[0])
            correct, p_true = correct[1:], p_true[1:]
        return AblationResult(
            layer=self.layer, mode=self.mode, path=self.path, path_note=self.path_note,
            classes=[self.class_names[c] for c in self.rows], class_index=[int(c) for c in self.rows],
            images=images, correct_before=self._before[0].copy(), p_true_before=self._before[1].copy(), groups=groups,
            correct_after=correct, p_true_after=p_true, model=self.model_info, dataset=self.dataset_info)

    def _per_class(self, values: torch.Tensor, rows: torch.Tensor) -> np.ndarray:
        """(sets, images) values summed per class row: (sets, classes) float64."""
        out = torch.zeros(len(values), len(self.rows), dtype=torch.float64, device=values.device)
        return out.index_add_(1, rows, values).cpu().numpy()

    def _inputs(self, idx: np.ndarray) -> torch.Tensor:
        """The tail's input (the cached activations) or the full forward's (the preprocessed images) for `idx`."""
        device = self.model.device
        if self.tail is not None:
            cached = torch.from_numpy(np.asarray(self.activations[idx], dtype=np.float32)).to(device)
            if self.layout.kind == "nhwc":
                return cached.permute(0, 2, 3, 1).contiguous()
            return cached.reshape(len(idx), *self.layer_shape)
        return self.model.preprocess([self.images.load_image(int(i)) for i in idx], device=device)

    def _ablated_logits(self, inputs: torch.Tensor, n: int, sets: list[tuple[int, ...]],
                        cancel: CancelCheck | None) -> Iterator[tuple[int, torch.Tensor]]:
        """(index of the first set, (sets, images, classes) logits) for consecutive chunks of `sets`."""
        if self.tail is None:
            hook = self._hook
            handle = self._module().register_forward_hook(hook)
            try:
                for s, units in enumerate(sets):
                    check_cancel(cancel)
                    hook.calls = 0
                    hook.units = torch.tensor(units, device=inputs.device) if units else None
                    hook.values = self.values[list(units)] if units else None
                    yield s, _logits(self.model.module(inputs), n, self.model)[None]
            finally:
                handle.remove()
                hook.units = hook.values = None
            return
        chunk = min(len(sets), max(1, _CHUNK_BYTES // max(1, inputs.numel() * inputs.element_size())))
        shape = (chunk, *inputs.shape)
        if self._buffer is None or self._buffer.shape != shape:
            self._buffer = torch.empty(shape, device=inputs.device)
        buf = self._buffer
        buf.copy_(inputs.expand_as(buf))
        for first in range(0, len(sets), chunk):
            check_cancel(cancel)
            part = sets[first:first + chunk]
            for k, units in enumerate(part):
                for u in units:
                    self.layout.to_units(buf[k])[:, u].fill_(self.values[u])
            tracked = not buf.is_inference()  # (inference tensors keep no version counter: assume a write)
            version = buf._version if tracked else -1
            out = self.tail(buf[:len(part)].reshape(len(part) * n, *self.layer_shape))
            wrote_input = not tracked or buf._version != version
            yield first, _logits(out, len(part) * n, self.model).reshape(len(part), n, -1)
            # after the caller has used the logits (an identity tail returns its input): undo the ablations, or
            # copy everything again when the tail changed its input in place (a ReLU(inplace=True) first)
            if wrote_input:
                buf.copy_(inputs.expand_as(buf))
            else:
                originals = self.layout.to_units(inputs)
                for k, units in enumerate(part):
                    for u in units:
                        self.layout.to_units(buf[k])[:, u].copy_(originals[:, u])
