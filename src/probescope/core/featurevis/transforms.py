"""The random transformations applied before every step (lucid's `standard_transforms`), so that only images
whose effect survives small shifts, zooms and turns are found, not adversarial pixel patterns:

    pad 12 px with grey (0.5), jitter 8, scale by one of 0.90, 0.92, ..., 1.10, rotate by one of -10..10 degrees
    (0 five times more often), jitter 4

Jitter d crops a random (h - d) x (w - d) window (lucid's random crop); scaling resizes the whole image bilinearly;
rotation turns it about its centre, filling the corners with 0. Every draw comes from the caller's torch.Generator,
so a seed fixes the whole sequence.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F

PAD = 12
JITTERS = (8, 4)
SCALES = tuple(1 + (i - 5) / 50 for i in range(11))
ANGLES = tuple(range(-10, 11)) + (0,) * 5


def _choice(options: tuple, generator: torch.Generator):
    return options[int(torch.randint(len(options), (1,), generator=generator))]


def jitter(image: torch.Tensor, d: int, generator: torch.Generator) -> torch.Tensor:
    """A random crop d pixels smaller in each direction."""
    dy, dx = (int(v) for v in torch.randint(d + 1, (2,), generator=generator))
    h, w = image.shape[-2:]
    return image[..., dy:dy + h - d, dx:dx + w - d]


def scale(image: torch.Tensor, factor: float) -> torch.Tensor:
    h, w = image.shape[-2:]
    size = (max(1, math.ceil(factor * h)), max(1, math.ceil(factor * w)))
    return F.interpolate(image, size=size, mode="bilinear", align_corners=False)


def rotate(image: torch.Tensor, degrees: float) -> torch.Tensor:
    """Turned about the centre (bilinear), zeros where the turned image does not reach."""
    if degrees == 0:
        return image
    a = math.radians(degrees)
    theta = torch.tensor([[math.cos(a), -math.sin(a), 0.0], [math.sin(a), math.cos(a), 0.0]], dtype=image.dtype,
                         device=image.device)[None]
    grid = F.affine_grid(theta, list(image.shape), align_corners=False)
    return F.grid_sample(image, grid, mode="bilinear", padding_mode="zeros", align_corners=False)


def standard(image: torch.Tensor, generator: torch.Generator) -> torch.Tensor:
    """lucid's standard transformations, in order (see the module docstring)."""
    image = F.pad(image, [PAD] * 4, mode="constant", value=0.5)
    image = jitter(image, JITTERS[0], generator)
    image = scale(image, _choice(SCALES, generator))
    image = rotate(image, _choice(ANGLES, generator))
    return jitter(image, JITTERS[1], generator)
