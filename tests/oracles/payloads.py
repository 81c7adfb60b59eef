"""Hostile model files for the trust tests: each writes a marker file when its code runs, so a test can tell whether
anything of it ran. No shell, no network: the payloads only create the marker."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


class _ForwardWrites(nn.Module):
    """A model whose forward writes 4 bytes into `marker` (torch.from_file maps, and creates, files)."""

    def __init__(self, marker: str, generator: bool):
        super().__init__()
        self.marker = marker
        self.generator = generator

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        written = torch.from_file(self.marker, shared=True, size=4, dtype=torch.uint8)
        written.fill_(33)
        if self.generator:  # G(z) -> (m, 3, 8, 8) images
            out = torch.tanh(x[:, :3, None, None].expand(-1, 3, 8, 8))
        else:  # (m, 3, H, W) images -> (m, 3) logits
            out = x.float().mean(dim=(2, 3))
        return out + written.sum().float() * 0


def scripted_payload(path: Path, marker: Path, generator: bool = False) -> Path:
    """A TorchScript model (or generator) that writes `marker` when it runs."""
    torch.jit.script(_ForwardWrites(str(marker), generator)).save(str(path))
    return path


class _OpensFile:
    """Unpickling this calls open(marker, 'w'): the file appears."""

    def __init__(self, marker: str):
        self.marker = marker

    def __reduce__(self):
        return (open, (self.marker, "w"))


def pickled_payload(path: Path, marker: Path) -> Path:
    """A torch.save file whose unpickling creates `marker` (what a hostile whole-model pickle can do)."""
    torch.save({"model": _OpensFile(str(marker))}, path)
    return path
