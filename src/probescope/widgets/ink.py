"""Text colours that mean something (the unit's mask, the explanation, a warning, a method's pick), in a shade for
each theme that keeps a contrast of at least 4.5:1 against the theme's backgrounds (WCAG AA for text)."""

from __future__ import annotations

from PySide6.QtGui import QColor, QGuiApplication, QPalette

_INK = {  # role: (on light backgrounds, on dark backgrounds)
    "unit": ("#7a6000", "#e6c200"),  # the unit's mask outline (drawn yellow on the images)
    "concept": ("#006d93", "#3cc0f0"),  # the explanation's mask (drawn cyan)
    "warning": ("#b03020", "#ff7b6b"),  # simulated data, disagreeing triplets, errors
    "pick": ("#1f6fb2", "#6cb4ff"),  # a method's pick in the beam trace
}


def is_dark(palette: QPalette) -> bool:
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def ink(role: str, palette: QPalette | None = None) -> str:
    """The colour of `role` for `palette` (default: the application's), as #rrggbb."""
    light, dark = _INK[role]
    return dark if is_dark(palette or QGuiApplication.palette()) else light


def ink_color(role: str, palette: QPalette | None = None) -> QColor:
    return QColor(ink(role, palette))


def contrast(a: QColor, b: QColor) -> float:
    """WCAG contrast ratio of two colours (1 to 21)."""

    def luminance(c: QColor) -> float:
        def linear(v: float) -> float:
            return v / 12.92 if v <= 0.03928 else ((v + 0.055) / 1.055) ** 2.4

        return 0.2126 * linear(c.redF()) + 0.7152 * linear(c.greenF()) + 0.0722 * linear(c.blueF())

    la, lb = sorted((luminance(a), luminance(b)), reverse=True)
    return (la + 0.05) / (lb + 0.05)
