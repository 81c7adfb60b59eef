"""Small form controls built in one call, so panels read as a list of what they offer."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QSpinBox, QToolButton


def spin_box(low: int, high: int, value: int, tooltip: str = "") -> QSpinBox:
    """An integer field limited to [low, high], showing `value`."""
    box = QSpinBox()
    box.setRange(low, high)
    box.setValue(value)
    if tooltip:
        box.setToolTip(tooltip)
    return box


def menu_button(text: str, entries: Sequence[tuple[str, Callable[[], None]]], tooltip: str = "") -> QToolButton:
    """A button that opens a menu of `entries` (its text, what it does) at the first click."""
    button = QToolButton()
    button.setText(text)
    if tooltip:
        button.setToolTip(tooltip)
    button.setPopupMode(QToolButton.ToolButtonPopupMode.InstantPopup)
    menu = QMenu(button)
    for title, run in entries:
        action = QAction(title, menu)
        action.triggered.connect(run)
        menu.addAction(action)
    button.setMenu(menu)
    return button
