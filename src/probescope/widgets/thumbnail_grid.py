"""A grid of captioned thumbnails: QListView in icon mode over a list model, no widget per item.

Thousands of items stay cheap: the model holds QImages (built in workers), pixmaps are made on demand in the GUI
thread and cached in QPixmapCache. Items can be appended as partial results arrive.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QAbstractListModel, QModelIndex, QPersistentModelIndex, QSize, Qt, Signal
from PySide6.QtGui import QImage, QPixmap, QPixmapCache
from PySide6.QtWidgets import QAbstractItemView, QListView, QWidget

QPixmapCache.setCacheLimit(max(QPixmapCache.cacheLimit(), 256 * 1024))  # KiB: thumbnails of a large gallery


@dataclass(frozen=True)
class Thumbnail:
    image: QImage
    caption: str
    tooltip: str = ""


class ThumbnailModel(QAbstractListModel):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._items: list[Thumbnail] = []
        self._generation = 0  # part of the pixmap cache key, so replaced items never show stale pixmaps

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self._items)

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid():
            return None
        item = self._items[index.row()]
        if role == Qt.ItemDataRole.DisplayRole:
            return item.caption
        if role == Qt.ItemDataRole.ToolTipRole:
            return item.tooltip or item.caption
        if role == Qt.ItemDataRole.DecorationRole:
            key = f"probescope-thumb-{id(self)}-{self._generation}-{index.row()}"
            pixmap = QPixmapCache.find(key)
            if pixmap is None:
                pixmap = QPixmap.fromImage(item.image)
                QPixmapCache.insert(key, pixmap)
            return pixmap
        return None

    def set_items(self, items: list[Thumbnail]) -> None:
        self.beginResetModel()
        self._generation += 1
        self._items = list(items)
        self.endResetModel()

    def append_items(self, items: list[Thumbnail]) -> None:
        if not items:
            return
        first = len(self._items)
        self.beginInsertRows(QModelIndex(), first, first + len(items) - 1)
        self._items.extend(items)
        self.endInsertRows()

    def item(self, row: int) -> Thumbnail:
        return self._items[row]


class SteppingListView(QListView):
    """A list view whose current item moves by an offset: the workspaces' next/previous item."""

    def current_row(self) -> int:
        return self.currentIndex().row()

    def step(self, offset: int) -> None:
        """Move the current item by `offset`, clamped to the list; the first step selects the first item."""
        model = self.model()
        n = model.rowCount()
        if n == 0:
            return
        row = self.current_row()
        row = 0 if row < 0 else min(max(row + offset, 0), n - 1)
        self.setCurrentIndex(model.index(row, 0))


class ThumbnailGrid(SteppingListView):
    """Captioned thumbnails in a wrapping grid; `current_changed(row)` follows the keyboard and the mouse."""

    current_changed = Signal(int)

    def __init__(self, thumb_size: int = 128, parent: QWidget | None = None):
        super().__init__(parent)
        self.thumbnails = ThumbnailModel(self)
        self.setModel(self.thumbnails)
        self.setViewMode(QListView.ViewMode.IconMode)
        self.setResizeMode(QListView.ResizeMode.Adjust)
        self.setMovement(QListView.Movement.Static)
        self.setUniformItemSizes(True)
        self.setWrapping(True)
        self.setSpacing(6)
        self.setIconSize(QSize(thumb_size, thumb_size))
        self.setGridSize(QSize(thumb_size + 36, thumb_size + 34))
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setWordWrap(True)
        self.selectionModel().currentChanged.connect(lambda cur, _prev: self.current_changed.emit(cur.row()))

