"""How a view is laid out to become a figure of a given width, and put back exactly as it was afterwards.

A view that reflows (a plot, the unit card, the trial, a panel of wrapped text) is laid out at the figure's width, so
its text prints at its point size; never narrower than its minimum width, where it would squeeze and cut: a view that
needs more room is laid out wider and the figure scales it down (its text prints smaller). A view that is a window
onto more content (tables, trees, thumbnail lists) keeps the size it has on screen, and so does a whole workspace:
the figure shows the rows, columns and panels the screen shows, scaled to the width. A view of a few columns that
asks for it (`widgets.identifiers.declare_whole_columns`) is laid out wide enough for all of them at a preset's
width, as a figure cannot scroll sideways (a beam trace at the 3.5 in preset showed its formulas, a scroll bar and
no IoU or DA). A view that is not on screen (a panel under another one's tab) is laid out at the size it asks for.

While a view is laid out for a figure, the widgets around it never see it change (their layout requests are held
back), so the window's arrangement is the same afterwards.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, QSize
from PySide6.QtWidgets import QAbstractItemView, QApplication, QDockWidget, QTableView, QWidget

from probescope.widgets.identifiers import WHOLE_COLUMNS

ASPECT = 0.75  # height / width of a figure of a view that has no height of its own at a width (a plot)
SETTLE_ROUNDS = 4  # nested layouts: the trial's container, its grid, the grid's cells


def on_screen(widget: QWidget) -> bool:
    """Whether any of `widget` is on screen (a panel under another one's tab is not, though Qt calls it visible)."""
    return widget.isVisible() and not widget.visibleRegion().isEmpty()


def reflows(widget: QWidget) -> bool:
    """Whether `widget` lays itself out anew at another width without hiding anything: not an item view (it would
    show fewer rows or columns) and not a view holding panels (a workspace: they would be squeezed)."""
    return not isinstance(widget, QAbstractItemView) and widget.findChild(QDockWidget) is None


def natural_size(widget: QWidget) -> QSize:
    """The view's own size: on screen, the size it has; elsewhere the size it asks for (never below its minimum)."""
    if on_screen(widget):
        return widget.size()
    return widget.sizeHint().expandedTo(widget.minimumSizeHint()).expandedTo(QSize(64, 48))


def figure_size(widget: QWidget, width: int | None) -> QSize:
    """The size `widget` is laid out at for a figure `width` pixels wide at the screen's resolution (None: its own
    size); see the module text."""
    own = natural_size(widget)
    if width is not None and isinstance(widget, QAbstractItemView) and widget.property(WHOLE_COLUMNS):
        return QSize(max(own.width(), columns_width(widget) or 0), own.height())
    if width is None or not reflows(widget):
        return own
    width = max(width, narrowest(widget))
    return QSize(width, height_at(widget, width))


def columns_width(view: QAbstractItemView) -> int | None:
    """The width `view` shows every column of at (None: it has no header): narrower, it scrolls its last columns
    out of sight."""
    header = view.horizontalHeader() if isinstance(view, QTableView) else getattr(view, "header", lambda: None)()
    if header is None:
        return None
    rows = view.verticalHeader() if isinstance(view, QTableView) else None
    scroll = view.verticalScrollBar()
    return (header.length() + 2 * view.frameWidth() + (rows.width() if rows is not None and rows.isVisible() else 0)
            + (scroll.sizeHint().width() if scroll.isVisibleTo(view) else 0))


def narrowest(widget: QWidget) -> int:
    """The narrowest width a reflowing `widget` shows everything at: its minimum width, and room for every column of
    the tables and trees in it."""
    width = max(widget.minimumSizeHint().width(), widget.minimumWidth())
    for view in widget.findChildren(QAbstractItemView):
        need = columns_width(view)
        if need is not None and view.isVisibleTo(widget):
            width = max(width, widget.width() - view.width() + need)
    return width


def height_at(widget: QWidget, width: int) -> int:
    minimum = max(widget.minimumSizeHint().height(), widget.minimumHeight(), 1)
    if widget.hasHeightForWidth():
        return max(widget.heightForWidth(width), minimum)
    return max(round(width * ASPECT), minimum)


class _HoldLayouts(QObject):
    """Drops the layout requests of `widget`'s ancestors: they keep the geometry they gave it."""

    def __init__(self, widget: QWidget):
        super().__init__()
        self.widget = widget

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802  (Qt override)
        return (event.type() == QEvent.Type.LayoutRequest and isinstance(watched, QWidget)
                and watched.isAncestorOf(self.widget))


def _settle(widget: QWidget) -> None:
    """Layouts (pyqtgraph's included) settle at a new size, a layout's change reaching the layouts inside it
    (each round may post more requests), and an item view's scroll bars at once (Qt does it on a timer); nothing is
    painted on screen meanwhile."""
    for _ in range(SETTLE_ROUNDS):
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)
    if isinstance(widget, QAbstractItemView):
        widget.updateGeometries()
        QApplication.sendPostedEvents(None, QEvent.Type.LayoutRequest)


def _paint_plots(widget: QWidget) -> None:
    """pyqtgraph's axes measure their tick labels as they paint and then take the width those need: each plot is
    painted once off screen, so that the figure has the axes' final widths (its first paint would not)."""
    views = [widget] if isinstance(widget, pg.GraphicsView) else widget.findChildren(pg.GraphicsView)
    for view in views:
        if view is widget or view.isVisibleTo(widget):
            view.grab()
    _settle(widget)


@contextmanager
def laid_out(widget: QWidget, width: int | None) -> Iterator[QSize]:
    """`widget` laid out for a figure `width` pixels wide (see `figure_size`) while exporting; its size and size
    limits are put back afterwards, and the widgets around it never move."""
    size = figure_size(widget, width)
    if size == widget.size():
        yield size
        return
    saved = widget.size(), widget.minimumSize(), widget.maximumSize()
    hold = _HoldLayouts(widget)
    app = QApplication.instance()
    app.installEventFilter(hold)
    try:
        widget.setFixedSize(size)
        _settle(widget)
        _paint_plots(widget)
        if reflows(widget) and width is not None:  # a view whose parts resize with it may need another height now
            height = height_at(widget, size.width())
            if height != size.height():
                size = QSize(size.width(), height)
                widget.setFixedSize(size)
                _settle(widget)
        yield size
    finally:
        widget.setMinimumSize(saved[1])
        widget.setMaximumSize(saved[2])
        widget.resize(saved[0])
        _settle(widget)
        app.removeEventFilter(hold)
