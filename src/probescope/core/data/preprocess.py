"""How uint8 RGB images become a model's input tensor: a per-model setting, never a hidden constant.

Two normalisation recipes are in use for the models that get dissected:
- 'classic': the Caffe-era recipe of the original Network Dissection code: subtract the BGR mean
  [109.5388, 118.6897, 124.6901], flip to RGB, divide by 255 * 0.224 (one scale for all channels).
- 'imagenet': torchvision's ImageNet mean (0.485, 0.456, 0.406) and std (0.229, 0.224, 0.225) on [0, 1] pixels.
Both are stored here as an RGB mean and std on the 0-255 scale, so `x = (pixel - mean) / std`.

Resize policy: 'native' feeds images at their own size (the dissection protocol: no resize, no crop);
'stretch' resizes to size x size (size x width where a model's fixed input is not square, e.g. a ViT built for
224 x 320); 'center_crop' takes the largest centred square and resizes it to size x size (the aspect-preserving
recipe used for feature extraction in similarity studies). Resizing is antialiased bilinear unless the model's own
preprocessing says bicubic (timm's and OpenCLIP's ViTs, torchvision's Swin weights).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

import numpy as np

from probescope.core.bounds import IMAGE_SIDE
from probescope.core.errors import InputError

if TYPE_CHECKING:
    import torch

RESIZE_MODES = ("native", "stretch", "center_crop")
INTERPOLATIONS = ("bilinear", "bicubic")


@dataclass(frozen=True)
class Preprocess:
    """Normalisation (RGB mean/std on the 0-255 scale) plus a resize policy: to `size` rows and `width` columns
    (`width` None: square) with `interpolation`."""

    name: str
    mean: tuple[float, float, float]
    std: tuple[float, float, float]
    resize: str = "native"
    size: int | None = None
    width: int | None = None
    interpolation: str = "bilinear"

    def __post_init__(self) -> None:
        if self.resize not in RESIZE_MODES:
            raise InputError(f"unknown resize mode {self.resize!r} (expected one of {', '.join(RESIZE_MODES)})")
        if self.resize != "native" and (self.size is None or self.size < 1):
            raise InputError(f"resize mode {self.resize!r} needs a positive size")
        if any(s <= 0 for s in self.std):
            raise InputError(f"preprocess {self.name!r}: std must be positive, got {self.std}")
        if self.interpolation not in INTERPOLATIONS:
            raise InputError(f"unknown interpolation {self.interpolation!r} (expected {', '.join(INTERPOLATIONS)})")
        if self.width is not None and (self.resize != "stretch" or self.width < 1):
            raise InputError("a separate width needs the 'stretch' resize mode and a positive width")

    def with_resize(self, resize: str, size: int | None = None, width: int | None = None,
                    interpolation: str | None = None) -> Preprocess:
        """This normalisation with another resize policy (`width` for a non-square stretch)."""
        native = resize == "native"
        return replace(self, resize=resize, size=None if native else size,
                       width=None if native or width == size else width,
                       interpolation=interpolation or self.interpolation)

    @property
    def target(self) -> tuple[int, int] | None:
        """(rows, columns) every image is resized to; None at native size."""
        if self.resize == "native" or self.size is None:
            return None
        return self.size, self.width or self.size

    def key(self) -> str:
        """A stable text that changes whenever the produced tensors would change (used in cache keys)."""
        mean = ",".join(repr(float(m)) for m in self.mean)
        std = ",".join(repr(float(s)) for s in self.std)
        text = f"mean={mean};std={std};resize={self.resize};size={self.size}"
        if self.width is not None:
            text += f";width={self.width}"
        return text if self.interpolation == "bilinear" else f"{text};interpolation={self.interpolation}"

    def describe(self) -> str:
        target = self.target
        where = "native size" if target is None else f"{self.resize} to {target[0]}x{target[1]}"
        if target is not None and self.interpolation != "bilinear":
            where += f", {self.interpolation}"
        mean = ", ".join(f"{m:.4g}" for m in self.mean)
        std = ", ".join(f"{s:.4g}" for s in self.std)
        return f"{self.name} (RGB mean [{mean}], std [{std}], {where})"

    def __call__(
        self, images: np.ndarray | Sequence[np.ndarray], device: str | torch.device | None = None
    ) -> torch.Tensor:
        """uint8 images, (N, H, W, 3) or a sequence of (H, W, 3), to a float32 tensor (N, 3, H', W') on `device`."""
        import torch  # (torch: the window's process holds preprocessing settings without torch)
        import torch.nn.functional as F

        batch = _validated(images)
        mean = torch.tensor(self.mean, dtype=torch.float32, device=device).view(1, 3, 1, 1)
        scale = 1.0 / torch.tensor(self.std, dtype=torch.float32, device=device).view(1, 3, 1, 1)
        if self.resize == "native":
            if not isinstance(batch, np.ndarray):
                shapes = sorted({im.shape for im in batch})
                if len(shapes) > 1:
                    raise InputError(
                        f"images of different sizes {shapes} cannot share a batch at native size; resize them "
                        "(a preprocessing such as imagenet:stretch=N or imagenet:crop=N)"
                    )
                batch = np.stack(batch)
            x = torch.from_numpy(np.require(batch, requirements="CW")).to(device).permute(0, 3, 1, 2).float()
            return ((x - mean) * scale).contiguous()
        out = []
        for im in batch:
            if self.resize == "center_crop":
                h, w = im.shape[:2]
                side = min(h, w)
                top, left = (h - side) // 2, (w - side) // 2
                im = im[top : top + side, left : left + side]
            x = torch.from_numpy(np.require(im, requirements="CW")).to(device).permute(2, 0, 1)[None].float()
            if tuple(x.shape[-2:]) != self.target:
                x = F.interpolate(x, size=self.target, mode=self.interpolation, align_corners=False, antialias=True)
            out.append(x)
        return ((torch.cat(out) - mean) * scale).contiguous()


def _validated(images: np.ndarray | Sequence[np.ndarray]) -> np.ndarray | list[np.ndarray]:
    """A (N, H, W, 3) uint8 array as it is, or a list of (H, W, 3) uint8 arrays; InputError otherwise."""
    if isinstance(images, np.ndarray) and images.ndim == 4:
        if images.dtype != np.uint8 or images.shape[-1] != 3:
            raise InputError(f"images: expected uint8 RGB (N, H, W, 3), got {images.dtype} {images.shape}")
        if len(images) == 0:
            raise InputError("no images to preprocess")
        return images
    batch = list(images)
    if not batch:
        raise InputError("no images to preprocess")
    for i, im in enumerate(batch):
        if not isinstance(im, np.ndarray) or im.dtype != np.uint8 or im.ndim != 3 or im.shape[-1] != 3:
            what = f"{im.dtype} {im.shape}" if isinstance(im, np.ndarray) else type(im).__name__
            raise InputError(f"image {i}: expected uint8 RGB (H, W, 3), got {what}")
    return batch


CLASSIC = Preprocess("classic", mean=(124.6901, 118.6897, 109.5388), std=(255 * 0.224,) * 3)
IMAGENET = Preprocess("imagenet", mean=(0.485 * 255, 0.456 * 255, 0.406 * 255),
                      std=(0.229 * 255, 0.224 * 255, 0.225 * 255))
# OpenAI CLIP's (and OpenCLIP's default) normalisation, on [0, 1] pixels; not ImageNet's
CLIP = Preprocess("clip", mean=(0.48145466 * 255, 0.4578275 * 255, 0.40821073 * 255),
                  std=(0.26862954 * 255, 0.26130258 * 255, 0.27577711 * 255))
PRESETS: dict[str, Preprocess] = {p.name: p for p in (CLASSIC, IMAGENET, CLIP)}


def parse_preprocess(text: str) -> Preprocess:
    """'classic' | 'imagenet' | 'clip', optionally with ':stretch=N' or ':crop=N' (default: native size)."""
    name, _, policy = text.partition(":")
    if name not in PRESETS:
        raise InputError(f"unknown preprocessing {name!r} (expected one of {', '.join(PRESETS)})")
    base = PRESETS[name]
    if not policy or policy == "native":
        return base
    mode, _, size = policy.partition("=")
    modes = {"stretch": "stretch", "crop": "center_crop"}
    if mode not in modes or not size.isdigit():
        raise InputError(f"bad resize policy {policy!r} in {text!r} (expected native, stretch=N or crop=N)")
    return base.with_resize(modes[mode], IMAGE_SIDE.parse(size, f"preprocessing {text!r}"))
