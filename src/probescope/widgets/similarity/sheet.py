"""A sheet of several similarity trials, each a small captioned 3x3 grid, for figures that compare trials."""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QGridLayout, QLabel, QVBoxLayout, QWidget

from probescope.widgets.similarity.trial_grid import TrialGrid


@dataclass(frozen=True)
class SheetTrial:
    """One trial of the sheet: images with captions, pick positions, and a title line above its grid."""

    query: tuple[QImage, str]
    references: list[tuple[QImage, str]]
    choices: list[int]
    title: str


class TrialSheet(QWidget):
    """Up to `columns` x `rows` trials laid out in reading order."""

    def __init__(self, cell_size: int = 64, columns: int = 3, rows: int = 2, parent: QWidget | None = None):
        super().__init__(parent)
        self.capacity = columns * rows
        self.heading = QLabel()
        self.heading.setWordWrap(True)
        self._slots: list[tuple[QLabel, TrialGrid]] = []
        grid = QGridLayout()
        grid.setSpacing(16)
        for k in range(self.capacity):
            title = QLabel()
            title.setAlignment(Qt.AlignmentFlag.AlignCenter)
            title.setWordWrap(True)
            trial = TrialGrid(cell_size)
            box = QWidget()
            inner = QVBoxLayout(box)
            inner.setContentsMargins(0, 0, 0, 0)
            inner.addWidget(title)
            inner.addWidget(trial)
            grid.addWidget(box, k // columns, k % columns)
            self._slots.append((title, trial))
        layout = QVBoxLayout(self)
        layout.addWidget(self.heading)
        layout.addLayout(grid)
        layout.addStretch(1)
        self.shown = 0

    def set_trials(self, trials: list[SheetTrial], heading: str = "") -> None:
        if len(trials) > self.capacity:
            raise ValueError(f"the sheet holds {self.capacity} trials, got {len(trials)}")
        self.heading.setText(heading)
        self.shown = len(trials)
        for k, (title, grid) in enumerate(self._slots):
            box = title.parentWidget()
            box.setVisible(k < len(trials))
            if k < len(trials):
                trial = trials[k]
                title.setText(trial.title)
                grid.set_trial(trial.query, trial.references, trial.choices)
