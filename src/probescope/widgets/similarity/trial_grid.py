"""One similarity trial as a 3x3 grid: the query in the centre, its eight references around it, picks badged.

Over the same grid a model's view can be laid: each reference's rank by the model's distance to the query, and the
references that take part in a triplet the model gets wrong marked in red, so a reader sees at a glance where model
and participant part ways. Clicking a reference emits `reference_clicked(position)`.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import Qt, Signal
from PySide6.QtGui import QImage, QMouseEvent, QPixmap
from PySide6.QtWidgets import QGridLayout, QLabel, QSizePolicy, QVBoxLayout, QWidget

from probescope.widgets.ink import InkLabel, inked

# grid cells (row, col) for references 0..7, clockwise from the top left; the centre (1, 1) is the query
_CELLS = ((0, 0), (0, 1), (0, 2), (1, 2), (2, 2), (2, 1), (2, 0), (1, 0))
WRONG_COLOR = "#c0392b"


@dataclass(frozen=True)
class ModelView:
    """A model's reading of one trial: per reference position its rank (1 = closest) and distance, and the
    triplets it gets wrong as (closer position, farther position) pairs by the participant's choices."""

    name: str
    ranks: tuple[int, ...]
    distances: tuple[float, ...]
    wrong: tuple[tuple[int, int], ...]
    correct: int
    total: int


def _set_wrapped(label: QLabel, text: str) -> None:
    """Text under a tile, as tall as its wrapped lines need: the cell grows, nothing runs over the next tile."""
    label.setText(text)
    label.setMinimumHeight(label.heightForWidth(label.width()) if text else 0)
    label.updateGeometry()


CAPTION_ROOM = 40  # a caption is this much wider than its tile


class _Cell(QWidget):
    clicked = Signal()

    def __init__(self, size: int):
        super().__init__()
        self.picture = QLabel()
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.caption = QLabel()
        self.caption.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.caption.setWordWrap(True)
        self.model = InkLabel()
        self.model.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.model.setWordWrap(True)
        self._image: QImage | None = None
        self._texts = {self.caption: "", self.model: ""}
        self.set_size(size)
        self.model.setTextFormat(Qt.TextFormat.RichText)
        self.model.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(2, 2, 2, 2)
        layout.setSpacing(1)
        layout.addWidget(self.picture, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addWidget(self.caption)
        layout.addWidget(self.model)
        self.setSizePolicy(QSizePolicy.Policy.Fixed, QSizePolicy.Policy.Fixed)
        self._border = ""

    def set_size(self, size: int) -> None:
        """Tiles `size` pixels square, their captions wrapped again to the new width."""
        self.picture.setFixedSize(size, size)
        for label, text in self._texts.items():
            label.setFixedWidth(size + CAPTION_ROOM)
            _set_wrapped(label, text)
        self._show_image()

    def _show_image(self) -> None:
        pixmap = QPixmap.fromImage(self._image) if self._image is not None else QPixmap()
        if not pixmap.isNull():
            pixmap = pixmap.scaled(self.picture.size(), Qt.AspectRatioMode.KeepAspectRatio,
                                   Qt.TransformationMode.SmoothTransformation)
        self.picture.setPixmap(pixmap)

    def set(self, image: QImage | None, caption: str, border: str) -> None:
        self._image = image
        self._show_image()
        self._border = border
        self._style(False)
        self._texts[self.caption] = caption
        _set_wrapped(self.caption, caption)

    def set_model(self, text: str, wrong: bool) -> None:
        self._texts[self.model] = text
        _set_wrapped(self.model, text)
        self.model.setVisible(bool(text))
        self._style(wrong)

    def _style(self, wrong: bool) -> None:
        """Picks keep their colour as a solid border; a reference in a wrong triplet gets a red dashed outline."""
        if self._border:
            style = f"border: 4px solid {self._border};"
        else:
            style = f"border: 3px dashed {WRONG_COLOR};" if wrong else ""
        if wrong and self._border:
            style += f" background: {WRONG_COLOR};"
        self.picture.setStyleSheet(style)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        if event.button() == Qt.MouseButton.LeftButton:
            self.clicked.emit()
        super().mousePressEvent(event)


class TrialGrid(QWidget):
    """`set_trial(query, references, choices)`: choices are positions into `references`, first pick first.

    `set_model_view(view)` lays a model's ranks and wrong triplets over the grid (None removes it).
    """

    PICK_COLORS = ("#e67e22", "#2e86de", "#27ae60")
    reference_clicked = Signal(int)

    SPACING = 10

    def __init__(self, cell_size: int = 128, parent: QWidget | None = None):
        super().__init__(parent)
        self.cell_size = cell_size
        self._cells = [_Cell(cell_size) for _ in range(9)]
        self._n_references = 0
        self._wrong: set[int] = set()
        layout = QGridLayout(self)
        layout.setSpacing(self.SPACING)
        layout.setAlignment(Qt.AlignmentFlag.AlignCenter)
        for position, (cell, (row, col)) in enumerate(zip(self._cells[:8], _CELLS)):
            layout.addWidget(cell, row, col)
            cell.clicked.connect(lambda p=position: self._clicked(p))
        layout.addWidget(self._cells[8], 1, 1)

    def set_trial(self, query: tuple[QImage, str], references: list[tuple[QImage, str]],
                  choices: list[int]) -> None:
        if len(references) > 8:
            raise ValueError(f"a trial shows at most 8 references, got {len(references)}")
        self._n_references = len(references)
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
        self.set_model_view(None)

    def set_model_view(self, view: ModelView | None) -> None:
        """Each reference's model rank and distance; red marks the references of the triplets the model gets wrong."""
        involved = {p for pair in view.wrong for p in pair} if view is not None else set()
        self._wrong = {p for p in involved if p < self._n_references}
        for position, cell in enumerate(self._cells[:8]):
            if view is None or position >= self._n_references or position >= len(view.ranks):
                cell.set_model("", False)
                continue
            wrong = position in involved
            text = f"model rank {view.ranks[position]} · d {view.distances[position]:.3g}"
            cell.set_model(inked("warning", text) if wrong else text, wrong)
        self._cells[8].set_model(f"<b>{view.correct} of {view.total}</b> triplets agree" if view else "", False)

    def fit_width(self, width: int, largest: int, smallest: int = 64) -> None:
        """Tiles as large as `width` pixels allow for the three columns (between `smallest` and `largest`): in a
        narrow panel the grid shrinks instead of losing its right-hand column."""
        margins = self.layout().contentsMargins()
        column = (width - margins.left() - margins.right() - 2 * self.SPACING) // 3
        cell = self._cells[0].layout().contentsMargins()
        size = int(min(max(column - CAPTION_ROOM - cell.left() - cell.right(), smallest), largest))
        if size != self.cell_size:
            self.cell_size = size
            for c in self._cells:
                c.set_size(size)

    def captions(self) -> list[str]:
        """Caption of each reference cell (then the query's): what a reader sees under the images."""
        return [cell.caption.text() for cell in self._cells]

    def model_captions(self) -> list[str]:
        return [cell.model.text() for cell in self._cells]

    def wrong_positions(self) -> set[int]:
        """Reference positions currently marked as part of a wrong triplet."""
        return set(self._wrong)

    def _clicked(self, position: int) -> None:
        if position < self._n_references:
            self.reference_clicked.emit(position)
