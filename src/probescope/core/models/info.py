"""What a model's layer is, as the layer list shows it: plain values, no torch (the window reads them without it)."""

from __future__ import annotations

from dataclasses import dataclass

from probescope.core.models.layout import Decision, Layout


@dataclass(frozen=True)
class LayerInfo:
    name: str
    kind: str  # module class name
    out_shape: tuple[int, ...] | None  # per image, without the batch axis; None if not run or not a tensor
    calls: int = 1  # times the module ran in one forward pass (the last call's output is the one extracted)
    layout: Decision | None = None  # how its output is read as units (probescope.core.models.layout); None: no tensor

    @property
    def units(self) -> tuple[int, int, int] | None:
        """(units, rows, columns) of its output read with its layout; None when undecided or not a tensor."""
        if not isinstance(self.layout, Layout) or self.out_shape is None or self.layout.problem(self.out_shape):
            return None
        return self.layout.units_shape(self.out_shape)

    @property
    def spatial(self) -> bool:
        """A map of several positions (what dissection needs)."""
        units = self.units
        return units is not None and units[1] * units[2] > 1
