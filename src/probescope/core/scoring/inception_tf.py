"""Inception v3 as ported from TensorFlow's 2015-12-05 graph: the classifier behind published Inception Scores.

It loads `weights-inception-2015-12-05-6726825d.pth` (a state dict; the user supplies the file). Facts of that
layout, as used by torch-fidelity: torchvision-like Inception3 module names (Conv2d_1a_3x3 ... Mixed_7c, fc) with
1008 outputs; BatchNorm eps 1e-3; TensorFlow's average pools exclude the zero padding; the last block pools with
max instead of average; IS uses the logits without the fc bias. Input: uint8 RGB of any size, resized to 299x299
with TensorFlow 1's bilinear rule (source coordinate = out_index * in/out, no half-pixel offset, clamped at the
edge), then (x - 128) / 128.

For speed every BatchNorm is folded into its convolution after loading (same function, one op instead of three),
convolutions run channels-last, and the resize is two small matrix products per batch on the network's device.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from probescope.core.errors import InputError
from probescope.core.models.checkpoint import read_torch_file

INPUT_SIZE = 299
N_CLASSES = 1008
WEIGHTS_FILE_NAME = "weights-inception-2015-12-05-6726825d.pth"
WEIGHTS_URL = "https://github.com/toshas/torch-fidelity/releases/download/v0.2.0/" + WEIGHTS_FILE_NAME


# -- TensorFlow 1 bilinear resize ---------------------------------------------------------------------------------


@lru_cache(maxsize=32)
def tf1_resize_matrix(in_size: int, out_size: int) -> torch.Tensor:
    """(out_size, in_size) float32 interpolation matrix of TF1's resize_bilinear(align_corners=False).

    The source coordinate is computed in float32 as out_index * float32(in/out), like the TF kernel; each output
    mixes floor(coordinate) and the next input pixel (clamped), weighted by the fractional part.
    """
    pos = np.arange(out_size, dtype=np.float32) * np.float32(in_size / out_size)
    lo = pos.astype(np.int64)
    hi = np.minimum(lo + 1, in_size - 1)
    frac = pos - lo.astype(np.float32)
    matrix = np.zeros((out_size, in_size), dtype=np.float32)
    rows = np.arange(out_size)
    np.add.at(matrix, (rows, lo), 1.0 - frac)
    np.add.at(matrix, (rows, hi), frac)
    return torch.from_numpy(matrix)


def tf1_resize(x: torch.Tensor, size: int = INPUT_SIZE) -> torch.Tensor:
    """(m, 3, H, W) float pixel values -> (m, 3, size, size) with TF1's bilinear rule: two matrix products."""
    h, w = x.shape[-2:]
    if (h, w) == (size, size):
        return x  # TF1's rule maps every output pixel onto an input pixel: the identity
    rows = tf1_resize_matrix(h, size).to(x.device, x.dtype)
    cols = tf1_resize_matrix(w, size).to(x.device, x.dtype)
    return rows @ x @ cols.T


def prepare_tf_inception(images: Sequence[np.ndarray]) -> torch.Tensor:
    """uint8 (H, W, 3) images -> the network's input batch (m, 3, H', W'), pixel values 0..255.

    Images of one size travel as uint8 and are resized on the network's device; a batch of mixed sizes is resized
    here, image by image, to 299x299 float32.
    """
    if len({im.shape for im in images}) == 1:
        return torch.from_numpy(np.stack(images)).permute(0, 3, 1, 2)
    return torch.cat([tf1_resize(torch.from_numpy(np.array(im)).permute(2, 0, 1)[None].float()) for im in images])


# -- the network (module names fixed by the weights file) ---------------------------------------------------------


class BasicConv2d(nn.Module):
    """conv (no bias) -> BatchNorm(eps=1e-3) -> ReLU; after `fold()`, one conv with bias -> ReLU."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(out_channels, eps=0.001)
        self.folded: tuple[torch.Tensor, torch.Tensor] | None = None

    def fold(self) -> None:
        scale = self.bn.weight / torch.sqrt(self.bn.running_var + self.bn.eps)
        weight = self.conv.weight * scale[:, None, None, None]
        bias = self.bn.bias - self.bn.running_mean * scale
        self.folded = (weight.detach().contiguous(), bias.detach().contiguous())

    def _apply(self, fn, recurse=True):  # keep the folded tensors on the module's device and dtype
        super()._apply(fn, recurse)
        if self.folded is not None:
            self.folded = (fn(self.folded[0]), fn(self.folded[1]))
        return self

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.folded is None:
            return F.relu(self.bn(self.conv(x)))
        c = self.conv
        return F.relu(F.conv2d(x, self.folded[0], self.folded[1], c.stride, c.padding))


def _avg_pool_tf(x: torch.Tensor) -> torch.Tensor:
    """TensorFlow's 3x3 'SAME' average pool: padding is not counted in the mean."""
    return F.avg_pool2d(x, kernel_size=3, stride=1, padding=1, count_include_pad=False)


def _chain(x: torch.Tensor, layers: Sequence[nn.Module]) -> torch.Tensor:
    for layer in layers:
        x = layer(x)
    return x


class InceptionA(nn.Module):
    def __init__(self, in_channels: int, pool_features: int):
        super().__init__()
        self.branch1x1 = BasicConv2d(in_channels, 64, 1)
        self.branch5x5_1 = BasicConv2d(in_channels, 48, 1)
        self.branch5x5_2 = BasicConv2d(48, 64, 5, padding=2)
        self.branch3x3dbl_1 = BasicConv2d(in_channels, 64, 1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, 3, padding=1)
        self.branch_pool = BasicConv2d(in_channels, pool_features, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat(
            [
                self.branch1x1(x),
                _chain(x, [self.branch5x5_1, self.branch5x5_2]),
                _chain(x, [self.branch3x3dbl_1, self.branch3x3dbl_2, self.branch3x3dbl_3]),
                self.branch_pool(_avg_pool_tf(x)),
            ],
            1,
        )


class InceptionB(nn.Module):
    def __init__(self, in_channels: int):
        super().__init__()
        self.branch3x3 = BasicConv2d(in_channels, 384, 3, stride=2)
        self.branch3x3dbl_1 = BasicConv2d(in_channels, 64, 1)
        self.branch3x3dbl_2 = BasicConv2d(64, 96, 3, padding=1)
        self.branch3x3dbl_3 = BasicConv2d(96, 96, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat(
            [
                self.branch3x3(x),
                _chain(x, [self.branch3x3dbl_1, self.branch3x3dbl_2, self.branch3x3dbl_3]),
                F.max_pool2d(x, kernel_size=3, stride=2),
            ],
            1,
        )


class InceptionC(nn.Module):
    def __init__(self, in_channels: int, channels_7x7: int):
        super().__init__()
        c7 = channels_7x7
        self.branch1x1 = BasicConv2d(in_channels, 192, 1)
        self.branch7x7_1 = BasicConv2d(in_channels, c7, 1)
        self.branch7x7_2 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7_3 = BasicConv2d(c7, 192, (7, 1), padding=(3, 0))
        self.branch7x7dbl_1 = BasicConv2d(in_channels, c7, 1)
        self.branch7x7dbl_2 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_3 = BasicConv2d(c7, c7, (1, 7), padding=(0, 3))
        self.branch7x7dbl_4 = BasicConv2d(c7, c7, (7, 1), padding=(3, 0))
        self.branch7x7dbl_5 = BasicConv2d(c7, 192, (1, 7), padding=(0, 3))
        self.branch_pool = BasicConv2d(in_channels, 192, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        dbl = [getattr(self, f"branch7x7dbl_{k}") for k in range(1, 6)]
        return torch.cat(
            [
                self.branch1x1(x),
                _chain(x, [self.branch7x7_1, self.branch7x7_2, self.branch7x7_3]),
                _chain(x, dbl),
                self.branch_pool(_avg_pool_tf(x)),
            ],
            1,
        )


class InceptionD(nn.Module):
    def __init__(self, in_channels: int):
        super().__init__()
        self.branch3x3_1 = BasicConv2d(in_channels, 192, 1)
        self.branch3x3_2 = BasicConv2d(192, 320, 3, stride=2)
        self.branch7x7x3_1 = BasicConv2d(in_channels, 192, 1)
        self.branch7x7x3_2 = BasicConv2d(192, 192, (1, 7), padding=(0, 3))
        self.branch7x7x3_3 = BasicConv2d(192, 192, (7, 1), padding=(3, 0))
        self.branch7x7x3_4 = BasicConv2d(192, 192, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        seven = [getattr(self, f"branch7x7x3_{k}") for k in range(1, 5)]
        return torch.cat(
            [
                _chain(x, [self.branch3x3_1, self.branch3x3_2]),
                _chain(x, seven),
                F.max_pool2d(x, kernel_size=3, stride=2),
            ],
            1,
        )


class InceptionE(nn.Module):
    """Mixed_7b pools with TF's average pool, Mixed_7c with a 3x3 max pool (as in the TF graph)."""

    def __init__(self, in_channels: int, max_pool: bool):
        super().__init__()
        self.max_pool = max_pool
        self.branch1x1 = BasicConv2d(in_channels, 320, 1)
        self.branch3x3_1 = BasicConv2d(in_channels, 384, 1)
        self.branch3x3_2a = BasicConv2d(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3_2b = BasicConv2d(384, 384, (3, 1), padding=(1, 0))
        self.branch3x3dbl_1 = BasicConv2d(in_channels, 448, 1)
        self.branch3x3dbl_2 = BasicConv2d(448, 384, 3, padding=1)
        self.branch3x3dbl_3a = BasicConv2d(384, 384, (1, 3), padding=(0, 1))
        self.branch3x3dbl_3b = BasicConv2d(384, 384, (3, 1), padding=(1, 0))
        self.branch_pool = BasicConv2d(in_channels, 192, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        a = self.branch3x3_1(x)
        b = _chain(x, [self.branch3x3dbl_1, self.branch3x3dbl_2])
        pooled = F.max_pool2d(x, kernel_size=3, stride=1, padding=1) if self.max_pool else _avg_pool_tf(x)
        return torch.cat(
            [
                self.branch1x1(x),
                self.branch3x3_2a(a),
                self.branch3x3_2b(a),
                self.branch3x3dbl_3a(b),
                self.branch3x3dbl_3b(b),
                self.branch_pool(pooled),
            ],
            1,
        )


class InceptionV3TF(nn.Module):
    """Input: (N, 3, H, W) RGB pixel values 0..255 (uint8 or float), any size; output: unbiased logits (N, 1008)."""

    def __init__(self):
        super().__init__()
        self.Conv2d_1a_3x3 = BasicConv2d(3, 32, 3, stride=2)
        self.Conv2d_2a_3x3 = BasicConv2d(32, 32, 3)
        self.Conv2d_2b_3x3 = BasicConv2d(32, 64, 3, padding=1)
        self.Conv2d_3b_1x1 = BasicConv2d(64, 80, 1)
        self.Conv2d_4a_3x3 = BasicConv2d(80, 192, 3)
        self.Mixed_5b = InceptionA(192, pool_features=32)
        self.Mixed_5c = InceptionA(256, pool_features=64)
        self.Mixed_5d = InceptionA(288, pool_features=64)
        self.Mixed_6a = InceptionB(288)
        self.Mixed_6b = InceptionC(768, channels_7x7=128)
        self.Mixed_6c = InceptionC(768, channels_7x7=160)
        self.Mixed_6d = InceptionC(768, channels_7x7=160)
        self.Mixed_6e = InceptionC(768, channels_7x7=192)
        self.Mixed_7a = InceptionD(768)
        self.Mixed_7b = InceptionE(1280, max_pool=False)
        self.Mixed_7c = InceptionE(2048, max_pool=True)
        self.fc = nn.Linear(2048, N_CLASSES)

    def features(self, x: torch.Tensor) -> torch.Tensor:
        """The 2048-d pool features (torch-fidelity's '2048', FID's layer)."""
        x = (tf1_resize(x.float()) - 128.0) / 128.0
        x = x.contiguous(memory_format=torch.channels_last)  # NHWC convolutions: about 1.8x faster on CPU
        x = _chain(x, [self.Conv2d_1a_3x3, self.Conv2d_2a_3x3, self.Conv2d_2b_3x3])
        x = F.max_pool2d(x, kernel_size=3, stride=2)
        x = _chain(x, [self.Conv2d_3b_1x1, self.Conv2d_4a_3x3])
        x = F.max_pool2d(x, kernel_size=3, stride=2)
        blocks = [self.Mixed_5b, self.Mixed_5c, self.Mixed_5d, self.Mixed_6a, self.Mixed_6b, self.Mixed_6c]
        blocks += [self.Mixed_6d, self.Mixed_6e, self.Mixed_7a, self.Mixed_7b, self.Mixed_7c]
        x = _chain(x, blocks)
        return torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.features_and_logits(x)[1]

    def features_and_logits(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One pass: the 2048-d pool features (FID, KID, precision/recall) and the unbiased logits (IS)."""
        features = self.features(x)
        return features, features @ self.fc.weight.T  # IS uses the logits without the fc bias

    def fold_batchnorm(self) -> InceptionV3TF:
        for module in self.modules():
            if isinstance(module, BasicConv2d):
                module.fold()
        return self


def load_inception_tf(weights_path: str | Path, device: str = "cpu") -> InceptionV3TF:
    """The network with the file's weights, BatchNorm folded, in eval mode on `device`.

    Raises InputError when the file is missing or does not have the expected layout.
    """
    path = Path(weights_path)
    if not path.is_file():
        raise InputError(
            f"TF-ported Inception v3 weights file not found; download {WEIGHTS_FILE_NAME} (about 91 MiB) from "
            f"{WEIGHTS_URL} on a machine with internet access and pass its path as inception-tf:<file>",
            path,
        )
    state = read_torch_file(path)
    if isinstance(state, dict) and "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    model = InceptionV3TF()
    if not isinstance(state, dict):
        found = type(state).__name__
        raise InputError(f"expected a state dict in the layout of {WEIGHTS_FILE_NAME}, found {found}", path)
    try:
        model.load_state_dict(state)
    except RuntimeError as exc:
        first = str(exc).splitlines()[1].strip() if len(str(exc).splitlines()) > 1 else str(exc)
        raise InputError(f"not the layout of {WEIGHTS_FILE_NAME} (1008-class TF Inception v3): {first}", path) from None
    model = model.eval().requires_grad_(False).fold_batchnorm()
    return model.to(device=device, memory_format=torch.channels_last)
