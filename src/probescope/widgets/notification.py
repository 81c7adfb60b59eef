"""A non-modal notification: one-line message, an optional "Details" view, dismissable. Never blocks the window."""

from __future__ import annotations

from PySide6.QtCore import QRectF, Qt, Signal
from PySide6.QtGui import QColor, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import (
    QFrame,
    QHBoxLayout,
    QLabel,
    QPlainTextEdit,
    QPushButton,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

BORDER = QColor("#c0392b")


class Notification(QFrame):
    """Shows `message`; when `details` differ from it, a "Details" button reveals them (selectable, copyable)."""

    dismissed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("notification")
        self.message = QLabel()
        self.message.setForegroundRole(QPalette.ColorRole.ToolTipText)  # on the tooltip background, in any theme
        self.message.setWordWrap(True)
        self.message.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.details_button = QPushButton("Details")
        self.details_button.setCheckable(True)
        self.close_button = QToolButton()
        self.close_button.setText("✕")
        self.close_button.setToolTip("Dismiss")
        self.details = QPlainTextEdit()
        self.details.setReadOnly(True)
        self.details.setVisible(False)
        self.details.setMaximumHeight(220)
        row = QHBoxLayout()
        row.addWidget(self.message, 1)
        row.addWidget(self.details_button)
        row.addWidget(self.close_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.addLayout(row)
        layout.addWidget(self.details)
        self.details_button.toggled.connect(self.details.setVisible)
        self.close_button.clicked.connect(self.dismiss)
        self.hide()

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802
        """The tooltip background with a red border, from the palette at each paint (a style sheet's palette()
        is read once: after a theme switch the banner kept the old theme's background)."""
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        painter.setPen(QPen(BORDER, 1))
        painter.setBrush(self.palette().color(QPalette.ColorRole.ToolTipBase))
        painter.drawRoundedRect(QRectF(self.rect()).adjusted(0.5, 0.5, -0.5, -0.5), 4, 4)
        painter.end()

    def show_message(self, message: str, details: str = "") -> None:
        self.message.setText(message)
        self.details.setPlainText(details)
        has_details = bool(details) and details.strip() != message.strip()
        self.details_button.setVisible(has_details)
        self.details_button.setChecked(False)
        self.show()

    def dismiss(self) -> None:
        self.hide()
        self.dismissed.emit()
