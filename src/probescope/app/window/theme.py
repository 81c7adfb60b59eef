"""Light and dark themes; 'system' follows the desktop's colour scheme and its changes.

Fusion style with an explicit palette, so both themes look the same on every platform and offscreen. Views
that draw their own colours (plots) read them from the application palette. Fusion draws a check box's or radio
button's edge a little darker than the window (1.2:1 on the dark theme's window, 2.2:1 on the light theme's
fields): the style here draws it again in a colour with at least 3:1 against both (WCAG 2.1 non-text contrast).
"""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt
from PySide6.QtGui import QColor, QGuiApplication, QPainter, QPalette, QPen
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleOption

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
# a control's edge: 4.3:1 on the dark window, 5.2:1 on its fields; 3.9:1 on the light window, 4.5:1 on white
EDGE = {"dark": "#8c9096", "light": "#767676"}


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


class EdgedStyle(QProxyStyle):
    """Fusion, with check boxes' and radio buttons' edges drawn in the theme's EDGE colour."""

    def __init__(self) -> None:
        super().__init__("Fusion")
        self.edge = QColor(EDGE["light"])

    def drawPrimitive(self, element, option: QStyleOption, painter: QPainter, widget=None) -> None:  # noqa: N802
        super().drawPrimitive(element, option, painter, widget)
        if element not in (QStyle.PrimitiveElement.PE_IndicatorCheckBox,
                           QStyle.PrimitiveElement.PE_IndicatorRadioButton):
            return
        painter.save()
        painter.setRenderHint(QPainter.RenderHint.Antialiasing, True)
        painter.setPen(QPen(self.edge, 1.0))
        painter.setBrush(Qt.BrushStyle.NoBrush)
        rect = QRectF(option.rect).adjusted(0.5, 0.5, -0.5, -0.5)
        if element == QStyle.PrimitiveElement.PE_IndicatorRadioButton:
            painter.drawEllipse(rect)
        else:
            painter.drawRoundedRect(rect, 1.0, 1.0)
        painter.restore()


def apply_theme(app: QApplication, theme: str) -> str:
    """Apply `theme` ('system', 'light' or 'dark'); returns the one in effect. The style is set once: a theme switch
    changes only the palette and the edge colour (setStyle again would make a new style, delete the one in use and
    polish every widget anew for nothing)."""
    style = app.style()
    if not isinstance(style, EdgedStyle):
        style = EdgedStyle()
        app.setStyle(style)
    name = resolve(theme)
    style.edge = QColor(EDGE[name])
    app.setPalette(palette_for(name))
    return name


