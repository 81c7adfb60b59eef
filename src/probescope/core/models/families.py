"""Model families beyond torchvision, built by their own libraries and filled from a local weights file:

  'timm:NAME:FILE'                   any timm architecture (ViT, DeiT, EVA, ViTs with registers, ConvNeXt, ...)
  'openclip:NAME:FILE'               an OpenCLIP model's visual tower (e.g. ViT-B-32), from a whole CLIP state dict
                                     or the tower's own
  'dinov2:vits14|vitb14|vitl14|vitg14[-reg]:FILE'
                                     Meta's released DINOv2 backbones, in Meta's key layout
                                     (dinov2_vits14_pretrain.pth, dinov2_vits14_reg4_pretrain.pth, ...)

The architecture comes from the library's code, the weights from FILE only: `.safetensors` files are read as data,
other files with torch.load(weights_only=True); neither runs code from the file. Nothing is downloaded: the
libraries are asked for no pretrained weights, and a spec without a readable file names where such weights are
published. Each model's own preprocessing (its mean and std: CLIP's are not ImageNet's; bicubic or bilinear; the
input size it was built for) is taken from the library's configuration of that architecture, and images are
resized to that input size, which a ViT needs: its token grid is fixed by it.
"""

from __future__ import annotations

import contextlib
import logging
import math
import re
import struct
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file
from torch import nn

from probescope.core.data.preprocess import IMAGENET, Preprocess
from probescope.core.errors import InputError, first_line
from probescope.core.files import check_file
from probescope.core.models import checkpoint as ckpt
from probescope.core.models.checkpoint import torchvision_archs

FAMILIES = ("timm", "openclip", "dinov2")
WHERE = {
    "timm": "timm's weights are published on the Hugging Face Hub under timm/NAME (model.safetensors)",
    "openclip": "OpenCLIP's weights are published on the Hugging Face Hub (open_clip_model.safetensors of each "
                "laion/ or timm/ repository) and in the OpenCLIP release pages",
    "dinov2": "Meta publishes the DINOv2 backbones at dl.fbaipublicfiles.com/dinov2/ (e.g. "
              "dinov2_vits14/dinov2_vits14_pretrain.pth) and in the facebookresearch/dinov2 README",
}
DINOV2 = {"vits14": "vit_small_patch14", "vitb14": "vit_base_patch14", "vitl14": "vit_large_patch14",
          "vitg14": "vit_giant_patch14"}
DINOV2_SIZE = 224  # DINOv2's evaluation resolution (a 16 x 16 grid of 14-pixel patches), as torch-fidelity feeds it
SAFETENSORS_HEADER_LIMIT = 100 << 20


def read_weights(path: Path) -> dict[str, torch.Tensor]:
    """A state dict from a safetensors file (data only) or a torch file (weights_only), unwrapped and checked."""
    if is_safetensors(path):
        try:
            return load_file(str(path))
        except (SafetensorError, OSError, ValueError) as exc:
            raise InputError(f"not a readable safetensors file ({first_line(exc)})", path) from None
    state_dict, _meta = ckpt.unwrap_checkpoint(ckpt.read_torch_file(path), path)
    return state_dict


def is_safetensors(path: Path) -> bool:
    """A safetensors file starts with its JSON header's length (8 bytes, little endian) and the header's '{'."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(9)
    except OSError:
        return False
    return len(head) == 9 and head[8:9] == b"{" and 2 <= struct.unpack("<Q", head[:8])[0] <= SAFETENSORS_HEADER_LIMIT


def split_family_spec(family: str, rest: str, spec: str) -> tuple[str, str]:
    """(architecture name, file) of 'family:NAME:FILE'; InputError saying the form when it is not that."""
    name, sep, path = rest.partition(":")
    if not sep or not name or not path:
        forms = {"timm": "timm:NAME:FILE (e.g. timm:vit_base_patch16_224:model.safetensors)",
                 "openclip": "openclip:NAME:FILE (e.g. openclip:ViT-B-32:open_clip_model.safetensors)",
                 "dinov2": "dinov2:vits14|vitb14|vitl14|vitg14[-reg]:FILE "
                           "(e.g. dinov2:vits14:dinov2_vits14_pretrain.pth)"}
        raise InputError(f"bad model spec {spec!r}: expected {forms[family]}; {WHERE[family]}")
    return name, path


def weights_file(family: str, path_text: str) -> Path:
    """The weights file, or one line saying it is missing and where such weights are published."""
    path = Path(path_text).expanduser()
    if not path.is_file():
        raise InputError(f"no such weights file; nothing is downloaded: {WHERE[family]}", path)
    return check_file(path)


def build(family: str, name: str, path: Path, input_size: tuple[int, int] | None) -> dict[str, Any]:
    """The module (eval mode, weights from `path`) and what LoadedModel needs of it: name, arch, preprocess,
    input_size, default_layer, metadata."""
    builders = {"timm": _timm, "openclip": _openclip, "dinov2": _dinov2}
    return builders[family](name, path, input_size)


def _timm(name: str, path: Path, input_size: tuple[int, int] | None, *,
          state_dict: dict[str, torch.Tensor] | None = None, label: str | None = None) -> dict[str, Any]:
    import timm  # (timm: 2.6 s to import after torch, for timm: and dinov2: specs only)

    arch = name.split(".")[0]
    if not timm.is_model(arch):
        raise InputError(f"timm has no architecture {arch!r} (timm.list_models() lists them)", path)
    state_dict = read_weights(path) if state_dict is None else state_dict
    kwargs: dict[str, Any] = {"pretrained": False, "num_classes": _head_classes(state_dict)}
    if input_size is not None:
        kwargs["img_size"] = input_size
    try:
        module = timm.create_model(name, **kwargs)
    except (TypeError, ValueError, RuntimeError) as exc:
        raise InputError(f"timm cannot build {name} ({first_line(exc)})", path) from None
    filtered = _timm_filter(module, state_dict)
    try:
        ckpt.fit_state_dict(module, filtered, name, path)
    except InputError as exc:
        if "pos_embed" not in str(exc):
            raise
        raise InputError(f"{exc}; weights trained for another input size: pass the size they were built for "
                         "(--input-size HxW, e.g. 224x320)") from None  # (the message names the file already)
    cfg = dict(module.pretrained_cfg)
    size = _timm_input_size(module, cfg, input_size)
    fixed = bool(cfg.get("fixed_input_size")) or hasattr(module, "num_prefix_tokens")
    preprocess = _preprocess(f"timm {arch}", cfg.get("mean"), cfg.get("std"), cfg.get("interpolation"),
                             size if fixed else None)
    return {"module": module, "name": label or name, "arch": f"timm:{arch}", "preprocess": preprocess,
            "input_size": size, "default_layer": last_block(module),
            "metadata": {"num_classes": kwargs["num_classes"]} if kwargs["num_classes"] else {}}


def _timm_filter(module: nn.Module, state_dict: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The state dict as timm's own loader adapts it to `module` (position embeddings resampled to its grid,
    DINOv2's and other released layouts renamed): the architecture module's checkpoint_filter_fn."""
    owner = sys.modules.get(type(module).__module__)
    adapt = getattr(owner, "checkpoint_filter_fn", None)
    if adapt is None:
        return state_dict
    try:
        return adapt(dict(state_dict), module)
    except (KeyError, RuntimeError, ValueError, TypeError, AttributeError):
        return state_dict  # the strict fit below names the keys that do not match


def _head_classes(state_dict: dict[str, torch.Tensor]) -> int:
    """The classifier's width where the file holds one ('head.weight', 'head.fc.weight', 'fc.weight'), else 0."""
    for key in ("head.weight", "head.fc.weight", "fc.weight", "classifier.weight", "head.proj.weight"):
        tensor = state_dict.get(key)
        if tensor is not None and tensor.ndim == 2:
            return int(tensor.shape[0])
    return 0


def _timm_input_size(module: nn.Module, cfg: dict[str, Any], asked: tuple[int, int] | None) -> tuple[int, int]:
    if asked is not None:
        return asked
    embed = getattr(module, "patch_embed", None)
    size = getattr(embed, "img_size", None)
    if isinstance(size, (tuple, list)) and len(size) == 2:
        return int(size[0]), int(size[1])
    shape = cfg.get("input_size") or (3, 224, 224)
    return int(shape[1]), int(shape[2])


def _dinov2(name: str, path: Path, input_size: tuple[int, int] | None) -> dict[str, Any]:
    """Meta's DINOv2 backbone, built as timm's equivalent from Meta's keys (`register_tokens` is timm's `reg_token`,
    the SwiGLU `w12`/`w3` its `fc1`/`fc2`; the training-only `mask_token` is dropped), with the position embedding
    (trained at 518 pixels) resampled to the input size by Meta's own rule (`meta_position_embedding`), so the
    features are the ones Meta's hub model (and torch-fidelity's DINOv2 extractor) computes."""
    match = re.fullmatch(r"(vit[sblg]14)(-reg)?", name)
    if match is None:
        raise InputError(f"unknown DINOv2 backbone {name!r}: expected one of {', '.join(DINOV2)}, with -reg for the "
                         "variants with registers; " + WHERE["dinov2"])
    arch = DINOV2[match.group(1)] + ("_reg4" if match.group(2) else "") + "_dinov2"
    state_dict = read_weights(path)
    if "pos_embed" not in state_dict or "cls_token" not in state_dict:
        raise InputError(f"not a DINOv2 backbone in Meta's layout (no pos_embed or cls_token among "
                         f"{len(state_dict)} keys)", path)
    has_registers = "register_tokens" in state_dict
    if has_registers != bool(match.group(2)):
        want = f"dinov2:{match.group(1)}" + ("-reg" if has_registers else "")
        raise InputError(f"the file {'has' if has_registers else 'has no'} register tokens: open it as {want}", path)
    size = input_size or (DINOV2_SIZE, DINOV2_SIZE)
    state_dict = _from_meta_keys(state_dict, size, path)
    return _timm(arch, path, size, state_dict=state_dict, label=f"DINOv2 {name}")


def _from_meta_keys(state: dict[str, torch.Tensor], size: tuple[int, int], path: Path) -> dict[str, torch.Tensor]:
    """Meta's DINOv2 state dict in timm's names, its position embedding resampled for `size`. Meta's models with
    registers add no position to the class token's neighbours (timm's no_embed_class): the class token's position
    is folded into the class token."""
    registers = "register_tokens" in state
    out = {}
    for key, value in state.items():
        if key == "mask_token":
            continue
        key = re.sub(r"^(blocks\.\d+\.mlp\.)w12\.", r"\1fc1.", re.sub(r"^(blocks\.\d+\.mlp\.)w3\.", r"\1fc2.", key))
        out["reg_token" if key == "register_tokens" else key] = value
    pos = out["pos_embed"]
    patch = out["patch_embed.proj.weight"].shape[-1] if "patch_embed.proj.weight" in out else 14
    grid = (size[0] // patch, size[1] // patch)
    resampled = meta_position_embedding(pos[:, 1:], grid, antialias=registers, offset=0.0 if registers else 0.1)
    if resampled is None:
        raise InputError(f"the position embedding {tuple(pos.shape)} is not a square grid after the class token", path)
    if registers:
        out["cls_token"] = out["cls_token"] + pos[:, :1]
        out["pos_embed"] = resampled
    else:
        out["pos_embed"] = torch.cat([pos[:, :1], resampled], dim=1)
    return out


def meta_position_embedding(patches: torch.Tensor, grid: tuple[int, int], *, antialias: bool,
                            offset: float) -> torch.Tensor | None:
    """DINOv2's patch position embeddings (1, M*M, D) resampled to a rows x cols grid as Meta's
    `interpolate_pos_encoding` does on every forward pass: bicubic; with `offset` (0.1 for the models without
    registers, a historical kludge kept for compatibility) the interpolation is given the scale factor
    (grid + offset) / M rather than the output size, which moves the sampling positions slightly; the models with
    registers use the size (offset 0) and antialiasing. None when the tokens are not a square grid."""
    n, dim = patches.shape[1], patches.shape[2]
    side = math.isqrt(n)
    if side * side != n:
        return None
    if grid == (side, side):
        return patches
    square = patches.float().reshape(1, side, side, dim).permute(0, 3, 1, 2)
    if offset:
        scale = ((grid[0] + offset) / side, (grid[1] + offset) / side)
        out = torch.nn.functional.interpolate(square, mode="bicubic", antialias=antialias, scale_factor=scale)
    else:
        out = torch.nn.functional.interpolate(square, mode="bicubic", antialias=antialias, size=grid)
    return out.permute(0, 2, 3, 1).reshape(1, -1, dim).to(patches.dtype)


def _openclip(name: str, path: Path, input_size: tuple[int, int] | None) -> dict[str, Any]:
    import open_clip  # (open_clip: 3 s to import after torch, for openclip: specs only)

    if name.startswith(("hf-hub:", "local-dir:")) or name not in open_clip.list_models():
        raise InputError(f"OpenCLIP has no built-in architecture {name!r} (open_clip.list_models() lists them; "
                         "hub names would download their configuration)", path)
    if input_size is not None:
        raise InputError("an OpenCLIP tower runs at the input size it was trained for: leave out the input size")
    state_dict = read_weights(path)
    visual = {k[len("visual."):]: v for k, v in state_dict.items() if k.startswith("visual.")}
    try:
        with _quiet("root"):  # its 'No pretrained weights loaded' warning: the weights come from `path` next
            model = open_clip.create_model(name, pretrained=None, device="cpu")
    except (RuntimeError, ValueError, KeyError) as exc:
        raise InputError(f"OpenCLIP cannot build {name} ({first_line(exc)})", path) from None
    tower = model.visual
    ckpt.fit_state_dict(tower, visual or state_dict, f"OpenCLIP {name} visual tower", path)
    cfg = getattr(tower, "preprocess_cfg", {}) or {}
    size = tower.image_size if isinstance(tower.image_size, (tuple, list)) else (tower.image_size,) * 2
    size = (int(size[0]), int(size[1]))
    preprocess = _preprocess(f"openclip {name}", cfg.get("mean", open_clip.OPENAI_DATASET_MEAN),
                             cfg.get("std", open_clip.OPENAI_DATASET_STD), cfg.get("interpolation", "bicubic"), size)
    return {"module": tower, "name": f"OpenCLIP {name} (visual)", "arch": f"openclip:{name}",
            "preprocess": preprocess, "input_size": size, "default_layer": last_block(tower),
            "metadata": {"embedding_dim": int(getattr(tower, "output_dim", 0) or 0)}}


@contextlib.contextmanager
def _quiet(logger: str) -> Iterator[None]:
    log = logging.getLogger(logger)
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        log.setLevel(level)


def _preprocess(name: str, mean: Any, std: Any, interpolation: Any, size: tuple[int, int] | None) -> Preprocess:
    """The library's normalisation ([0, 1] scale) on 0-255 pixels; a stretch to `size` (a fixed input) with its
    interpolation (bicubic where it says so, else bilinear)."""
    base = Preprocess(name, mean=tuple(float(m) * 255 for m in mean) if mean else IMAGENET.mean,  # type: ignore
                      std=tuple(float(s) * 255 for s in std) if std else IMAGENET.std)
    if size is None:
        return base
    mode = "bicubic" if str(interpolation) == "bicubic" else "bilinear"
    return base.with_resize("stretch", size[0], size[1], interpolation=mode)


def last_block(module: nn.Module) -> str | None:
    """The last block of a transformer's (or a staged network's) main stack: blocks.N, transformer.resblocks.N,
    stages.N."""
    names = [name for name, _ in module.named_modules()]
    for stack in ("blocks", "transformer.resblocks", "stages", "encoder.layers"):
        members = [n for n in names if re.fullmatch(re.escape(stack) + r"\.[^.]+", n)]
        if members:
            return members[-1]
    return None


def model_architectures() -> dict[str, tuple[str, ...]]:
    """The architecture names each named kind of spec takes: torchvision's classifiers, timm's, OpenCLIP's and the
    DINOv2 backbones (what the Open Model dialog offers)."""
    # (timm and open_clip: 5 s to import after torch, for the Open Model dialog's lists only)
    import open_clip
    import timm

    dinov2 = tuple(name + suffix for name in DINOV2 for suffix in ("", "-reg"))
    return {"torchvision": torchvision_archs(), "timm": tuple(timm.list_models()),
            "openclip": tuple(open_clip.list_models()), "dinov2": dinov2}
