"""A model's layers: their output shapes and layouts, found by one forward pass of two blank images, and the layout
every consumer reads a layer with (`layer_layout`).

What the modules say about a 4-d output, in the order they ran (see probescope.core.models.layout.decide):
- convolutions, 2-d norms and poolings make channels-first maps;
- a Permute module (torchvision's Swin and ConvNeXt) moves the channels last or back first;
- Linear, LayerNorm and RMSNorm act on the last axis, so a 4-d output of theirs is channels last;
- a module whose output has its predecessor's shape (an activation, dropout, attention over windows) keeps its
  predecessor's statement; a container says what its last module said when it ends with that module's shape.
A token sequence's grid is what the model declares: torchvision's ViT (class token, patch size), timm's
(`num_prefix_tokens`, `patch_embed`), OpenCLIP's visual tower (`class_embedding`, `grid_size`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from probescope.core.errors import InputError, first_line
from probescope.core.models.exported import module_kind
from probescope.core.models.info import LayerInfo
from probescope.core.models.layout import Decision, Layout, Undecided, decide
from probescope.core.models.loading import TORCHSCRIPT_OUTPUT, LoadedModel

CHANNELS_FIRST_KINDS = frozenset({
    "Conv2d", "ConvTranspose2d", "LazyConv2d", "BatchNorm2d", "SyncBatchNorm", "InstanceNorm2d", "GroupNorm",
    "LocalResponseNorm", "LayerNorm2d", "MaxPool2d", "AvgPool2d", "AdaptiveAvgPool2d", "AdaptiveMaxPool2d",
    "LPPool2d", "Upsample", "UpsamplingBilinear2d", "UpsamplingNearest2d", "PixelShuffle", "ZeroPad2d",
    "ReflectionPad2d", "Conv2dNormActivation", "SqueezeExcitation", "BasicConv2d",
})
LAST_AXIS_KINDS = frozenset({"Linear", "LayerNorm", "RMSNorm"})
PROBE_BATCH = 2  # two images: an output whose first axis is not the batch shows it


@dataclass
class _Ran:
    name: str
    shape: tuple[int, ...] | None  # per image
    stated: str | None = None


def declared_tokens(module: nn.Module, image: tuple[int, int]) -> tuple[int, tuple[int, int]] | None:
    """(prefix tokens, (rows, columns) of patches) where the model (or its first submodule that says) declares a
    token sequence for an image of `image` pixels; None where nothing does."""
    for _name, sub in module.named_modules():
        found = _tokens_of(sub, image)
        if found is not None:
            return found
    return None


def _tokens_of(sub: nn.Module, image: tuple[int, int]) -> tuple[int, tuple[int, int]] | None:
    height, width = image
    embed = getattr(sub, "patch_embed", None)
    if isinstance(getattr(sub, "num_prefix_tokens", None), int) and embed is not None:  # timm
        patch = getattr(embed, "patch_size", None)
        if isinstance(patch, (tuple, list)) and len(patch) == 2:
            pad = bool(getattr(embed, "dynamic_img_pad", False))
            rows, cols = (-(-height // patch[0]), -(-width // patch[1])) if pad else (height // patch[0],
                                                                                    width // patch[1])
            return int(sub.num_prefix_tokens), (rows, cols)
    if isinstance(getattr(sub, "class_token", None), nn.Parameter) and isinstance(getattr(sub, "patch_size", None),
                                                                                  int):  # torchvision
        return 1, (height // sub.patch_size, width // sub.patch_size)
    if isinstance(getattr(sub, "class_embedding", None), nn.Parameter):  # OpenCLIP's VisionTransformer
        patch = getattr(sub, "patch_size", None)
        if isinstance(patch, (tuple, list)) and len(patch) == 2:
            return 1, (height // patch[0], width // patch[1])
    return None


def _stated(sub: nn.Module, kind: str, shape: tuple[int, ...] | None, before: _Ran | None) -> str | None:
    """What a module that ran with no submodule running says of its output's layout (see the module docstring)."""
    if shape is None or len(shape) != 3:
        return None
    if kind in CHANNELS_FIRST_KINDS:
        return "nchw"
    if kind == "Permute":
        dims = [int(d) for d in getattr(sub, "dims", ())]
        return {(0, 2, 3, 1): "nhwc", (0, 3, 1, 2): "nchw"}.get(tuple(dims))
    if kind in LAST_AXIS_KINDS:
        normalized = getattr(sub, "normalized_shape", (shape[-1],))
        return "nhwc" if tuple(normalized) == (shape[-1],) else None
    if before is not None and before.shape == shape:
        return before.stated
    return None


def list_layers(model: LoadedModel, input_size: tuple[int, int] | None = None) -> list[LayerInfo]:
    """Named modules with their output shapes and layouts (in module order). At the model's own input size the
    decisions are kept on the model (`model.decisions`), for `layer_layout`."""
    image = input_size or model.input_size
    x = torch.zeros(PROBE_BATCH, 3, *image, device=model.device)
    if not model.hookable:
        with torch.inference_mode():
            out = model.module(x)
        shape = tuple(out.shape[1:]) if isinstance(out, torch.Tensor) else None
        layers = [LayerInfo(TORCHSCRIPT_OUTPUT, type(model.module).__name__, shape, 1, decide(shape, image))]
        return _kept(model, layers, image)
    modules = {name: sub for name, sub in model.module.named_modules() if name}
    ran: dict[str, _Ran] = {}
    order: list[_Ran] = []
    calls: dict[str, int] = {}
    batch_first: dict[str, bool] = {}
    handles = []
    for name, sub in modules.items():

        def hook(_mod: nn.Module, _inp: object, out: object, name: str = name) -> None:
            tensor = isinstance(out, torch.Tensor)
            batch_first[name] = tensor and out.ndim >= 1 and out.shape[0] == PROBE_BATCH
            shape = tuple(out.shape[1:]) if tensor else None
            calls[name] = calls.get(name, 0) + 1
            ran[name] = _Ran(name, shape)
            order.append(ran[name])

        handles.append(sub.register_forward_hook(hook))
    try:
        with model.lock, torch.inference_mode():
            model.module(x)
    except RuntimeError as exc:
        raise InputError(f"{model.name}: a {image[0]}x{image[1]} input does not run ({first_line(exc)})",
                         model.source) from None
    finally:
        for handle in handles:
            handle.remove()
    _state(modules, order)
    tokens = declared_tokens(model.module, image)
    layers = []
    for name, sub in modules.items():
        done = ran.get(name)
        shape = done.shape if done else None
        decision = decide(shape, image, stated=done.stated if done else None, tokens=tokens,
                          batch_first=batch_first.get(name, True))
        if decision is None:
            decision = Undecided("its output is not a tensor" if done else "it does not run in a forward pass")
        given = model.layouts.get(name)
        if given is not None and shape is not None:  # the user's word, where it fits the output
            problem = given.problem(shape)
            decision = given if problem is None else Undecided(f"the layout given, {given}, does not fit: {problem}")
        layers.append(LayerInfo(name, module_kind(sub), shape, calls.get(name, 0), decision))
    return _kept(model, layers, image)


def _state(modules: dict[str, nn.Module], order: list[_Ran]) -> None:
    """Each module's statement, in the order the modules finished (a container after everything inside it)."""
    before: _Ran | None = None
    inside: dict[str, _Ran] = {}  # container name -> the last module that finished inside it
    for done in order:
        last = inside.get(done.name)  # None: nothing ran inside it, it is a leaf
        if last is None:
            done.stated = _stated(modules[done.name], module_kind(modules[done.name]), done.shape, before)
            before = done
        else:
            done.stated = last.stated if last.shape == done.shape else None
        parts = done.name.split(".")
        for k in range(1, len(parts)):
            inside[".".join(parts[:k])] = done


def _kept(model: LoadedModel, layers: list[LayerInfo], image: tuple[int, int]) -> list[LayerInfo]:
    if image == tuple(model.input_size):
        model.decisions = {info.name: info.layout for info in layers}
    return layers


def layer_layout(model: LoadedModel, layer: str) -> Layout:
    """How `layer` of `model` is read: the user's layout for it when one was given (checked against its output when
    the layer was listed), else the one its modules decide; InputError saying what to pass when none is decided."""
    given = model.layouts.get(layer)
    if given is not None:
        return given  # the user's word (no pass to decide): its fit to the output is checked on every batch
    if model.decisions is None:
        list_layers(model)
    decision: Decision | None = (model.decisions or {}).get(layer)
    if isinstance(decision, Layout):
        return decision
    if isinstance(decision, Undecided):
        raise InputError(f"{model.name}: layer {layer!r}: {decision.reason} (`probescope info` lists each layer's "
                         "output and layout)")
    return Layout("nchw")  # not among the listed names: the caller's own check names the missing layer

