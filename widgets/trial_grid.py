"""One similarity trial as a 3x3 grid: the query in the centre, its eight references around it, picks badged."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QGridLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

# grid cells (row, col) for references 0..7, clockwise from the top left; the centre (1, 1) is the query
_CELLS = ((0, 0), (0, 1), (0, 2), (1, 2), (2, 2), (2, 1), (2, 0), (1, 0))


class _Cell(QWidget):
    def __init__(self, size: int):
        super().__init__()
        self.picture = QLabel()
        self.picture.setFixedSize(size, size)
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.caption = QLabel()
        self.caption.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.caption.setMaximumWidth(size + 40)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.addWidget(self.picture, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addWidget(self.caption)
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)

    def set(self, image: QImage | None, caption: str, border: str) -> None:
        pixmap = QPixmap.fromImage(image) if image is not None else QPixmap()
        if not pixmap.isNull():
            pixmap = pixmap.scaled(self.picture.size(), Qt.AspectRatioMode.KeepAspectRatio,
                                   Qt.TransformationMode.SmoothTransformation)
        self.picture.setPixmap(pixmap)
        self.picture.setStyleSheet(f"border: 3px solid {border};" if border else "")
        self.caption.setText(caption)


class TrialGrid(QWidget):
    """`set_trial(query, references, choices)`: choices are positions into `references`, first pick first."""

    PICK_COLORS = ("#e67e22", "#2e86de", "#27ae60")

    def __init__(self, cell_size: int = 128, parent: QWidget | None = None):
        super().__init__(parent)
        self._cells = [_Cell(cell_size) for _ in range(9)]
        layout = QGridLayout(self)
        layout.setSpacing(10)
        layout.setAlignment(Qt.AlignmentFlag.AlignCenter)
        for cell, (row, col) in zip(self._cells[:8], _CELLS):
            layout.addWidget(cell, row, col)
        layout.addWidget(self._cells[8], 1, 1)

    def set_trial(self, query: tuple[QImage, str], references: list[tuple[QImage, str]],
                  choices: list[int]) -> None:
        if len(references) > 8:
            raise ValueError(f"a trial shows at most 8 references, got {len(references)}")
        self._cells[8].set(query[0], f"query · {query[1]}", "#555555")
        rank = {position: k for k, position in enumerate(choices)}
        for position, cell in enumerate(self._cells[:8]):
            if position >= len(references):
                cell.set(None, "", "")
                continue
            image, caption = references[position]
            k = rank.get(position)
            if k is None:
                cell.set(image, caption, "")
            else:
                cell.set(image, f"pick {k + 1} · {caption}", self.PICK_COLORS[min(k, 2)])
