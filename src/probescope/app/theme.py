"""Light and dark themes; 'system' follows the desktop's colour scheme and its changes.

Fusion style with an explicit palette, so both themes look the same on every platform and offscreen. Views
that draw their own colours (plots) read them from the application palette.
"""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QColor, QGuiApplication, QPalette
from PySide6.QtWidgets import QApplication

_DARK = {
    QPalette.ColorRole.Window: "#2b2d30",
    QPalette.ColorRole.WindowText: "#dfe1e5",
    QPalette.ColorRole.Base: "#1e1f22",
    QPalette.ColorRole.AlternateBase: "#26282b",
    QPalette.ColorRole.ToolTipBase: "#3c3f41",
    QPalette.ColorRole.ToolTipText: "#dfe1e5",
    QPalette.ColorRole.Text: "#dfe1e5",
    QPalette.ColorRole.Button: "#3c3f41",
    QPalette.ColorRole.ButtonText: "#dfe1e5",
    QPalette.ColorRole.BrightText: "#ff6b6b",
    QPalette.ColorRole.Highlight: "#3574f0",
    QPalette.ColorRole.HighlightedText: "#ffffff",
    QPalette.ColorRole.Link: "#589df6",
    QPalette.ColorRole.PlaceholderText: "#9a9da3",  # secondary text: 4.5:1 and more on Window and Base
}


def resolve(theme: str) -> str:
    """'light' or 'dark': 'system' asks the platform (light when it does not say)."""
    if theme in ("light", "dark"):
        return theme
    scheme = QGuiApplication.styleHints().colorScheme()
    return "dark" if scheme == Qt.ColorScheme.Dark else "light"


def palette_for(name: str) -> QPalette:
    app = QApplication.instance()
    palette = app.style().standardPalette()
    palette.setColor(QPalette.ColorRole.PlaceholderText, QColor("#666666"))  # Fusion's grey is 3.4:1 on its Window
    if name == "dark":
        for role, color in _DARK.items():
            palette.setColor(role, QColor(color))
        for role in (QPalette.ColorRole.Text, QPalette.ColorRole.WindowText, QPalette.ColorRole.ButtonText):
            palette.setColor(QPalette.ColorGroup.Disabled, role, QColor("#6f737a"))
    return palette


def apply_theme(app: QApplication, theme: str) -> str:
    """Apply `theme` ('system', 'light' or 'dark'); returns the one in effect. The style is set once: a theme switch
    changes only the palette (setStyle again would make a new Fusion style, delete the one in use and polish every
    widget anew for nothing)."""
    if app.style().name().lower() != "fusion":
        app.setStyle("Fusion")
    name = resolve(theme)
    app.setPalette(palette_for(name))
    return name


