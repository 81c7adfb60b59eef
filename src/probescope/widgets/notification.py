"""A non-modal notification: one-line message, an optional "Details" view, dismissable. Never blocks the window."""

from __future__ import annotations

from PySide6.QtCore import Qt, Signal
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


class Notification(QFrame):
    """Shows `message`; when `details` differ from it, a "Details" button reveals them (selectable, copyable)."""

    dismissed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setObjectName("notification")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setStyleSheet("#notification { background: palette(tooltip-base); border: 1px solid #c0392b;"
                           " border-radius: 4px; }")
        self.message = QLabel()
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
