"""A scrolling grid of scored samples that stays smooth with 50,000 of them.

One QListView (list mode, left-to-right flow, wrapping, uniform cells: Qt lays the grid out arithmetically) over a
model that holds only arrays: the order of image indices to show and each image's top classes. A delegate paints
every visible cell (thumbnail, index, a badge value, the top classes as small bars), so there is no widget per
item. Thumbnails are QPixmaps in QPixmapCache, made from QImages that arrive from workers; a cell without one
draws a placeholder, and the grid asks for the visible missing thumbnails (`thumbnails_wanted`) after a short
pause, so fast scrolling never queues work for images already scrolled past.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from PySide6.QtCore import (
    QAbstractListModel,
    QModelIndex,
    QPersistentModelIndex,
    QPoint,
    QRect,
    QSize,
    Qt,
    QTimer,
    Signal,
)
from PySide6.QtGui import QImage, QPainter, QPalette, QPixmap, QPixmapCache
from PySide6.QtWidgets import (
    QAbstractItemView,
    QListView,
    QSizePolicy,
    QStyleOptionViewItem,
    QWidget,
)

from probescope.widgets.gallery.cell import GalleryDelegate
from probescope.widgets.thumbnail_grid import SteppingListView

QPixmapCache.setCacheLimit(max(QPixmapCache.cacheLimit(), 256 * 1024))  # KiB

LAYOUT_BATCH = 2000  # cells laid out per event-loop turn


class GalleryModel(QAbstractListModel):
    """Rows are `order[row]` image indices; per-image arrays are indexed by image index."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._order = np.empty(0, dtype=np.int64)
        self._top = np.empty((0, 0), dtype=np.int64)
        self._top_p = np.empty((0, 0))
        self._badge: np.ndarray | None = None
        self._badge_label = ""
        self._flags: np.ndarray | None = None  # per image: tagged 'copy?' (a possible copy of a real image)
        self._names: list[str] = []
        self._kept: dict[int, QImage] = {}  # thumbnails that cannot be made again (generator samples)
        self.has_images = True  # False: scores without images (the worked example), cells say so
        self._generation = 0

    # -- data -----------------------------------------------------------------------------------------------------
    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self._order)

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        image = int(self._order[index.row()])
        if role == Qt.ItemDataRole.DisplayRole:
            return f"#{image}"
        if role == Qt.ItemDataRole.ToolTipRole:
            bars = ", ".join(f"{self.class_name(int(c))} {p:.2f}" for c, p in zip(self._top[image],
                                                                                   self._top_p[image], strict=True)
                             if c >= 0)
            return f"sample {image}: {bars}"
        if role == Qt.ItemDataRole.UserRole:
            return image
        return None

    def class_name(self, k: int) -> str:
        return self._names[k] if 0 <= k < len(self._names) else str(k)

    def image_index(self, row: int) -> int:
        return int(self._order[row])

    def row_of(self, image: int) -> int:
        """The row showing `image`, or -1 when it is filtered out."""
        hits = np.flatnonzero(self._order == image)
        return int(hits[0]) if len(hits) else -1

    @property
    def order(self) -> np.ndarray:
        return self._order.copy()

    def cell(self, row: int) -> tuple[int, np.ndarray, np.ndarray, str]:
        """What a cell shows: image index, its top classes and probabilities, and the badge text."""
        image = int(self._order[row])
        value = np.nan if self._badge is None else float(self._badge[image])
        badge = f"{self._badge_label} {value:.2f}" if np.isfinite(value) else ""
        return image, self._top[image], self._top_p[image], badge

    def set_flags(self, flags: np.ndarray | None) -> None:
        """Which images carry the 'copy?' tag (by image index; images past its end carry none)."""
        self._flags = None if flags is None else np.asarray(flags, dtype=bool)

    def flagged(self, image: int) -> bool:
        return self._flags is not None and image < len(self._flags) and bool(self._flags[image])

    def set_items(self, order: np.ndarray, top: np.ndarray, top_p: np.ndarray, names: Sequence[str],
                  badge: np.ndarray | None = None, badge_label: str = "") -> None:
        """Show `order`; a pure extension of the current order inserts rows (streaming keeps the scroll and the
        selection), anything else is a layout change that keeps the selected image selected."""
        order = np.asarray(order, dtype=np.int64)
        self._top, self._top_p, self._names = top, top_p, list(names)
        self._badge, self._badge_label = badge, badge_label
        old = self._order
        if len(order) >= len(old) and np.array_equal(order[: len(old)], old):
            if len(order) > len(old):
                self.beginInsertRows(QModelIndex(), len(old), len(order) - 1)
                self._order = order
                self.endInsertRows()
            if len(old):
                self.dataChanged.emit(self.index(0), self.index(len(old) - 1))
            return
        self.layoutAboutToBeChanged.emit()
        persistent = self.persistentIndexList()
        images = [int(old[i.row()]) if 0 <= i.row() < len(old) else -1 for i in persistent]
        self._order = order
        position = np.full(int(max(order.max(initial=-1), max(images, default=-1))) + 2, -1, dtype=np.int64)
        position[order] = np.arange(len(order))
        moved = [self.index(int(position[im])) if im >= 0 and position[im] >= 0 else QModelIndex() for im in images]
        self.changePersistentIndexList(persistent, moved)
        self.layoutChanged.emit()

    def clear(self) -> None:
        self.beginResetModel()
        self._order = np.empty(0, dtype=np.int64)
        self._kept.clear()
        self._generation += 1
        self.endResetModel()

    # -- thumbnails -----------------------------------------------------------------------------------------------
    def key(self, image: int) -> str:
        """Cache key of everything drawn for `image` (changes when the images or their scores are replaced)."""
        return f"probescope-gallery-{id(self)}-{self._generation}-{image}"

    def pixmap(self, image: int) -> QPixmap | None:
        pixmap = QPixmapCache.find(self.key(image))
        if pixmap is None and image in self._kept:
            pixmap = QPixmap.fromImage(self._kept[image])
            QPixmapCache.insert(self.key(image), pixmap)
        return pixmap

    def kept_thumbnail(self, image: int) -> QImage | None:
        return self._kept.get(image)

    def add_thumbnails(self, images: dict[int, QImage], keep: bool = False) -> None:
        """Thumbnails by image index (made in workers); `keep` holds them for good (no way to make them again)."""
        for image, qimage in images.items():
            if keep:
                self._kept[image] = qimage
            QPixmapCache.insert(self.key(image), QPixmap.fromImage(qimage))


class GalleryGrid(SteppingListView):
    """The grid. `current_image_changed(image index)` follows keyboard and mouse; `thumbnails_wanted(indices)`
    asks for the visible images that have no thumbnail yet."""

    current_image_changed = Signal(int)
    thumbnails_wanted = Signal(list)

    def __init__(self, thumb: int = 96, parent: QWidget | None = None):
        super().__init__(parent)
        self.thumbnails = GalleryModel(self)
        self.setModel(self.thumbnails)
        self.delegate = GalleryDelegate(thumb, self)
        self.setItemDelegate(self.delegate)
        self.setViewMode(QListView.ViewMode.ListMode)
        self.setFlow(QListView.Flow.LeftToRight)
        self.setWrapping(True)
        self.setResizeMode(QListView.ResizeMode.Adjust)
        self.setMovement(QListView.Movement.Static)
        self.setUniformItemSizes(True)
        # laid out 2,000 cells per event-loop turn: a new order of 50,000 samples (a sort) placed every cell at
        # once, 60-120 ms of the GUI thread (Qt asks the model's row count once per cell)
        self.setLayoutMode(QListView.LayoutMode.Batched)
        self.setBatchSize(LAYOUT_BATCH)
        self.setGridSize(self.delegate.cell_size())
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setVerticalScrollMode(QAbstractItemView.ScrollMode.ScrollPerPixel)
        self.verticalScrollBar().setSingleStep(24)
        self._want_timer = QTimer(self)
        self._want_timer.setSingleShot(True)
        self._want_timer.setInterval(40)
        self._want_timer.timeout.connect(self._ask_for_thumbnails)
        self.verticalScrollBar().valueChanged.connect(lambda _v: self._want_timer.start())
        self.selectionModel().currentChanged.connect(self._current_changed)
        self.thumbnails.rowsInserted.connect(lambda *_: self._want_timer.start())
        self.thumbnails.layoutChanged.connect(lambda *_: self._want_timer.start())
        self.thumbnails.modelReset.connect(lambda *_: self._want_timer.start())

    def _current_changed(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            self.current_image_changed.emit(self.thumbnails.image_index(current.row()))

    def current_image(self) -> int:
        """The selected image index, or -1."""
        row = self.current_row()
        return self.thumbnails.image_index(row) if row >= 0 else -1

    def select_image(self, image: int) -> bool:
        row = self.thumbnails.row_of(image)
        if row < 0:
            return False
        index = self.thumbnails.index(row)
        if not self.visualRect(index).isValid():  # the batched layout has not reached it: finish it in one pass,
            self.setLayoutMode(QListView.LayoutMode.SinglePass)  # so the view can scroll to the cell
            self.doItemsLayout()
            self.setLayoutMode(QListView.LayoutMode.Batched)
        self.setCurrentIndex(index)
        return True

    def visible_rows(self) -> range:
        """Rows whose cells intersect the viewport (a little beyond, for the next scroll step)."""
        n = self.thumbnails.rowCount()
        grid = self.gridSize()
        first = self.indexAt(QPoint(grid.width() // 2, grid.height() // 2))
        start = first.row() if first.isValid() else 0
        columns = max(1, self.viewport().width() // max(grid.width(), 1))
        rows = self.viewport().height() // max(grid.height(), 1) + 2
        return range(max(start - columns, 0), min(start + columns * rows, n))

    def missing_thumbnails(self) -> list[int]:
        model = self.thumbnails
        return [model.image_index(r) for r in self.visible_rows() if model.pixmap(model.image_index(r)) is None]

    def _ask_for_thumbnails(self) -> None:
        self.delegate.missing.clear()
        wanted = self.missing_thumbnails()
        if wanted:
            self.thumbnails_wanted.emit(wanted)

    def paintEvent(self, event) -> None:  # noqa: N802
        super().paintEvent(event)
        if self.delegate.missing and not self._want_timer.isActive():
            self._want_timer.start()

    def resizeEvent(self, event) -> None:  # noqa: N802
        super().resizeEvent(event)
        self._want_timer.start()


class ContactSheet(QWidget):
    """The first `rows` cells of a gallery laid out as a sheet, painted by the grid's delegate: an exportable
    figure of a chosen selection (sort and filter first, then export). Up to `COLUMNS` cells a line, fewer where
    the sheet is narrower (a paper column's figure): it is then taller, and every cell is whole."""

    COLUMNS = 8

    def __init__(self, model: GalleryModel, delegate: GalleryDelegate, parent: QWidget | None = None):
        super().__init__(parent)
        self.model, self.delegate = model, delegate
        self._rows = 0
        policy = QSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Preferred)
        policy.setHeightForWidth(True)
        self.setSizePolicy(policy)
        self.set_rows(0)

    def rows(self) -> int:
        return min(self._rows, self.model.rowCount())

    def set_rows(self, rows: int) -> None:
        self._rows = rows
        self.resize(self.sizeHint())
        self.update()

    def columns(self, width: int) -> int:
        return max(1, min(self.COLUMNS, self.rows(), (width - 8) // self.delegate.cell_size().width()))

    def hasHeightForWidth(self) -> bool:  # noqa: N802  (Qt override)
        return True

    def heightForWidth(self, width: int) -> int:  # noqa: N802  (Qt override)
        return max(1, -(-self.rows() // self.columns(width))) * self.delegate.cell_size().height() + 8

    def sizeHint(self) -> QSize:  # noqa: N802  (Qt override)
        width = max(1, min(self.COLUMNS, self.rows())) * self.delegate.cell_size().width() + 8
        return QSize(width, self.heightForWidth(width))

    def minimumSizeHint(self) -> QSize:  # noqa: N802  (Qt override)
        width = self.delegate.cell_size().width() + 8
        return QSize(width, self.heightForWidth(width))

    def paintEvent(self, event) -> None:  # noqa: N802
        painter = QPainter(self)
        painter.fillRect(self.rect(), self.palette().color(QPalette.ColorRole.Base))
        cell = self.delegate.cell_size()
        option = QStyleOptionViewItem()
        option.palette = self.palette()
        option.font = self.font()
        columns = self.columns(self.width())
        for row in range(self.rows()):
            option.rect = QRect(4 + (row % columns) * cell.width(), 4 + (row // columns) * cell.height(),
                                cell.width(), cell.height())
            self.delegate.paint(painter, option, self.model.index(row))
        painter.end()
