"""How one scored sample is painted in the gallery's grid: its thumbnail, index and badge, and its top classes as
small bars (probescope.widgets.gallery.grid holds the grid and its model). No widget per cell: the delegate paints
every visible one.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
from PySide6.QtCore import QModelIndex, QRect, QRectF, QSize, Qt
from PySide6.QtGui import QColor, QFont, QFontMetrics, QPainter, QPalette, QPixmap, QPixmapCache
from PySide6.QtWidgets import QApplication, QStyle, QStyledItemDelegate, QStyleOptionViewItem, QWidget

from probescope.widgets.ink import ink_color, readable_on
from probescope.widgets.plots_bars import class_color

if TYPE_CHECKING:
    from probescope.widgets.gallery.grid import GalleryModel

BAR_ROW = 12  # pixels per class bar under a thumbnail, at least (more when the small font needs it)
TEXT_ROW = 15


class GalleryDelegate(QStyledItemDelegate):
    """Paints a cell: thumbnail, index and badge, and one small bar per top class.

    An image's top classes never change, so its bars are drawn once into a cached pixmap; a repaint (the badge
    moves with the marginal while samples stream) then costs two pixmap blits and two short texts per cell.
    """

    def __init__(self, thumb: int, parent: QWidget | None = None):
        super().__init__(parent)
        self.thumb = thumb
        self.missing: set[int] = set()
        self._font: QFont | None = None

    def bar_row(self) -> int:
        """Pixels per class bar: a bar (the row less a pixel above and below) as tall as the small font and its
        underscore, which sits below the descent ('sunset_sea-s' read 'sunset sea-s' off the bar)."""
        return max(BAR_ROW, QFontMetrics(self.small_font(QApplication.font())).height() + 4)

    def cell_size(self) -> QSize:
        return QSize(self.thumb + 12, self.thumb + 12 + TEXT_ROW + 3 * self.bar_row() + 4)

    def sizeHint(self, option: QStyleOptionViewItem, index: QModelIndex) -> QSize:  # noqa: N802
        return self.cell_size()

    def small_font(self, base: QFont) -> QFont:
        if self._font is None:
            self._font = QFont(base)
            self._font.setPointSizeF(max(base.pointSizeF() * 0.8, 6.0))
        return self._font

    def paint(self, painter: QPainter, option: QStyleOptionViewItem, index: QModelIndex) -> None:
        model: GalleryModel = index.model()
        image, top, top_p, badge = model.cell(index.row())
        rect: QRect = option.rect
        palette = option.palette
        selected = bool(option.state & QStyle.StateFlag.State_Selected)
        painter.save()
        if selected:
            painter.fillRect(rect.adjusted(1, 1, -1, -1), palette.color(QPalette.ColorRole.Highlight))
        box = QRect(rect.x() + (rect.width() - self.thumb) // 2, rect.y() + 6, self.thumb, self.thumb)
        pixmap = model.pixmap(image)
        if pixmap is None:
            painter.fillRect(box, palette.color(QPalette.ColorRole.AlternateBase))
            if model.has_images:
                self.missing.add(image)
            else:
                painter.setPen(palette.color(QPalette.ColorRole.PlaceholderText))
                painter.drawText(box, Qt.AlignmentFlag.AlignCenter, "no image\n(p(y|x) given)")
        else:
            size = pixmap.size().scaled(box.size(), Qt.AspectRatioMode.KeepAspectRatio)
            target = QRect(box.x() + (box.width() - size.width()) // 2, box.y() + (box.height() - size.height()) // 2,
                           size.width(), size.height())
            if size != pixmap.size():
                painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
            painter.drawPixmap(target, pixmap)
        font = self.small_font(option.font)
        painter.setFont(font)
        if model.flagged(image):
            self._copy_tag(painter, box, palette)
        text_color = palette.color(QPalette.ColorRole.HighlightedText if selected else QPalette.ColorRole.Text)
        painter.setPen(text_color)
        line = QRect(rect.x() + 4, box.bottom() + 2, rect.width() - 8, TEXT_ROW)
        painter.drawText(line, Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter, f"#{image}")
        if badge:
            painter.drawText(line, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter, badge)
        painter.drawPixmap(rect.x() + 4, line.bottom() + 1, self._bars(model, image, top, top_p, rect.width() - 8,
                                                                       font, text_color))
        painter.restore()

    @staticmethod
    def _copy_tag(painter: QPainter, box: QRect, palette: QPalette) -> None:
        """'copy?' on the thumbnail's top left corner, in the warning colour."""
        colour = ink_color("warning", palette)
        tag = QFontMetrics(painter.font()).boundingRect("copy?").adjusted(-3, -1, 3, 1)
        tag.moveTopLeft(box.topLeft())
        painter.fillRect(tag, colour)
        painter.setPen(readable_on(colour))
        painter.drawText(tag, Qt.AlignmentFlag.AlignCenter, "copy?")

    def _bars(self, model: GalleryModel, image: int, top: np.ndarray, top_p: np.ndarray, width: int, font: QFont,
              color: QColor) -> QPixmap:
        key = f"{model.key(image)}-bars-{width}-{color.rgba()}"
        cached = QPixmapCache.find(key)
        if cached is not None:
            return cached
        row = self.bar_row()
        pixmap = QPixmap(width, row * len(top))
        pixmap.fill(Qt.GlobalColor.transparent)
        painter = QPainter(pixmap)
        painter.setFont(font)
        fm = QFontMetrics(font)
        for i, (c, p) in enumerate(zip(top, top_p, strict=True)):
            if c < 0:
                continue
            bar, filled = QRectF(0, i * row + 1, width, row - 2), width * float(p)
            painter.fillRect(bar, QColor(127, 127, 127, 40))
            painter.fillRect(QRectF(0, bar.y(), filled, bar.height()), class_color(int(c)))
            label = fm.elidedText(f"{model.class_name(int(c))} {p:.2f}", Qt.TextElideMode.ElideMiddle, width - 4)
            # over the bar in black or white, whichever reads on its colour; beside it in the cell's text colour
            for part, pen in ((QRectF(0, bar.y(), filled, bar.height()), readable_on(class_color(int(c)))),
                              (QRectF(filled, bar.y(), width - filled, bar.height()), color)):
                painter.setClipRect(part)
                painter.setPen(pen)
                painter.drawText(bar.adjusted(3, 0, 0, 0), Qt.AlignmentFlag.AlignLeft | Qt.AlignmentFlag.AlignVCenter,
                                 label)
        painter.end()
        QPixmapCache.insert(key, pixmap)
        return pixmap
