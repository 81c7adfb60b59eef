"""What a model's layer is, as the layer list shows it: plain values, no torch (the window reads them without it)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LayerInfo:
    name: str
    kind: str  # module class name
    out_shape: tuple[int, ...] | None  # per image, without the batch axis; None if not run or not a tensor
    calls: int = 1  # times the module ran in one forward pass (the last call's output is the one extracted)
