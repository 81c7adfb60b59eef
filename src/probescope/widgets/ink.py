"""Text colours that mean something (the unit's mask, the explanation, a warning, a method's pick), in a shade for
each theme that keeps a contrast of at least 4.5:1 against the theme's backgrounds (WCAG AA for text).

A colour is looked up from the palette of the widget that shows it, when it is shown and again when the palette
changes (a theme switch), never kept from when the text was made: rich text marks coloured parts with `inked()` and
is shown by an `InkLabel`, which fills the colours in from its palette at each change.
"""

from __future__ import annotations

import re

from PySide6.QtCore import QEvent
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QLabel, QWidget

_INK = {  # role: (on light backgrounds, on dark backgrounds)
    "unit": ("#7a6000", "#e6c200"),  # the unit's mask outline (drawn yellow on the images)
    "concept": ("#006d93", "#3cc0f0"),  # the explanation's mask (drawn cyan)
    "warning": ("#b03020", "#ff7b6b"),  # simulated data, disagreeing triplets, errors, thresholds, marked classes
    "pick": ("#1f6fb2", "#6cb4ff"),  # a method's pick in the beam trace
}
ROLES = tuple(_INK)
_TOKEN = re.compile(r"\{ink:(\w+)\}")


def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def ink(role: str, palette: QPalette | None = None) -> str:
    """The colour of `role` for `palette` (default: the application's), as #rrggbb."""
    light, dark = _INK[role]
    return dark if is_dark(palette or QGuiApplication.palette()) else light


def ink_color(role: str, palette: QPalette | None = None) -> QColor:
    return QColor(ink(role, palette))


def inked(role: str, html: str, tag: str = "span") -> str:
    """`html` in the colour of `role`, as rich text for an `InkLabel` (which fills the colour in)."""
    if role not in _INK:  # (fails here, not silently at display)
        raise KeyError(f"no ink for {role!r}")
    return f"<{tag} style='color:{{ink:{role}}}'>{html}</{tag}>"


def fill_ink(text: str, palette: QPalette) -> str:
    """`text` with each `inked()` colour as `palette`'s theme has it."""
    return _TOKEN.sub(lambda m: ink(m.group(1), palette), text)


class InkLabel(QLabel):
    """A QLabel whose `inked()` parts take their colours from its palette, now and after every palette change."""

    def __init__(self, text: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self._template = ""
        self.setText(text)

    def setText(self, text: str) -> None:  # noqa: N802  (QLabel's name)
        self._template = text
        super().setText(fill_ink(text, self.palette()))

    def clear(self) -> None:
        self._template = ""
        super().clear()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self._template:
            super().setText(fill_ink(self._template, self.palette()))


def readable_on(background: QColor) -> QColor:
    """Black or white, whichever reads better on `background` (at least 4.58:1 on any colour)."""
    black, white = QColor("#000000"), QColor("#ffffff")
    return black if contrast(black, background) >= contrast(white, background) else white


def contrast(a: QColor, b: QColor) -> float:
    """WCAG contrast ratio of two colours (1 to 21)."""

    def luminance(c: QColor) -> float:
        def linear(v: float) -> float:
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

        return 0.2126 * linear(c.redF()) + 0.7152 * linear(c.greenF()) + 0.0722 * linear(c.blueF())

    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)
