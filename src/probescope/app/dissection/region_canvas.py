"""The Image view's picture: the image with each firing unit's region tinted in its concept's colour and named,
and the pixel a click picks (image_panel.py holds the rest of the view)."""

from __future__ import annotations

from PySide6.QtCore import QPoint, QPointF, QRectF, QSize, Qt, Signal
from PySide6.QtGui import QColor, QFont, QFontMetrics, QImage, QMouseEvent, QPainter, QPen
from PySide6.QtWidgets import (
    QSizePolicy,
    QWidget,
)


class RegionCanvas(QWidget):
    """The picture scaled to fit (nearest: the segmentation's pixels stay visible), each region's name written on
    it in its colour (the largest regions first, none over another: the table below lists them all);
    `clicked(y, x)` in the picture's pixels."""

    clicked = Signal(int, int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.image: QImage | None = None
        self.names: list[tuple[str, int, int, tuple]] = []  # (text, y, x in picture pixels, its colour)
        self.marked: tuple[int, int] | None = None
        self.setMinimumSize(200, 200)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Expanding)
        self.setCursor(Qt.CursorShape.CrossCursor)

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(320, 320)

    def show_picture(self, image: QImage | None, names: list[tuple[str, int, int, tuple]]) -> None:
        self.image, self.names, self.marked = image, names, None
        self.update()

    def _frame(self) -> QRectF:
        """Where the picture is drawn: centred, as large as fits."""
        w, h = self.image.width(), self.image.height()
        s = min(self.width() / w, self.height() / h)
        return QRectF((self.width() - s * w) / 2, (self.height() - s * h) / 2, s * w, s * h)

    def paintEvent(self, _event) -> None:  # noqa: N802
        if self.image is None:
            return
        p = QPainter(self)
        frame = self._frame()
        p.drawImage(frame, self.image)
        scale = frame.width() / self.image.width()
        font = QFont(self.font())
        font.setPointSizeF(font.pointSizeF() * 0.9)
        p.setFont(font)
        metrics = QFontMetrics(font)
        placed: list[QRectF] = []
        for text, y, x, color in self.names:  # largest region first; a label that would cover another is left out
            shown = metrics.elidedText(text, Qt.TextElideMode.ElideRight, int(frame.width()) - 6)
            box = QRectF(0, 0, metrics.horizontalAdvance(shown) + 6, metrics.height() + 2)
            box.moveCenter(QPointF(frame.left() + (x + 0.5) * scale, frame.top() + (y + 0.5) * scale))
            box.moveLeft(min(max(box.left(), frame.left()), frame.right() - box.width()))
            box.moveTop(min(max(box.top(), frame.top()), frame.bottom() - box.height()))
            if any(box.intersects(other) for other in placed):
                continue
            placed.append(box)
            p.fillRect(box, QColor(*color))
            p.setPen(QColor(0, 0, 0) if sum(color) > 380 else QColor(255, 255, 255))
            p.drawText(box, Qt.AlignmentFlag.AlignCenter, shown)
        if self.marked is not None:
            y, x = self.marked
            p.setPen(QPen(QColor(255, 255, 0), 2))
            p.drawEllipse(frame.left() + (x + 0.5) * scale - 5, frame.top() + (y + 0.5) * scale - 5, 10, 10)
        p.end()

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        if self.image is None or event.button() != Qt.MouseButton.LeftButton:
            return
        frame = self._frame()
        scale = frame.width() / self.image.width()
        x = int((event.position().x() - frame.left()) / scale)
        y = int((event.position().y() - frame.top()) / scale)
        if 0 <= y < self.image.height() and 0 <= x < self.image.width():
            self.marked = (y, x)
            self.update()
            self.clicked.emit(y, x)

    def point_of(self, y: int, x: int) -> QPoint:
        """The widget point at the centre of picture pixel (y, x) (for tests and scripted clicks)."""
        frame = self._frame()
        scale = frame.width() / self.image.width()
        return QPoint(int(frame.left() + (x + 0.5) * scale), int(frame.top() + (y + 0.5) * scale))
