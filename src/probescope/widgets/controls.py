"""Small form controls built in one call, so panels read as a list of what they offer."""

from __future__ import annotations

from PySide6.QtWidgets import QSpinBox


def spin_box(low: int, high: int, value: int, tooltip: str = "") -> QSpinBox:
    """An integer field limited to [low, high], showing `value`."""
    box = QSpinBox()
    box.setRange(low, high)
    box.setValue(value)
    if tooltip:
        box.setToolTip(tooltip)
    return box
