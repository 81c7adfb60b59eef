"""Bar charts of class probabilities, painted directly (crisp at any export size, vector in SVG/PDF).

`ClassBars` draws one labelled horizontal bar per class while they fit; with more classes than rows (1,008
Inception classes) it switches to a dense strip of vertical bars. Marked classes (e.g. never predicted) get a red
tick and a red label, so dropped modes stand out in both layouts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PySide6.QtCore import QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPaintEvent, QPalette, QPen
from PySide6.QtWidgets import QSizePolicy, QWidget

from probescope.widgets.ink import ink_color

# A qualitative palette (Tableau 20 order); classes cycle through it.
_PALETTE = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#ff9da7", "#9c755f",
            "#bab0ac", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
            "#bcbd22", "#17becf")
MARK_COLOR = QColor("#d62728")  # the tick beside a marked class; its label takes the theme's warning ink


def class_color(k: int) -> QColor:
    """The colour of class `k`, the same in every view."""
    return QColor(_PALETTE[k % len(_PALETTE)]) if k >= 0 else QColor("#999999")


class ClassBars(QWidget):
    """Labelled bars: `set_bars(names, values, classes, marked)`; values in [0, vmax]."""

    ROW = 17  # pixels per bar in the labelled layout
    MAX_ROWS = 40  # more bars than this: the dense strip

    def __init__(self, title: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.title = title
        self._names: list[str] = []
        self._values = np.empty(0)
        self._classes = np.empty(0, dtype=np.int64)
        self._colors: list[QColor] | None = None
        self._marked: set[int] = set()
        self._vmax: float | None = None
        self._legend = ""
        self._format = ".3f"
        policy = QSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        policy.setHeightForWidth(True)  # the legend wraps
        self.setSizePolicy(policy)
        self.setMinimumHeight(60)

    def set_bars(self, names: Sequence[str], values: np.ndarray, classes: Sequence[int] | None = None,
                 marked: Sequence[int] = (), vmax: float | None = None, legend: str = "",
                 value_format: str = ".3f", colors: Sequence[str] | None = None) -> None:
        """`classes` give each bar its class colour (default: bar order), or `colors` its own; `marked` are bar
        positions to flag; `value_format` writes each bar's value (".0f" for counts)."""
        self._names = list(names)
        self._values = np.asarray(values, dtype=np.float64)
        self._classes = np.arange(len(self._values)) if classes is None else np.asarray(classes)
        self._colors = None if colors is None else [QColor(c) for c in colors]
        self._marked = {int(m) for m in marked}
        self._vmax = vmax
        self._legend = legend
        self._format = value_format
        self.setMinimumHeight(self.heightForWidth(10_000))  # labelled bars never squeeze into each other
        self.updateGeometry()
        self.update()

    def clear(self) -> None:
        self.set_bars([], np.empty(0))

    @property
    def values(self) -> np.ndarray:
        return self._values.copy()

    @property
    def names(self) -> list[str]:
        return list(self._names)

    @property
    def legend(self) -> str:
        return self._legend

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(320, self.heightForWidth(320))

    def hasHeightForWidth(self) -> bool:  # noqa: N802  (Qt override)
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802  (Qt override)
        rows = len(self._values) if len(self._values) <= self.MAX_ROWS else 8
        return 8 + self._title_height(width) + self._legend_height(width) + self.ROW * max(rows, 3)

    def _wrapped_height(self, font: QFont, text: str, width: int) -> int:
        flags = int(Qt.AlignmentFlag.AlignLeft) | int(Qt.TextFlag.TextWordWrap)
        return QFontMetrics(font).boundingRect(0, 0, max(width, 1), 100_000, flags, text).height()

    def _title_font(self) -> QFont:
        bold = self.font()
        bold.setBold(True)
        return bold

    def _title_height(self, width: int) -> int:
        """The title's lines, wrapped to `width` (a narrow figure would cut a title on one line)."""
        return self._wrapped_height(self._title_font(), self.title, width) + 4 if self.title else 0

    def _legend_height(self, width: int) -> int:
        """The legend's lines, wrapped to `width` (none without a legend)."""
        return self._wrapped_height(self.font(), self._legend, width) + 6 if self._legend else 0

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        text = self.palette().color(QPalette.ColorRole.WindowText)
        fm = QFontMetrics(self.font())
        top = 2.0
        if self.title:
            painter.setFont(self._title_font())
            painter.setPen(text)
            height = self._title_height(self.width())
            painter.drawText(QRectF(0, top, self.width(), height),
                             int(Qt.AlignmentFlag.AlignLeft) | int(Qt.TextFlag.TextWordWrap), self.title)
            painter.setFont(self.font())
            top += height
        bottom = self.height() - (self._legend_height(self.width()) if self._legend else 2)
        if self._legend:
            painter.setPen(text)
            painter.drawText(QRectF(0, bottom + 2, self.width(), self.height() - bottom - 2),
                             int(Qt.AlignmentFlag.AlignLeft) | int(Qt.TextFlag.TextWordWrap), self._legend)
        if len(self._values) == 0:
            painter.end()
            return
        vmax = self._vmax if self._vmax is not None else max(float(self._values.max()), 1e-12)
        if len(self._values) <= self.MAX_ROWS:
            self._paint_rows(painter, fm, text, top, bottom, vmax)
        else:
            self._paint_strip(painter, fm, text, top, bottom, vmax)
        painter.end()

    def _color(self, i: int) -> QColor:
        return self._colors[i] if self._colors is not None else class_color(int(self._classes[i]))

    def _paint_rows(self, painter: QPainter, fm: QFontMetrics, text: QColor, top: float, bottom: float,
                    vmax: float) -> None:
        n = len(self._values)
        warning = ink_color("warning", self.palette())
        row = min(float(self.ROW), (bottom - top) / n)
        label_w = min(max((fm.horizontalAdvance(s) for s in self._names), default=0) + 8, self.width() * 0.45)
        value_w = max(fm.horizontalAdvance(format(v, self._format)) for v in self._values) + 8
        bar_w = max(self.width() - label_w - value_w - 4, 10)
        for i, (name, v) in enumerate(zip(self._names, self._values, strict=True)):
            y = top + i * row
            marked = i in self._marked
            painter.setPen(warning if marked else text)
            label = fm.elidedText(name, Qt.TextElideMode.ElideRight, int(label_w - 6))
            painter.drawText(QRectF(0, y, label_w - 6, row), Qt.AlignmentFlag.AlignRight
                             | Qt.AlignmentFlag.AlignVCenter, label)
            width = bar_w * min(max(v / vmax, 0.0), 1.0)
            painter.fillRect(QRectF(label_w, y + row * 0.15, width, row * 0.7), self._color(i))
            if marked:
                painter.setPen(QPen(MARK_COLOR, 1.5))
                painter.drawLine(int(label_w), int(y + 2), int(label_w), int(y + row - 2))
            painter.setPen(warning if marked else text)
            painter.drawText(QRectF(label_w + width + 4, y, value_w, row), Qt.AlignmentFlag.AlignLeft
                             | Qt.AlignmentFlag.AlignVCenter, format(v, self._format))

    def _paint_strip(self, painter: QPainter, fm: QFontMetrics, text: QColor, top: float, bottom: float,
                     vmax: float) -> None:
        n = len(self._values)
        ticks = 6.0
        height = bottom - top - ticks
        step = self.width() / n
        for i, v in enumerate(self._values):
            h = height * min(max(v / vmax, 0.0), 1.0)
            painter.fillRect(QRectF(i * step, top + height - h, max(step, 1.0), h), self._color(i))
        painter.setPen(QPen(MARK_COLOR, max(step, 1.0)))
        for i in self._marked:
            x = i * step + step / 2
            painter.drawLine(QRectF(x, top + height + 1, 0, ticks - 1).topLeft(),
                             QRectF(x, top + height + 1, 0, ticks - 1).bottomLeft())
        painter.setPen(text)
        painter.drawLine(0, int(top + height), self.width(), int(top + height))
