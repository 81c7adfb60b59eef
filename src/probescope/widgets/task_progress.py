"""Status-bar progress for the running task: what it is doing, how far, a cancel button, and a button that opens
the Tasks panel (every running task) when there are several."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QHBoxLayout, QLabel, QProgressBar, QToolButton, QWidget


class TaskProgress(QWidget):
    """Hidden when idle. `show_progress(text, fraction)`; fraction None shows a busy bar. Emits `cancel_requested`."""

    cancel_requested = Signal()
    details_requested = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.label = QLabel()
        self.bar = QProgressBar()
        self.bar.setMaximumWidth(180)
        self.bar.setMaximumHeight(16)
        self.bar.setTextVisible(False)
        self.cancel_button = QToolButton()
        self.cancel_button.setText("Cancel")
        self.cancel_button.setToolTip("Cancel the running task")
        self.tasks_button = QToolButton()
        self.tasks_button.setToolTip("Every running task, with its progress, rate and time left")
        self.tasks_button.clicked.connect(self.details_requested)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.label)
        layout.addWidget(self.bar)
        layout.addWidget(self.cancel_button)
        layout.addWidget(self.tasks_button)
        self.cancel_button.clicked.connect(self.cancel_requested)
        self.hide()

    def show_progress(self, text: str, fraction: float | None, running: int = 1) -> None:
        """The task shown, and `running` tasks in all (the Tasks button lists them)."""
        self.label.setText(text)
        self.tasks_button.setText(f"Tasks ({running})")
        if fraction is None:
            self.bar.setRange(0, 0)
        else:
            self.bar.setRange(0, 1000)
            self.bar.setValue(int(round(1000 * min(max(fraction, 0.0), 1.0))))
        self.show()

    def clear(self) -> None:
        self.hide()
        self.label.clear()
