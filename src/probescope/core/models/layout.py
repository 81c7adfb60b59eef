"""How a layer's output is laid out, and the one reading of it as units over an image grid that every consumer uses.

A layer's output per image is read as one of:
- 'nchw'   channels first, (C, h, w): a convolution's map;
- 'nhwc'   channels last, (h, w, C): torchvision's Swin stages, the Linear and LayerNorm inside a ConvNeXt block;
- 'tokens:P:HxW'  a token sequence (P + H*W, C): P prefix tokens (a class token, a distillation token, registers)
           then the patch tokens row by row over an H x W grid (ViT, DeiT, DINOv2, CLIP's visual tower);
- 'flat'   one vector (F,): F units at one position.
Every consumer turns an output into units with `Layout.to_units`: (N, C, h, w), channels first, patch tokens only.
Dissection, the Image view, ablation (which writes through that view, so removing a unit zeroes its channel at
every patch token and nowhere else), drawing and model features therefore agree on what unit k at (y, x) is.

The layout is decided from what the model says (`decide`), never guessed: a layer the model's own statements
and the input's geometry leave ambiguous is refused with the option that settles it (`--layout`). No torch here:
the window shows layouts without it (`to_units` works on any tensor-like with permute/reshape, or a NumPy array).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from probescope.core.errors import InputError

KINDS = ("nchw", "nhwc", "tokens", "flat")
LAYOUT_HELP = "nchw, nhwc, tokens:P:HxW (P prefix tokens, then an H x W grid of patch tokens) or flat"
_TOKENS = re.compile(r"tokens:(\d+):(\d+)x(\d+)")


@dataclass(frozen=True)
class Layout:
    """One of KINDS; a token layout also has its prefix count and its (rows, columns) grid."""

    kind: str
    prefix: int = 0
    grid: tuple[int, int] | None = None

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise InputError(f"unknown layout {self.kind!r} (expected {LAYOUT_HELP})")
        if self.kind == "tokens" and (self.grid is None or min(self.grid) < 1 or self.prefix < 0):
            raise InputError(f"a token layout needs a grid of at least 1x1 and P >= 0, got {self}")

    def __str__(self) -> str:
        if self.kind == "tokens" and self.grid is not None:
            return f"tokens:{self.prefix}:{self.grid[0]}x{self.grid[1]}"
        return self.kind

    @staticmethod
    def parse(text: str) -> Layout:
        """'nchw' | 'nhwc' | 'flat' | 'tokens:P:HxW' (as `--layout` and `str()` write it)."""
        text = text.strip().lower()
        match = _TOKENS.fullmatch(text)
        if match:
            prefix, rows, cols = (int(g) for g in match.groups())
            return Layout("tokens", prefix, (rows, cols))
        if text in ("nchw", "nhwc", "flat"):
            return Layout(text)
        raise InputError(f"bad layout {text!r}: expected {LAYOUT_HELP}")

    def describe(self) -> str:
        """For listings: 'channels first', 'tokens: 1 prefix + 14x14 patches' ..."""
        if self.kind == "tokens" and self.grid is not None:
            return f"tokens: {self.prefix} prefix + {self.grid[0]}x{self.grid[1]} patches"
        return {"nchw": "channels first", "nhwc": "channels last", "flat": "flat"}[self.kind]

    def problem(self, shape: tuple[int, ...]) -> str | None:
        """Why an output of `shape` per image cannot be read with this layout (None when it can)."""
        want = {"nchw": 3, "nhwc": 3, "tokens": 2, "flat": 1}[self.kind]
        if len(shape) != want:
            return f"a {'x'.join(map(str, shape))} output per image is not {self.kind} ({want} axes)"
        if self.kind == "tokens" and self.grid is not None:
            tokens = self.prefix + self.grid[0] * self.grid[1]
            if shape[0] != tokens:
                return (f"{shape[0]} tokens per image, but layout {self} means {self.prefix} + "
                        f"{self.grid[0]}*{self.grid[1]} = {tokens}")
        return None

    def units_shape(self, shape: tuple[int, ...]) -> tuple[int, int, int]:
        """(C, h, w) of the units an output of `shape` per image holds."""
        problem = self.problem(shape)
        if problem:
            raise InputError(problem)
        if self.kind == "nchw":
            return shape[0], shape[1], shape[2]
        if self.kind == "nhwc":
            return shape[2], shape[0], shape[1]
        if self.kind == "tokens" and self.grid is not None:
            return shape[1], self.grid[0], self.grid[1]
        return shape[0], 1, 1

    def to_units(self, batch: Any) -> Any:
        """A batch (N, ...) of outputs as units (N, C, h, w): a view of the same memory (torch) or array (NumPy), so
        writing into it writes the layer's output (the prefix tokens are not in it)."""
        problem = self.problem(tuple(batch.shape[1:]))
        if problem:
            raise InputError(problem)
        n = batch.shape[0]
        if self.kind == "nchw":
            return batch
        if self.kind == "flat":
            return batch.reshape(n, -1, 1, 1)
        if self.kind == "nhwc":
            return _permute(batch, (0, 3, 1, 2))
        rows, cols = self.grid or (0, 0)
        patches = batch[:, self.prefix:].reshape(n, rows, cols, batch.shape[2])
        return _permute(patches, (0, 3, 1, 2))

    def prefix_tokens(self, batch: Any) -> Any:
        """(N, P, C): the prefix tokens of a token batch (the class token first)."""
        if self.kind != "tokens" or self.prefix < 1:
            raise InputError(f"layout {self} has no class (prefix) token")
        return batch[:, :self.prefix]


def _permute(batch: Any, axes: tuple[int, ...]) -> Any:
    return batch.permute(*axes) if hasattr(batch, "permute") else batch.transpose(axes)


# ---- deciding a layer's layout from what the model says ---------------------------------------------------------

@dataclass(frozen=True)
class Undecided:
    """A layer whose layout cannot be decided from the model: why, in one line that says what to pass."""

    reason: str

    def __str__(self) -> str:
        return "?"

    def describe(self) -> str:
        return f"undecided: {self.reason}"


Decision = Layout | Undecided


def on_image_grid(rows: int, cols: int, image: tuple[int, int]) -> bool:
    """Whether a rows x cols map can be an image's grid: the same stride on both axes, within one cell of rounding
    (a map of 7x10 for 224x320 is; 49x64 of windows for 224x224 is not)."""
    height, width = image
    return abs(rows * width - cols * height) <= height + width


def decide(shape: tuple[int, ...] | None, image: tuple[int, int], *, stated: str | None = None,
           tokens: tuple[int, tuple[int, int]] | None = None, batch_first: bool = True) -> Decision | None:
    """The layout of an output of `shape` per image (None: not a tensor) for an image of `image` (H, W) pixels.

    `stated`: 'nchw' or 'nhwc' where the modules that made the output say it (a convolution or pooling makes a
    channels-first map; a Permute moves the channels; Linear and LayerNorm act on the last axis, so a 4-d output of
    theirs is channels last). `tokens`: (P, grid) where the model declares a token sequence (a class token, its
    patch size and input size; timm's num_prefix_tokens and grid_size). The statement must agree with the geometry
    (the map's two spatial axes on the image's grid); with no statement, exactly one reading must fit it."""
    if shape is None:
        return None
    size = "x".join(map(str, shape))
    if not batch_first:
        return Undecided(f"the output's first axis is not the batch (a sequence-first {size} output)")
    if len(shape) == 1:
        return Layout("flat")
    if len(shape) == 3:
        return _decide_map(shape, image, stated, size)
    if len(shape) == 2:
        return _decide_tokens(shape, tokens, size)
    return Undecided(f"a {size} output per image is neither a map nor a token sequence")


def _decide_map(shape: tuple[int, ...], image: tuple[int, int], stated: str | None, size: str) -> Decision:
    fits = {"nchw": on_image_grid(shape[1], shape[2], image), "nhwc": on_image_grid(shape[0], shape[1], image)}
    where = f"{image[0]}x{image[1]}"
    if stated is not None:
        if fits[stated]:
            return Layout(stated)
        return Undecided(f"the modules say {stated}, but {size} read so is not a map of a {where} image "
                         "(windows or groups, not the image's grid?); pass --layout if it is one")
    readings = [kind for kind, fit in fits.items() if fit]
    if len(readings) == 1:
        return Layout(readings[0])
    if not readings:
        return Undecided(f"{size} is neither C x h x w nor h x w x C over a {where} image's grid; pass --layout "
                         "if it is a map")
    return Undecided(f"{size} could be channels first or last and the model does not say which; pass "
                     "--layout nchw or --layout nhwc")


def _decide_tokens(shape: tuple[int, ...], tokens: tuple[int, tuple[int, int]] | None, size: str) -> Decision:
    if tokens is None:
        return Undecided(f"a sequence of {shape[0]} vectors of {shape[1]} and the model declares no token grid; pass "
                         "--layout tokens:P:HxW (P prefix tokens, an H x W grid of patches)")
    prefix, (rows, cols) = tokens
    patches = rows * cols
    readings = [p for p in dict.fromkeys((prefix, 0)) if shape[0] == p + patches]
    if not readings:
        return Undecided(f"{shape[0]} tokens per image, but the model's grid is {prefix} prefix + {rows}x{cols} "
                         "patches; pass --layout tokens:P:HxW if this output is a token map")
    if shape[1] in (prefix + patches, patches):
        return Undecided(f"{size}: tokens and channels have the same count, so which axis is which is not said; "
                         f"pass --layout tokens:{readings[0]}:{rows}x{cols} if the tokens come first")
    return Layout("tokens", readings[0], (rows, cols))
