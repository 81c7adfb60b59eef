"""One similarity trial as a 3x3 grid: the query in the centre, its eight references around it, picks badged.

Over the same grid a model's view can be laid: each reference's rank by the model's distance to the query, and the
references that take part in a triplet the model gets wrong marked in red, so a reader sees at a glance where model
and participant part ways. Clicking a reference emits `reference_clicked(position)`.
"""

from __future__ import annotations

import html
import math
import re
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QRect, QSize, Qt, Signal
from PySide6.QtGui import QFont, QFontMetrics, QImage, QMouseEvent, QPixmap, QTextDocument
from PySide6.QtWidgets import QLabel, QSizePolicy, QVBoxLayout, QWidget

from probescope.widgets.ink import ink

# grid cells (row, col) for references 0..7, clockwise from the top left; the centre (1, 1) is the query
_CELLS = ((0, 0), (0, 1), (0, 2), (1, 2), (2, 2), (2, 1), (2, 0), (1, 0))
GRID_CELLS = (*_CELLS, (1, 1))  # every cell's place, the query's last
SPACING = 10
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


MIN_PICTURE = 56  # a tile is never smaller: the grid asks for more room instead
CAPTION_EXTRA = 40  # a caption may be this much wider than its tile, where there is room
FONT_FLOOR_PT = 6.5  # captions shrink to this size at the least, so their longest word fits the tile
CELL_MARGIN = 2


def _text_height(label: QLabel, text: str, width: int, font: QFont) -> int:
    """The height `label` needs for `text` wrapped at `width` in `font` (plain or rich text, as QLabel lays it)."""
    if not text:
        return 0
    if label.textFormat() == Qt.TextFormat.RichText:
        document = QTextDocument()
        document.setDefaultFont(font)
        document.setDocumentMargin(0)
        document.setHtml(text)
        document.setTextWidth(width)
        return math.ceil(document.size().height())
    flags = int(label.alignment()) | int(Qt.TextFlag.TextWordWrap)
    return QFontMetrics(font).boundingRect(QRect(0, 0, width, 100_000), flags, text).height()


def _set_wrapped(label: QLabel, text: str) -> None:
    """Text under a tile, as tall as its wrapped lines need: the cell grows, nothing runs over the next tile."""
    label.setText(text)
    label.setMinimumHeight(_text_height(label, text, label.maximumWidth(), label.font()))
    label.updateGeometry()


def _words(text: str) -> list[str]:
    return html.unescape(re.sub(r"<[^>]+>", " ", text)).split()


class _Cell(QWidget):
    clicked = Signal()

    def __init__(self, size: int):
        super().__init__()
        self.image: QImage | None = None
        self.picture = QLabel()
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.caption = QLabel()
        self.caption.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.caption.setWordWrap(True)
        self.model = QLabel()
        self.model.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.model.setWordWrap(True)
        self.model.setTextFormat(Qt.TextFormat.RichText)
        self.model.hide()
        layout = QVBoxLayout(self)
        layout.setContentsMargins(CELL_MARGIN, CELL_MARGIN, CELL_MARGIN, CELL_MARGIN)
        layout.setSpacing(1)
        layout.addWidget(self.picture, 0, Qt.AlignmentFlag.AlignHCenter)
        layout.addWidget(self.caption)
        layout.addWidget(self.model)
        layout.addStretch(1)  # a cell taller than it needs (its row's tallest sets the height) keeps its text on top
        self._border = ""
        self.resize_to(size, size + CAPTION_EXTRA, self.font())

    def resize_to(self, picture: int, caption: int, font: QFont) -> None:
        """Tile `picture` pixels square, captions `caption` wide in `font`."""
        self.picture.setFixedSize(picture, picture)
        for label in (self.caption, self.model):
            label.setFixedWidth(caption)
            label.setFont(font)
            _set_wrapped(label, label.text())
        self._show_image()

    def height_at(self, picture: int, caption: int, font: QFont) -> int:
        """The height this cell needs with a `picture` tile and captions `caption` wide in `font`."""
        height = 2 * CELL_MARGIN + picture
        for label in (self.caption, self.model):
            if label.text():
                height += 1 + _text_height(label, label.text(), caption, font)
        return height

    def _show_image(self) -> None:
        pixmap = QPixmap.fromImage(self.image) if self.image is not None else QPixmap()
        if not pixmap.isNull():
            pixmap = pixmap.scaled(self.picture.size(), Qt.AspectRatioMode.KeepAspectRatio,
                                   Qt.TransformationMode.SmoothTransformation)
        self.picture.setPixmap(pixmap)

    def set(self, image: QImage | None, caption: str, border: str) -> None:
        self.image = image
        self._show_image()
        self._border = border
        self._style(False)
        _set_wrapped(self.caption, caption)

    def set_model(self, text: str, wrong: bool) -> None:
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

    The tiles are `cell_size` pixels where the grid has room; narrower (a small panel, a paper column's figure)
    they shrink to fit its width, down to `MIN_PICTURE`, and their captions wrap, in a smaller font where a word
    would not fit: the three columns are always whole.
    """

    PICK_COLORS = ("#e67e22", "#2e86de", "#27ae60")
    reference_clicked = Signal(int)

    def __init__(self, cell_size: int = 128, parent: QWidget | None = None):
        super().__init__(parent)
        self.cell_size = cell_size
        self._cells = [_Cell(cell_size) for _ in range(9)]
        self._n_references = 0
        self._wrong: set[int] = set()
        self._view: ModelView | None = None
        self._inked = ""  # the warning ink the model's lines were written in
        self._fitted: tuple[int, int, float] = (cell_size, cell_size + CAPTION_EXTRA, self.font().pointSizeF())
        for position, cell in enumerate(self._cells):
            cell.setParent(self)
            if position < 8:
                cell.clicked.connect(lambda p=position: self._clicked(p))
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)

    # -- size: the cells are placed here (a layout could not shrink the tiles with the width) ------------------------
    @staticmethod
    def _width_for(caption: int) -> int:
        return 3 * (caption + 2 * CELL_MARGIN) + 2 * SPACING

    def _sizes(self, width: int) -> tuple[int, int, QFont]:
        """(tile, caption width, caption font) at `width`."""
        column = (width - 2 * SPACING) / 3 - 2 * CELL_MARGIN
        picture = int(max(MIN_PICTURE, min(self.cell_size, column)))
        caption = int(max(picture, min(self.cell_size + CAPTION_EXTRA, column)))
        return picture, caption, self._caption_font(caption)

    def _words(self) -> list[str]:
        return [w for cell in self._cells for text in (cell.caption.text(), cell.model.text()) for w in _words(text)]

    def _caption_font(self, width: int) -> QFont:
        """The widget's font, or smaller (to `FONT_FLOOR_PT`) where a caption's longest word is wider than `width`."""
        font = QFont(self.font())
        words = self._words()
        while font.pointSizeF() > FONT_FLOOR_PT:
            bold = QFont(font)
            bold.setBold(True)  # (the model line has bold parts)
            if max((QFontMetrics(bold).horizontalAdvance(w) for w in words), default=0) <= width:
                break
            font.setPointSizeF(max(FONT_FLOOR_PT, font.pointSizeF() - 0.5))
        return font

    def _rows(self, width: int) -> list[int]:
        """The height of each row of cells at `width`."""
        picture, caption, font = self._sizes(width)
        rows = [0, 0, 0]
        for cell, (row, _col) in zip(self._cells, GRID_CELLS, strict=True):
            rows[row] = max(rows[row], cell.height_at(picture, caption, font))
        return rows

    def _place(self) -> None:
        """Tiles and captions fitted to the current width, each cell at its place, the grid centred."""
        picture, caption, font = self._sizes(self.width())
        if (picture, caption, font.pointSizeF()) != self._fitted:
            self._fitted = (picture, caption, font.pointSizeF())
            for cell in self._cells:
                cell.resize_to(picture, caption, font)
        rows = self._rows(self.width())
        cell_w = caption + 2 * CELL_MARGIN
        left = max(0, (self.width() - self._width_for(caption)) // 2)
        for cell, (row, col) in zip(self._cells, GRID_CELLS, strict=True):
            cell.setGeometry(QRect(left + col * (cell_w + SPACING), sum(rows[:row]) + row * SPACING, cell_w,
                                   rows[row]))

    def _content_changed(self) -> None:
        self._fitted = (0, 0, 0.0)  # captions changed: their font and the rows' heights may too
        self._place()
        self.updateGeometry()

    def resizeEvent(self, event) -> None:  # noqa: N802  (Qt override)
        super().resizeEvent(event)
        self._place()

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802  (Qt override)
        """A new palette (a theme, or a figure's paper colours): the model's lines in its shade of red."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self.isVisible():
            self.follow_palette()

    def showEvent(self, event) -> None:  # noqa: N802  (Qt override)
        self.follow_palette()  # a palette that changed while the grid was hidden (another workspace)
        super().showEvent(event)

    def follow_palette(self) -> None:
        """The model's lines in the palette's warning ink, if it changed since."""
        if self._view is not None and self._inked != ink("warning", self.palette()):
            self.set_model_view(self._view)

    def minimumSizeHint(self) -> QSize:  # noqa: N802  (Qt override)
        """Tiles of `MIN_PICTURE`, or wider where a caption's longest word needs it even in the smallest font."""
        floor = QFont(self.font())
        floor.setPointSizeF(FONT_FLOOR_PT)
        floor.setBold(True)
        fm = QFontMetrics(floor)
        word = max((fm.horizontalAdvance(w) for w in self._words()), default=0)
        width = self._width_for(max(MIN_PICTURE, word))
        return QSize(width, self.heightForWidth(width))

    def sizeHint(self) -> QSize:  # noqa: N802  (Qt override)
        width = self._width_for(self.cell_size + CAPTION_EXTRA)
        return QSize(width, self.heightForWidth(width))

    def hasHeightForWidth(self) -> bool:  # noqa: N802  (Qt override)
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802  (Qt override)
        return sum(self._rows(width)) + 2 * SPACING

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
        self.set_model_view(None)  # (which fits the cells to the new captions)

    def set_model_view(self, view: ModelView | None) -> None:
        """Each reference's model rank and distance; red marks the references of the triplets the model gets wrong."""
        self._view = view
        self._inked = ink("warning", self.palette())
        involved = {p for pair in view.wrong for p in pair} if view is not None else set()
        self._wrong = {p for p in involved if p < self._n_references}
        for position, cell in enumerate(self._cells[:8]):
            if view is None or position >= self._n_references or position >= len(view.ranks):
                cell.set_model("", False)
                continue
            wrong = position in involved
            color = f' style="color:{ink("warning", self.palette())}"' if wrong else ""
            cell.set_model(f"<span{color}>model rank {view.ranks[position]} · d {view.distances[position]:.3g}"
                           "</span>", wrong)
        self._cells[8].set_model(f"<b>{view.correct} of {view.total}</b> triplets agree" if view else "", False)
        self._content_changed()

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
