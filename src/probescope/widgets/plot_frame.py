"""The look and feel every pyqtgraph plot in the app shares: the theme's background and text (light or dark,
following the application palette as it changes), axes without SI prefixes, no context menu of pyqtgraph's (the
view's figure menu has Reset View), and a wheel that scrolls the panel the plot sits in until the plot is clicked
(or a modifier is held): scrolling down a panel of plots zoomed each plot it passed.

Readable at any size (issue 45): axes whose tick labels keep their distance (`plot_axes.FigureAxis`), a legend in a
row of its own under the x axis (`LegendRow`: never over the data), and a plot that asks for the height its title,
axis and legend take plus a usable data area (`room_changed`; `PlotBox` passes it on to the widget holding it)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import pyqtgraph as pg
from PySide6.QtCore import QEvent, QSize, Qt, QTimer, Signal
from PySide6.QtGui import QFocusEvent, QMouseEvent, QPalette, QTextOption, QWheelEvent
from PySide6.QtWidgets import QScrollArea, QVBoxLayout, QWidget

from probescope.widgets.ink import ink_color
from probescope.widgets.plot_axes import FigureAxis

LEGEND_ROW = 4  # the plot item's grid row under its bottom axis (0 title, 1 top axis, 2 view, 3 bottom axis)
MIN_VIEW_HEIGHT = 80  # pixels of data area a plot asks for beside its title, axis and legend
PADDING = 0.06  # of the data's span on each side of the data area: no point on its frame


class LegendRow(pg.LegendItem):
    """A legend in the plot's own layout, under the x axis: as many entries side by side as the width takes, in rows
    of a fixed height (pyqtgraph's legend floats over the data; placed in a layout as it is, its own resizing put it
    at the plot's top left until the next layout pass, over the axis)."""

    def __init__(self, plot_item: pg.PlotItem, changed: Callable[[], None] | None = None, **options):
        """`changed()` is called when entries come or go (the plot's room changes)."""
        self._plot_item, self._width, self._changed = plot_item, 0.0, changed
        super().__init__(pen=pg.mkPen(None), **options)
        self.layout.setContentsMargins(4, 1, 4, 1)
        plot_item.layout.addItem(self, LEGEND_ROW, 1)

    def updateSize(self) -> None:  # noqa: N802  (pyqtgraph override)
        self.fit(self._width)
        if self._changed is not None:
            self._changed()

    def fit(self, width: float) -> float:
        """Lay the entries out for `width` pixels; the row's height."""
        self._width = width
        if not self.items:
            height = 0.0
        else:
            hint = Qt.SizeHint.PreferredSize
            entry = max(s.effectiveSizeHint(hint).width() + label.effectiveSizeHint(hint).width() for s, label
                        in self.items) + self.layout.horizontalSpacing() * 2 + 3
            columns = max(1, min(len(self.items), int((width - 8) // entry)))
            if columns != self.columnCount:
                self.setColumnCount(columns)
            line = max(max(s.effectiveSizeHint(hint).height(), label.effectiveSizeHint(hint).height())
                       for s, label in self.items)
            height = math.ceil(len(self.items) / columns) * line + 2
        self.setMinimumHeight(height)
        self.setMaximumHeight(height)
        self._plot_item.layout.setRowFixedHeight(LEGEND_ROW, height)
        return height


class FigurePlot(pg.PlotWidget):
    """A plot ready for figures. `set_title` and `add_legend` keep title and legend in the theme's text colour;
    `room_changed(height)` when the height it needs changes (its title wraps, its legend takes another row)."""

    room_changed = Signal(int)

    def __init__(self, title: str, left: str, bottom: str, integer: Sequence[str] = (), **options):
        """`integer`: the axes ("left", "bottom") that count or number things (whole-number ticks); `options` go to
        pyqtgraph's PlotWidget (e.g. `axisItems`, which replace the figure axes)."""
        self._ready = False  # (palette changes arrive while pyqtgraph builds the plot)
        self._asked = 0  # the minimum height the plot's owner asked for
        self._room = 0  # the height its title, bottom axis, legend and MIN_VIEW_HEIGHT of data take
        axes = {name: FigureAxis(name, integer=name in integer) for name in ("left", "bottom")}
        super().__init__(axisItems={**axes, **options.pop("axisItems", {})}, **options)
        self._title = title
        self._labels = {"left": left, "bottom": bottom}
        self._legends: list[LegendRow] = []
        self.getViewBox().setDefaultPadding(PADDING)
        self.getAxis("bottom").geometryChanged.connect(self._fit_room)  # (taller when its labels wrap)
        self._beside = 0.0  # the width beside the data area the title was last fitted to
        self.plotItem.geometryChanged.connect(self._beside_changed)  # (a colour bar shown beside the data)
        self._hint = super().sizeHint()
        self._room_timer = QTimer(self)  # (a minimum height changed within a resize left the viewport behind)
        self._room_timer.setSingleShot(True)
        self._room_timer.timeout.connect(self._apply_room)
        self._applied: tuple[int, int] = (0, 0)  # the colours apply_palette last drew in
        self._inked: list[tuple[pg.TextItem, str]] = []
        self._clicked = False  # clicked since it last had the focus: the wheel zooms it
        for axis in self._labels:
            self.getAxis(axis).enableAutoSIPrefix(False)
        self.setMenuEnabled(False)
        self._ready = True
        self.apply_palette()

    def set_title(self, title: str) -> None:
        self._title = title
        self.setTitle(title, color=self._text().name(), size="10pt")
        self._fit_title()
        self._fit_room()

    def _fit_title(self) -> None:
        """The title wraps (centred) where it is wider than the plot, e.g. in a paper column's figure: pyqtgraph
        would make the plot as wide as the title, beyond the view, and cut it."""
        if not self._ready or not self._title or self.plotItem is None:
            return
        self._beside = self._beside_view()
        label, room = self.plotItem.titleLabel, max(self.width() - self._beside - 16, 40)
        item = label.item
        item.setTextWidth(-1)
        if item.boundingRect().width() > room:
            item.setTextWidth(room)
            option = item.document().defaultTextOption()
            option.setAlignment(Qt.AlignmentFlag.AlignHCenter)
            option.setWrapMode(QTextOption.WrapMode.WordWrap)  # between words only: a word too long sticks out
            item.document().setDefaultTextOption(option)
        box = item.boundingRect()
        height = box.height() + 2  # (pyqtgraph's row is 30 px: 5 of them lost to the data in a short panel)
        label.setMinimumWidth(min(box.width(), room))
        label.setMinimumHeight(box.height())
        label.setMaximumHeight(height)
        self.plotItem.layout.setRowFixedHeight(0, height)
        whole = self.plotItem  # made wider than the view by the title before: back to the view's width
        if whole.geometry().width() > self.range.width() + 0.5 and whole.minimumWidth() <= self.range.width():
            whole.setGeometry(self.range)

    def _beside_changed(self) -> None:
        """The title fitted again when the columns beside the data area change width."""
        if self._ready and self.plotItem is not None and abs(self._beside_view() - self._beside) > 0.5:
            self._fit_title()

    def _beside_view(self) -> float:
        """The width of the plot's columns left and right of its data area: the left axis, a colour bar and its
        axis (the title is centred over the data area; as wide as the plot, it pushed a colour bar's ticks past the
        plot's right edge)."""
        grid, view = self.plotItem.layout, self.getViewBox().geometry()
        widths: dict[int, float] = {}  # by where a column starts
        for k in range(grid.count()):
            box = grid.itemAt(k).geometry()
            if box.right() <= view.left() + 1 or box.left() >= view.right() - 1:
                widths[round(box.left())] = max(widths.get(round(box.left()), 0.0), box.width())
        return sum(widths.values())

    def _fit_room(self) -> None:
        """The legends laid out for the width, and the height the plot needs for them, its title and axis."""
        if not self._ready or self.plotItem is None:
            return
        left = self.getAxis("left")
        width = self.width() - (left.width() if left.isVisible() else 0) - 8
        legends = sum(legend.fit(width) for legend in self._legends)
        title = self.plotItem.layout.rowMaximumHeight(0) if self.plotItem.titleLabel.isVisible() else 0
        bottom = self.getAxis("bottom")
        axis = bottom.maximumHeight() if bottom.isVisible() else 0
        room = math.ceil(title + axis + legends + MIN_VIEW_HEIGHT)
        if room != self._room:
            self._room = room
            self._room_timer.start(0)

    def _apply_room(self) -> None:
        """The minimum height for the room, at the next turn of the event loop: set during a resize, it resized
        the plot again within that resize, and its viewport kept the first size (the legend's last row cut off)."""
        super().setMinimumHeight(max(self._asked, self._room))
        self.room_changed.emit(self._room)

    def sizeHint(self) -> QSize:  # noqa: N802  (Qt override)
        """The size it asked for when made: a graphics view's follows the size it was last given, so a second
        layout pass (e.g. after its legend took a row) shared a row of plots by their current sizes, and one
        that had been squeezed for a moment stayed squeezed (the catch-trials chart at 68 px)."""
        return self._hint

    def room(self) -> int:
        """The height the plot needs: its title, bottom axis and legend, and a usable data area."""
        return self._room

    def setMinimumHeight(self, height: int) -> None:  # noqa: N802  (Qt override: the owner's wish, or more)
        self._asked = height
        super().setMinimumHeight(max(height, self._room))

    def resizeEvent(self, event) -> None:  # noqa: N802  (Qt override)
        if self._ready and self.plotItem is not None:  # (pyqtgraph drops its plot item when the widget closes)
            self._fit_title()  # before the plot takes the new size: the title's width bounds the plot's
            self._fit_room()
        super().resizeEvent(event)

    def add_legend(self, **options) -> LegendRow:
        """A legend under the x axis, in a row of its own: never over the data, however the data fall. Items plotted
        with a name are listed in the first legend."""
        base = self.palette().color(QPalette.ColorRole.Base)
        legend = LegendRow(self.getPlotItem(), self._fit_room, labelTextColor=self._text(), brush=base, **options)
        if self.getPlotItem().legend is None:
            self.getPlotItem().legend = legend  # (where pyqtgraph lists a named item)
        self._legends.append(legend)
        self._fit_room()
        return legend

    def add_inked(self, item: pg.TextItem, role: str) -> None:
        """Keep `item`'s text in the theme's `role` ink (see widgets.ink), as the theme changes."""
        self._inked.append((item, role))
        item.setColor(ink_color(role, self.palette()))

    def inked_items(self) -> list[tuple[pg.TextItem, str]]:
        return list(self._inked)

    def _text(self):
        return self.palette().color(QPalette.ColorRole.Text)

    def apply_palette(self) -> None:
        """Background, axes, labels, title and legends in the palette's colours."""
        self._applied = self._colours()
        text, base = self._text(), self.palette().color(QPalette.ColorRole.Base)
        self.setBackground(base)
        self.setTitle(self._title, color=text.name(), size="10pt")
        for item in self.scene().items():  # every axis: the plot's and any beside it (a colour bar's)
            if isinstance(item, pg.AxisItem):
                item.setPen(text)
                item.setTextPen(text)
                if item.labelText and item not in (self.getAxis(a) for a in self._labels):
                    item.setLabel(item.labelText, color=text.name())
        self._fit_title()
        for axis, label in self._labels.items():
            self.setLabel(axis, label, color=text.name())
        self._fit_room()
        for legend in self._legends:
            legend.setLabelTextColor(text)
            legend.setBrush(base)  # opaque, in the plot's background
            for _sample, label in legend.items:
                label.setText(label.text, color=text)
        for item, role in self._inked:
            item.setColor(ink_color(role, self.palette()))

    def follow_data(self) -> None:
        """Show all of its data, now and after each resize (pyqtgraph's autoRange fits once, to the size of the
        moment: the embedding's points ended past a resized frame; auto range alone waits for the next paint)."""
        self.enableAutoRange()
        self.getViewBox().updateAutoRange()

    def reset_view(self) -> None:
        """Back to showing all of the plot's content (after wheel zooms and drags)."""
        self.enableAutoRange()
        self.autoRange()

    def wheelEvent(self, event: QWheelEvent) -> None:  # noqa: N802  (Qt override)
        engaged = self._clicked and self.hasFocus()
        if event.modifiers() == Qt.KeyboardModifier.NoModifier and not engaged and scrolls(self):
            event.ignore()  # the panel's scroll area takes it
            return
        super().wheelEvent(event)

    def mousePressEvent(self, event: QMouseEvent) -> None:  # noqa: N802
        self._clicked = True
        super().mousePressEvent(event)

    def focusOutEvent(self, event: QFocusEvent) -> None:  # noqa: N802
        self._clicked = False
        super().focusOutEvent(event)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802  (Qt override)
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self.isVisible():
            self.follow_palette()

    def showEvent(self, event) -> None:  # noqa: N802  (Qt override)
        self.follow_palette()  # a palette that changed while the plot was hidden (another workspace, a closed
        super().showEvent(event)  # window): every export swaps the application's palette twice

    def follow_palette(self) -> None:
        """Drawn in the palette's colours, if it changed since (a figure export asks a hidden plot for it)."""
        if self._ready and self._colours() != self._applied:
            self.apply_palette()

    def _colours(self) -> tuple[int, int]:
        """The palette's colours a plot is drawn in (a change of others, e.g. the window's, leaves it as it is)."""
        return self.palette().color(QPalette.ColorRole.Base).rgba(), self._text().rgba()


def scrolls(widget: QWidget) -> bool:
    """`widget` is inside a scroll area that can scroll now (its content is taller or wider than it)."""
    parent = widget.parentWidget()
    while parent is not None:
        if isinstance(parent, QScrollArea) and (parent.verticalScrollBar().maximum() > 0
                                                or parent.horizontalScrollBar().maximum() > 0):
            return True
        parent = parent.parentWidget()
    return False


def plots_in(widget: QWidget) -> list[FigurePlot]:
    """The plots that make up `widget` (itself, or those inside it): what a Reset View resets."""
    return [widget] if isinstance(widget, FigurePlot) else widget.findChildren(FigurePlot)


def titled_plot(title: str, left: str, bottom: str, integer: Sequence[str] = ()) -> FigurePlot:
    """A plot with its title and axis labels in the theme's colours (`integer`: see FigurePlot)."""
    return FigurePlot(title, left, bottom, integer)


class PlotBox(QWidget):
    """A widget that is one FigurePlot (`self.plot`) and what its owner adds: its minimum height is the larger of
    the owner's and the plot's (an owner's smaller one let the layout cut the plot's legend off)."""

    def __init__(self, plot: FigurePlot, parent: QWidget | None = None):
        super().__init__(parent)
        self.plot = plot
        self._asked = 0
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(plot)
        plot.room_changed.connect(lambda _room: self.setMinimumHeight(self._asked))
        self.setMinimumHeight(0)  # (the plot's room, until its owner asks for more)

    def setMinimumHeight(self, height: int) -> None:  # noqa: N802  (Qt override)
        self._asked = height
        super().setMinimumHeight(max(height, self.plot.room()))
