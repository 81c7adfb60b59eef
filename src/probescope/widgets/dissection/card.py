"""A unit card: one figure with a unit's top images (with overlays), its explanations and their scores, painted
directly so it exports crisp at any size and as vectors (text, rules) in SVG and PDF."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QPainter, QPaintEvent, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

INK = QColor("#202020")
MUTED = QColor("#666666")


@dataclass(frozen=True)
class CardLine:
    method: str
    label: str
    length: int
    iou: float
    da: float


class UnitCard(QWidget):
    """`set_card(title, subtitle, images, lines, legend)`; white background, readable at paper size. It takes the
    width it is given (a panel's, or a figure's at export) and is as tall as its content needs at that width."""

    COLUMNS = 6
    MIN_WIDTH = 320

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.title = ""
        self.subtitle = ""
        self.images: list[QImage] = []
        self.lines: list[CardLine] = []
        self.legend = ""
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Fixed)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self.setMinimumWidth(self.MIN_WIDTH)

    def set_card(self, title: str, subtitle: str, images: Sequence[QImage], lines: Sequence[CardLine],
                 legend: str = "") -> None:
        self.title, self.subtitle, self.legend = title, subtitle, legend
        self.images, self.lines = list(images), list(lines)
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

    def resizeEvent(self, event) -> None:  # noqa: N802  (Qt override)
        super().resizeEvent(event)
        self._fit()

    def _fit(self) -> None:
        """As tall as the content at the current width (a scroll area then scrolls, nothing is squeezed)."""
        height = self.fit_height(max(self.width(), self.MIN_WIDTH))
        if self.minimumHeight() != height:
            self.setMinimumHeight(height)
            self.setMaximumHeight(height)

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.Antialiasing)
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        p.fillRect(self.rect(), QColor("white"))
        w = float(self.width())
        pad = 14.0
        title_font = QFont(self.font())
        title_font.setPointSizeF(self.font().pointSizeF() * 1.4)
        title_font.setBold(True)
        p.setFont(title_font)
        p.setPen(INK)
        tfm = QFontMetrics(title_font)
        p.drawText(QRectF(pad, pad, w - 2 * pad, tfm.height()), Qt.AlignmentFlag.AlignLeft, self.title)
        y = pad + tfm.height() + 2
        p.setFont(self.font())
        fm = QFontMetrics(self.font())
        p.setPen(MUTED)
        y += self._wrapped(p, fm, self.subtitle, pad, y, w - 2 * pad) + 8
        cols, grid_rows, cell, gap = self._grid(w, pad)
        for k, image in enumerate(self.images):
            r, c = divmod(k, cols)
            target = QRectF(pad + c * (cell + gap), y + r * (cell + gap), cell, cell)
            p.drawImage(target, image)
        y += grid_rows * (cell + gap) + 4
        if self.legend:
            p.setPen(MUTED)
            y += self._wrapped(p, fm, self.legend, pad, y, w - 2 * pad) + 6
        self._table(p, fm, pad, y, w - 2 * pad)
        p.end()

    def _grid(self, width: float, pad: float) -> tuple[int, int, float, float]:
        """(columns, rows, cell size, gap) of the image grid at `width`."""
        n = len(self.images)
        cols = min(self.COLUMNS, max(n, 1))
        gap = 6.0
        return cols, (n + cols - 1) // cols if n else 0, max((width - 2 * pad - gap * (cols - 1)) / cols, 8.0), gap

    def fit_height(self, width: int) -> int:
        """The height the card needs at `width` (the card is laid out top-down, nothing stretches)."""
        pad = 14.0
        title_font = QFont(self.font())
        title_font.setPointSizeF(self.font().pointSizeF() * 1.4)
        fm = QFontMetrics(self.font())
        text_w = int(width - 2 * pad)
        flags = int(Qt.TextFlag.TextWordWrap)
        sub = fm.boundingRect(0, 0, text_w, 10_000, flags, self.subtitle).height()
        legend = fm.boundingRect(0, 0, text_w, 10_000, flags, self.legend).height() + 6 if self.legend else 0
        _, rows, cell, gap = self._grid(width, pad)
        return int(pad + QFontMetrics(title_font).height() + 2 + sub + 8 + rows * (cell + gap) + 4 + legend
                   + (len(self.lines) + 1) * (fm.height() + 4) + pad)

    @staticmethod
    def _wrapped(p: QPainter, fm: QFontMetrics, text: str, x: float, y: float, width: float) -> float:
        """Draw word-wrapped `text`; returns its height."""
        flags = Qt.AlignmentFlag.AlignLeft | Qt.TextFlag.TextWordWrap
        rect = fm.boundingRect(0, 0, int(width), 10_000, int(flags), text)
        p.drawText(QRectF(x, y, width, rect.height()), flags, text)
        return float(rect.height())

    def _table(self, p: QPainter, fm: QFontMetrics, x: float, y: float, width: float) -> None:
        num_w = fm.horizontalAdvance("0.0000") + 16
        len_w = fm.horizontalAdvance("length") + 16
        method_w = max((fm.horizontalAdvance(line.method) for line in self.lines), default=60) + 16
        label_w = max(width - method_w - len_w - 2 * num_w, 60)
        cols = [("method", method_w, Qt.AlignmentFlag.AlignLeft), ("explanation", label_w, Qt.AlignmentFlag.AlignLeft),
                ("length", len_w, Qt.AlignmentFlag.AlignRight), ("IoU", num_w, Qt.AlignmentFlag.AlignRight),
                ("DA", num_w, Qt.AlignmentFlag.AlignRight)]
        row_h = fm.height() + 4
        bold = QFont(self.font())
        bold.setBold(True)
        rows = [[c[0] for c in cols]] + [[line.method, line.label, str(line.length), f"{line.iou:.4f}",
                                          f"{line.da:.3f}"] for line in self.lines]
        for r, cells in enumerate(rows):
            p.setFont(bold if r == 0 else self.font())
            p.setPen(INK)
            cx = x
            for (_, cw, align), text in zip(cols, cells, strict=True):
                shown = fm.elidedText(text, Qt.TextElideMode.ElideMiddle, int(cw - 8))
                p.drawText(QRectF(cx + 4, y, cw - 8, row_h), align | Qt.AlignmentFlag.AlignVCenter, shown)
                cx += cw
            if r == 0:
                p.setPen(QPen(INK, 1))
                p.drawLine(int(x), int(y + row_h), int(x + width), int(y + row_h))
            y += row_h
        p.setPen(QPen(INK, 1))
        p.drawLine(int(x), int(y), int(x + width), int(y))
