"""The seed note's worked example: three classes (beagle, corgi, husky), three images per generator.

Shipped as a built-in probability set so users (and tests) can check the engine against hand-worked numbers:
IS = 2.02 (A: confident, diverse), 1.00 (B: mode collapse), 1.00 (C: unsure), 1.52 (D: partial collapse).
"""

from __future__ import annotations

import numpy as np

from probescope.core.errors import InputError

CLASS_NAMES = ("beagle", "corgi", "husky")

_SHARP = (0.9, 0.05, 0.05)

WORKED_EXAMPLE: dict[str, np.ndarray] = {
    "A": np.array([_SHARP, (0.05, 0.9, 0.05), (0.05, 0.05, 0.9)]),
    "B": np.array([_SHARP] * 3),
    "C": np.full((3, 3), 1.0 / 3.0),
    "D": np.array([_SHARP, _SHARP, (0.05, 0.9, 0.05)]),
}

DESCRIPTIONS = {
    "A": "confident, diverse",
    "B": "mode collapse",
    "C": "unsure",
    "D": "partial collapse",
}

# The note's table, rounded as printed: IS, H(p(y)), mean H(p(y|x)), mean KL (nats).
EXPECTED = {
    "A": (2.02, 1.099, 0.394, 0.704),
    "B": (1.00, 0.394, 0.394, 0.0),
    "C": (1.00, 1.099, 1.099, 0.0),
    "D": (1.52, 0.814, 0.394, 0.420),
}


def worked_example(generator: str) -> np.ndarray:
    """The (3, 3) probability rows of generator 'A'..'D' (a fresh copy)."""
    try:
        return WORKED_EXAMPLE[generator.upper()].copy()
    except KeyError:
        raise InputError(f"the worked example has generators A, B, C, D, not {generator!r}") from None
