"""The image being optimised, as Olah et al. 2017 ("Feature Visualization", Distill) parameterise it: a Fourier
spectrum per channel in decorrelated colour space, mapped to RGB in [0, 1].

- Spectrum (lucid's `fft_image`): real and imaginary parts drawn N(0, 0.01^2); each frequency f scaled by
  1 / max(f, 1 / size)^decay_power (decay 1: every frequency band gets about the same energy, so steps do not pile
  up high-frequency noise), inverted by the unitary 2-d inverse real FFT, divided by 4 (lucid's constant).
- Colour (lucid's `_linear_decorrelate_color`): the three channels are mixed by the square root of ImageNet's colour
  covariance (its SVD factor, columns normalised to the largest norm), then squashed by a sigmoid.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

# sqrt of ImageNet's RGB covariance (lucid's color_correlation_svd_sqrt), normalised by its largest column norm
_COLOR_SQRT = np.array([[0.26, 0.09, 0.02], [0.27, 0.00, -0.05], [0.27, -0.09, 0.03]], np.float32)
COLOR_MIX = _COLOR_SQRT / np.linalg.norm(_COLOR_SQRT, axis=0).max()
INIT_SD = 0.01
SPECTRUM_DIVISOR = 4.0


def spectrum_scale(size: int, decay_power: float) -> np.ndarray:
    """1 / max(|f|, 1/size)^decay for the rfft2 frequencies of a size x size image, (size, size // 2 + 1)."""
    fy = np.fft.fftfreq(size)[:, None]
    fx = np.fft.rfftfreq(size)[None, :]
    return (1.0 / np.maximum(np.sqrt(fx * fx + fy * fy), 1.0 / size) ** decay_power).astype(np.float32)


class FourierImage(nn.Module):
    """A (1, 3, size, size) RGB image in [0, 1] whose parameters are its decorrelated Fourier spectrum."""

    def __init__(self, size: int, generator: torch.Generator, decay_power: float = 1.0, decorrelate: bool = True):
        super().__init__()
        self.size = size
        shape = (1, 3, size, size // 2 + 1, 2)
        self.spectrum = nn.Parameter(torch.randn(shape, generator=generator) * INIT_SD)
        self.register_buffer("scale", torch.from_numpy(spectrum_scale(size, decay_power))[None, None, :, :, None])
        mix = COLOR_MIX if decorrelate else np.eye(3, dtype=np.float32)
        self.register_buffer("mix", torch.from_numpy(np.ascontiguousarray(mix.T)))

    def forward(self) -> torch.Tensor:
        spectrum = torch.view_as_complex(self.spectrum * self.scale)
        image = torch.fft.irfftn(spectrum, s=(self.size, self.size), norm="ortho") / SPECTRUM_DIVISOR
        image = (image.permute(0, 2, 3, 1) @ self.mix).permute(0, 3, 1, 2)
        return torch.sigmoid(image)
