"""What a visualisation draws and how (its settings, its direction) and what it found: plain data, without torch,
so the window builds requests and shows results without importing the renderer (render.py)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import numpy as np

from probescope.core.errors import InputError

MAX_STEPS = 10_000
SIZES = (16, 1024)  # smallest and largest image side


@dataclass(frozen=True)
class VisSettings:
    """lucid's defaults: 512 Adam steps at learning rate 0.05, decay power 1, decorrelated colour, the standard
    transformations. `size` 0 takes the model's input size (the demo model 128, torchvision models 224)."""

    steps: int = 512
    learning_rate: float = 0.05
    size: int = 0
    seed: int = 0
    decay_power: float = 1.0
    decorrelate: bool = True
    transforms: bool = True

    def __post_init__(self) -> None:
        if not 1 <= self.steps <= MAX_STEPS:
            raise InputError(f"visualisation steps must be 1 to {MAX_STEPS}, got {self.steps}")
        if not 0 < self.learning_rate <= 10:
            raise InputError(f"the learning rate must lie in (0, 10], got {self.learning_rate}")
        if self.size != 0 and not SIZES[0] <= self.size <= SIZES[1]:
            raise InputError(f"the visualisation size must be 0 (the model's) or {SIZES[0]} to {SIZES[1]}, "
                             f"got {self.size}")
        if not 0 <= self.seed < 2**63:
            raise InputError(f"the seed must be 0 to 2^63 - 1, got {self.seed}")
        if not 0 <= self.decay_power <= 4:
            raise InputError(f"the spectrum's decay power must lie in [0, 4], got {self.decay_power}")


@dataclass(frozen=True)
class Direction:
    """What is maximised: a direction in the layer's channel space, unit-normed, with a name for the views."""

    vector: np.ndarray = field(repr=False)  # (channels,) float32, norm 1
    name: str

    @classmethod
    def of(cls, vector: np.ndarray, name: str) -> Direction:
        v = np.asarray(vector, dtype=np.float64).ravel()
        norm = float(np.linalg.norm(v))
        if not np.isfinite(v).all() or norm == 0:
            raise InputError(f"direction {name!r} must be finite and not zero")
        return cls((v / norm).astype(np.float32), name)

    @classmethod
    def unit(cls, unit: int, n_units: int) -> Direction:
        return cls.units([unit], n_units, f"unit {unit}")

    @classmethod
    def units(cls, units: list[int], n_units: int, name: str | None = None) -> Direction:
        """The units' summed activation (their mean, up to the norm): a group from the table's selection."""
        bad = [u for u in units if not 0 <= u < n_units]
        if not units or bad:
            raise InputError(f"units {bad or units} are not units of a layer of {n_units}")
        v = np.zeros(n_units)
        v[sorted(set(units))] = 1.0
        return cls.of(v, name or "units " + ", ".join(map(str, sorted(set(units)))))

    def key(self) -> str:
        return hashlib.sha256(self.vector.tobytes()).hexdigest()


@dataclass(frozen=True)
class Visualization:
    """The image found, uint8 (size, size, 3), the objective after each step (on the transformed images), and the
    objective and the peak of d . a(p) over positions on the final image as it is (untransformed)."""

    image: np.ndarray
    trace: np.ndarray
    objective: float
    peak: float
    direction: str
    layer: str
    settings: VisSettings
    from_cache: bool = False
