"""A unit card: one figure with a unit's top images (with overlays), its explanations and their scores, painted
directly so it exports crisp at any size and as vectors (text, rules) in SVG and PDF.

Nothing on the card is ever elided or cut: at any width it lays itself out so every formula shows in full. The
explanations table keeps one line per method while the formulas fit; narrower, a formula wraps within its column;
narrower still (a paper column), each formula goes on its own lines under its method's scores, across the card.
The table's font shrinks (to a floor) only when even the scores do not fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QEvent, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetricsF, QImage, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

PAD = 14.0
CELL_PAD = 4.0  # each side of a table cell
INDENT = 12.0  # a formula under its method's scores (the stacked table)
FONT_FLOOR_PT = 6.0
MIN_CELL = 40.0  # an image of the grid is never smaller: the grid has fewer columns instead
WRAP = int(Qt.TextFlag.TextWordWrap)
ANYWHERE = int(Qt.TextFlag.TextWrapAnywhere)


@dataclass(frozen=True)
class CardLine:
    method: str
    label: str
    length: int
    iou: float
    da: float


@dataclass(frozen=True)
class TableLayout:
    """How the explanations table is laid out at a width: the column widths (method, explanation, length, IoU, DA;
    the explanation's is the width its formulas wrap to, on their own lines when `stacked`), each row's height (the
    header first) and the font."""

    font: QFont
    widths: tuple[float, float, float, float, float]
    stacked: bool
    heights: tuple[float, ...]
    wrap: int

    @property
    def height(self) -> float:
        return sum(self.heights)


class UnitCard(QWidget):
    """`set_card(title, subtitle, images, lines, legend)`; in the palette's colours (a figure is light unless the
    export follows a dark theme), readable at paper size. It takes the width it is given (a panel's, or a figure's at
    export) and is as tall as its content needs at that width."""

    COLUMNS = 6
    MIN_WIDTH = 320
    HEADER = ("method", "explanation", "length", "IoU", "DA")

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.title = ""
        self.subtitle = ""
        self.images: list[QImage] = []
        self.lines: list[CardLine] = []
        self.legend = ""
        self._heights: dict[int, int] = {}  # fit_height and table_layout per width, until the content or font change:
        self._layouts: dict[float, TableLayout] = {}  # layouts ask for them many times (40 ms a card measured)
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self.setMinimumWidth(self.MIN_WIDTH)

    def set_card(self, title: str, subtitle: str, images: Sequence[QImage], lines: Sequence[CardLine],
                 legend: str = "") -> None:
        self.title, self.subtitle, self.legend = title, subtitle, legend
        self.images, self.lines = list(images), list(lines)
        self._heights.clear()
        self._layouts.clear()
        self._fit()
        self.update()

    def clear(self) -> None:
        self.set_card("", "", [], [])

    def hasHeightForWidth(self) -> bool:  # noqa: N802  (Qt override)
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802  (Qt override)
        return self.fit_height(width)

    def sizeHint(self) -> QSize:  # noqa: N802  (Qt override)
        return QSize(640, self.fit_height(640))

    def minimumSizeHint(self) -> QSize:  # noqa: N802  (Qt override)
        return QSize(self.MIN_WIDTH, self.fit_height(self.MIN_WIDTH))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802  (Qt override)
        if event.type() in (QEvent.Type.FontChange, QEvent.Type.StyleChange):
            self._heights.clear()
            self._layouts.clear()
        super().changeEvent(event)

    def resizeEvent(self, event) -> None:  # noqa: N802  (Qt override)
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        """As tall as the content at the current width (a scroll area then scrolls, nothing is squeezed)."""
        height = self.fit_height(max(self.width(), self.MIN_WIDTH))
        if self.minimumHeight() != height:
            self.setMinimumHeight(height)
            self.setMaximumHeight(height)

    def _title_font(self) -> QFont:
        font = QFont(self.font())
        font.setPointSizeF(self.font().pointSizeF() * 1.4)
        font.setBold(True)
        return font

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        palette = self.palette()
        p.fillRect(self.rect(), palette.color(QPalette.ColorRole.Base))
        ink, muted = palette.color(QPalette.ColorRole.Text), palette.color(QPalette.ColorRole.PlaceholderText)
        w = float(self.width())
        text_w = w - 2 * PAD
        p.setPen(ink)
        y = PAD + _draw_wrapped(p, self._title_font(), self.title, PAD, PAD, text_w) + 2
        p.setPen(muted)
        y += _draw_wrapped(p, self.font(), self.subtitle, PAD, y, text_w) + 8
        cols, grid_rows, cell, gap = self._grid(w)
        for k, image in enumerate(self.images):
            r, c = divmod(k, cols)
            p.drawImage(QRectF(PAD + c * (cell + gap), y + r * (cell + gap), cell, cell), image)
        y += grid_rows * (cell + gap) + 4
        if self.legend:
            p.setPen(muted)
            y += _draw_wrapped(p, self.font(), self.legend, PAD, y, text_w) + 6
        self._paint_table(p, self.table_layout(text_w), PAD, y, text_w, ink)
        p.end()

    def _grid(self, width: float) -> tuple[int, int, float, float]:
        """(columns, rows, cell size, gap) of the image grid at `width`."""
        n = len(self.images)
        gap = 6.0
        room = width - 2 * PAD
        cols = max(1, min(self.COLUMNS, max(n, 1), int((room + gap) // (MIN_CELL + gap))))
        return cols, (n + cols - 1) // cols if n else 0, max((room - gap * (cols - 1)) / cols, 8.0), gap

    def fit_height(self, width: int) -> int:
        """The height the card needs at `width` (the card is laid out top-down, nothing stretches)."""
        found = self._heights.get(width)
        if found is None:
            found = self._heights[width] = self._height_at(width)
        return found

    def _height_at(self, width: int) -> int:
        text_w = width - 2 * PAD
        title = _wrapped_height(self._title_font(), self.title, text_w)
        sub = _wrapped_height(self.font(), self.subtitle, text_w)
        legend = _wrapped_height(self.font(), self.legend, text_w) + 6 if self.legend else 0
        _, rows, cell, gap = self._grid(width)
        return int(PAD + title + 2 + sub + 8 + rows * (cell + gap) + 4 + legend + self.table_layout(text_w).height
                   + PAD + 1)

    def _cells(self) -> list[list[str]]:
        return [[line.method, line.label, str(line.length), f"{line.iou:.4f}", f"{line.da:.3f}"]
                for line in self.lines]

    def table_layout(self, width: float) -> TableLayout:
        """The explanations table at `width` (see the module text)."""
        found = self._layouts.get(width)
        if found is None:
            found = self._layouts[width] = self._table_layout(width)
        return found

    def _table_layout(self, width: float) -> TableLayout:
        cells = self._cells()
        size = self.font().pointSizeF()
        while True:
            font = QFont(self.font())
            font.setPointSizeF(size)
            layout = self._layout_at(font, width, cells)
            if layout is not None or size <= FONT_FLOOR_PT:
                return layout or self._layout_at(font, width, cells, force=True)
            size = max(FONT_FLOOR_PT, size * 0.9)

    def _layout_at(self, font: QFont, width: float, cells: list[list[str]], force: bool = False
                   ) -> TableLayout | None:
        """The table in `font` at `width`, or None when its scores do not fit (`force`: fit them anyway)."""
        bold = QFont(font)
        bold.setBold(True)
        fm, fb = QFontMetricsF(font), QFontMetricsF(bold)

        def column(k: int) -> float:
            return max([fb.horizontalAdvance(self.HEADER[k])] + [fm.horizontalAdvance(row[k]) for row in cells]
                       ) + 2 * CELL_PAD + 0.5

        method, length, iou, da = column(0), column(2), column(3), column(4)
        scores = length + iou + da
        labels = [row[1] for row in cells] or [""]
        longest = max(fm.horizontalAdvance(label) for label in labels) + 2 * CELL_PAD
        longest = max(longest, fb.horizontalAdvance(self.HEADER[1]) + 2 * CELL_PAD)
        word = max([fb.horizontalAdvance(self.HEADER[1])]
                   + [fm.horizontalAdvance(w) for label in labels for w in label.split()]) + 2 * CELL_PAD
        room = width - method - scores
        line = fm.height() + 4
        if room >= longest or (room >= word and room >= 0.3 * width):  # formulas beside their scores
            heights = [line] + [_wrapped_height(font, row[1], room - 2 * CELL_PAD) + 4 for row in cells]
            return TableLayout(font, (method, room, length, iou, da), False, tuple(heights), WRAP)
        if width - scores < method and not force:
            return None
        under = width - INDENT  # each formula across the card under its method's scores
        wrap = WRAP if word - 2 * CELL_PAD <= under - 2 * CELL_PAD else ANYWHERE
        heights = [2 * line] + [line + _wrapped_height(font, row[1], under - 2 * CELL_PAD, wrap) + 2
                                for row in cells]
        return TableLayout(font, (max(width - scores, 0.0), under, length, iou, da), True, tuple(heights), wrap)

    def _paint_table(self, p: QPainter, t: TableLayout, x: float, y: float, width: float, ink: QColor) -> None:
        bold = QFont(t.font)
        bold.setBold(True)
        line = QFontMetricsF(t.font).height() + 4
        left = Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignTop
        right = Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignTop
        aligns = (left, left, right, right, right)
        p.setPen(ink)
        for r, (cells, height) in enumerate(zip([list(self.HEADER), *self._cells()], t.heights, strict=True)):
            p.setFont(bold if r == 0 else t.font)
            cx = x
            order = (0, 2, 3, 4) if t.stacked else (0, 1, 2, 3, 4)
            for k in order:
                cw = t.widths[k]
                flags = int(aligns[k]) | (t.wrap if k == 1 else 0)
                p.drawText(QRectF(cx + CELL_PAD, y + 2, cw - 2 * CELL_PAD, height - 2), flags, cells[k])
                cx += cw
            if t.stacked:  # the formula under the scores, across the card
                p.drawText(QRectF(x + INDENT + CELL_PAD, y + line, t.widths[1] - 2 * CELL_PAD, height - line),
                           int(left) | t.wrap, cells[1])
            if r == 0:
                p.setPen(QPen(ink, 1))
                p.drawLine(QRectF(x, y, width, height).bottomLeft(), QRectF(x, y, width, height).bottomRight())
            y += height
        p.setPen(QPen(ink, 1))
        p.drawLine(QRectF(x, y, width, 0).topLeft(), QRectF(x, y, width, 0).topRight())


def _wrapped_height(font: QFont, text: str, width: float, wrap: int = WRAP) -> float:
    if not text:
        return 0.0
    return QFontMetricsF(font).boundingRect(QRectF(0, 0, max(width, 1.0), 1e6), wrap, text).height()


def _draw_wrapped(p: QPainter, font: QFont, text: str, x: float, y: float, width: float) -> float:
    """Draw word-wrapped `text` in `font`; returns its height."""
    p.setFont(font)
    height = _wrapped_height(font, text, width)
    p.drawText(QRectF(x, y, width, height), int(Qt.AlignmentFlag.AlignLeft) | WRAP, text)
    return height
