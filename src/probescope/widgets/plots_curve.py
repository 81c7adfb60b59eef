"""A metric against sample size: one curve with axes, and an optional labelled reference band, painted directly.

Used for IS against N: the running estimate's curve, and the split protocol's mean ± std as a band, so a reader
sees both numbers and how far apart they are. Painted with QPainter rather than pyqtgraph: it redraws several
times a second while samples stream, and pyqtgraph's Python-side axis painting cost up to 57 ms per frame there.
"""

from __future__ import annotations

import math

import numpy as np
from PySide6.QtCore import QPointF, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFontMetrics, QPainter, QPaintEvent, QPalette, QPen, QPolygonF
from PySide6.QtWidgets import QSizePolicy, QWidget

CURVE_COLOR = QColor("#3574f0")
BAND_COLOR = QColor("#f28e2b")


def nice_ticks(low: float, high: float, count: int = 5, integer: bool = False) -> np.ndarray:
    """About `count` round tick values (1, 2, 5 x 10^k steps) covering [low, high]; whole numbers only when
    `integer` (a count of images has no tick at 0.2)."""
    if not math.isfinite(low) or not math.isfinite(high) or high <= low:
        return np.array([low])
    raw = (high - low) / max(count, 1)
    magnitude = 10.0 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    if integer:
        step = max(step, 1.0)
    start = math.ceil(low / step - 1e-9) * step
    return np.arange(start, high + step * 1e-9, step)


class CurvePlot(QWidget):
    """`set_curve(x, y)` draws the curve; `set_band(mean, std, label)` a horizontal band (None hides it)."""

    def __init__(self, x_label: str, y_label: str, curve_label: str = "", parent: QWidget | None = None):
        super().__init__(parent)
        self.x_label, self.y_label, self.curve_label = x_label, y_label, curve_label or y_label
        self._x = np.empty(0)
        self._y = np.empty(0)
        self._band: tuple[float, float, str] | None = None
        self.setMinimumHeight(140)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(400, 200)

    def set_curve(self, x: np.ndarray, y: np.ndarray) -> None:
        self._x = np.asarray(x, dtype=np.float64)
        self._y = np.asarray(y, dtype=np.float64)
        self.update()

    def curve_data(self) -> tuple[np.ndarray, np.ndarray]:
        return self._x.copy(), self._y.copy()

    def set_band(self, mean: float | None, std: float = 0.0, label: str = "") -> None:
        self._band = None if mean is None else (mean - std, mean + std, label)
        self.update()

    def _legend(self, painter: QPainter, fm: QFontMetrics, plot: QRectF) -> None:
        """Bottom right inside the plot: what the line and the band are."""
        entries = [(QPen(CURVE_COLOR, 2), self.curve_label)]
        if self._band is not None:
            entries.append((QPen(BAND_COLOR.darker(130), 1.5, Qt.PenStyle.DashLine), self._band[2]))
        width = max(fm.horizontalAdvance(label) for _, label in entries) + 34
        y = plot.bottom() - 6 - fm.height() * len(entries)
        box = QRectF(plot.right() - width - 6, y - 3, width, fm.height() * len(entries) + 6)
        painter.fillRect(box, self.palette().color(QPalette.ColorRole.Base))
        for pen, label in entries:
            painter.setPen(pen)
            mid = y + fm.height() / 2
            painter.drawLine(QPointF(box.left() + 4, mid), QPointF(box.left() + 24, mid))
            painter.setPen(self.palette().color(QPalette.ColorRole.WindowText))
            painter.drawText(QRectF(box.left() + 30, y, width, fm.height()), Qt.AlignmentFlag.AlignLeft, label)
            y += fm.height()

    def _ranges(self) -> tuple[float, float, float, float]:
        """x from 0 to 3% past the last N (its dot sat on the right-hand frame), y the curve's and band's span
        padded by 8%."""
        x0, x1 = (0.0, float(self._x.max()) * 1.03) if len(self._x) else (0.0, 1.0)
        finite = self._y[np.isfinite(self._y)]
        values = ([float(finite.min()), float(finite.max())] if len(finite) else []) + \
            ([self._band[0], self._band[1]] if self._band else [])
        y0, y1 = (min(values), max(values)) if values else (0.0, 1.0)
        pad = max((y1 - y0) * 0.08, 0.05)
        return x0, max(x1, x0 + 1.0), y0 - pad, y1 + pad

    def plot_area(self) -> QRectF:
        """The frame the curve is drawn in, in the widget's pixels (its axes' labels outside it)."""
        fm = QFontMetrics(self.font())
        left = max(fm.horizontalAdvance(f"{t:g}") for t in nice_ticks(*self._ranges()[2:])) + fm.height() + 10
        return QRectF(left, 8, self.width() - left - 24, self.height() - 8 - 2 * fm.height() - 10)

    def to_pixels(self, x: float, y: float) -> QPointF:
        """Where the point (x, y) is drawn, in the widget's pixels."""
        x0, x1, y0, y1 = self._ranges()
        plot = self.plot_area()
        return QPointF(plot.left() + (x - x0) / (x1 - x0) * plot.width(),
                       plot.bottom() - (y - y0) / (y1 - y0) * plot.height())

    def paintEvent(self, event: QPaintEvent) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.setRenderHint(QPainter.RenderHint.Antialiasing)
        palette = self.palette()
        text = palette.color(QPalette.ColorRole.WindowText)
        painter.fillRect(self.rect(), palette.color(QPalette.ColorRole.Base))
        fm = QFontMetrics(self.font())
        x0, x1, y0, y1 = self._ranges()
        y_ticks = nice_ticks(y0, y1)
        plot = self.plot_area()
        left = plot.left()
        if plot.width() < 10 or plot.height() < 10:
            painter.end()
            return

        def px(x: float) -> float:
            return plot.left() + (x - x0) / (x1 - x0) * plot.width()

        def py(y: float) -> float:
            return plot.bottom() - (y - y0) / (y1 - y0) * plot.height()

        grid = QColor(text)
        grid.setAlpha(40)
        for t in y_ticks:
            painter.setPen(grid)
            painter.drawLine(QPointF(plot.left(), py(t)), QPointF(plot.right(), py(t)))
            painter.setPen(text)
            painter.drawText(QRectF(0, py(t) - fm.height() / 2, left - 6, fm.height()),
                             Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, f"{t:g}")
        for t in nice_ticks(x0, x1, integer=True):
            painter.setPen(grid)
            painter.drawLine(QPointF(px(t), plot.top()), QPointF(px(t), plot.bottom()))
            painter.setPen(text)
            painter.drawText(QRectF(px(t) - 40, plot.bottom() + 3, 80, fm.height()), Qt.AlignmentFlag.AlignHCenter,
                             f"{t:,.0f}")
        painter.setPen(text)
        painter.drawRect(plot)
        painter.drawText(QRectF(plot.left(), self.height() - fm.height() - 2, plot.width(), fm.height()),
                         Qt.AlignmentFlag.AlignHCenter, self.x_label)
        painter.save()
        painter.translate(2, plot.center().y())
        painter.rotate(-90)
        painter.drawText(QRectF(-plot.height() / 2, 0, plot.height(), fm.height()), Qt.AlignmentFlag.AlignHCenter,
                         self.y_label)
        painter.restore()
        if self._band is not None:
            low, high, label = self._band
            fill = QColor(BAND_COLOR)
            fill.setAlpha(60)
            painter.fillRect(QRectF(plot.left(), py(high), plot.width(), max(py(low) - py(high), 1.0)), fill)
            mid = (low + high) / 2
            painter.setPen(QPen(BAND_COLOR.darker(130), 1.5, Qt.PenStyle.DashLine))
            painter.drawLine(QPointF(plot.left(), py(mid)), QPointF(plot.right(), py(mid)))
        self._legend(painter, fm, plot)
        if len(self._x):
            keep = np.unique(np.linspace(0, len(self._x) - 1, min(len(self._x), 800)).astype(np.int64))
            # at most 800 points, a few per pixel column, placed in NumPy: a Python call per point in the GUI thread
            # waits for the interpreter lock at each of them while workers hold it (122 ms for this paint at 50,000
            # gallery samples, 54 ms of it the GUI thread's own)
            xs = plot.left() + (self._x[keep] - x0) / (x1 - x0) * plot.width()
            ys = plot.bottom() - (self._y[keep] - y0) / (y1 - y0) * plot.height()
            painter.setPen(QPen(CURVE_COLOR, 2))
            painter.drawPolyline(QPolygonF([QPointF(x, y) for x, y in zip(xs.tolist(), ys.tolist(), strict=True)]))
            painter.setBrush(CURVE_COLOR)
            painter.drawEllipse(QPointF(px(self._x[-1]), py(self._y[-1])), 3, 3)
        painter.end()
