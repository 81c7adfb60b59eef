"""The look and feel every pyqtgraph plot in the app shares: the theme's background and text (light or dark,
following the application palette as it changes), axes without SI prefixes, no context menu of pyqtgraph's (the
view's figure menu has Reset View), and a wheel that scrolls the panel the plot sits in until the plot is clicked
(or a modifier is held): scrolling down a panel of plots zoomed each plot it passed."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QFocusEvent, QMouseEvent, QPalette, QTextOption, QWheelEvent
from PySide6.QtWidgets import QScrollArea, QWidget

from probescope.widgets.ink import ink_color

TITLE_ROW = 30  # pyqtgraph's height of the title row, kept for a title on one line


class FigurePlot(pg.PlotWidget):
    """A plot ready for figures. `set_title` and `add_legend` keep title and legend in the theme's text colour."""

    def __init__(self, title: str, left: str, bottom: str, **options):
        """`options` go to pyqtgraph's PlotWidget (e.g. `axisItems`)."""
        self._ready = False  # (palette changes arrive while pyqtgraph builds the plot)
        super().__init__(**options)
        self._title = title
        self._labels = {"left": left, "bottom": bottom}
        self._legends: list[pg.LegendItem] = []
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

    def _fit_title(self) -> None:
        """The title wraps (centred) where it is wider than the plot, e.g. in a paper column's figure: pyqtgraph
        would make the plot as wide as the title, beyond the view, and cut it."""
        if not self._title:
            return
        left = self.getAxis("left")  # the title is centred over the plot's area, right of the left axis
        label, room = self.plotItem.titleLabel, max(self.width() - (left.width() if left.isVisible() else 0) - 16, 40)
        item = label.item
        item.setTextWidth(-1)
        if item.boundingRect().width() > room:
            item.setTextWidth(room)
            option = item.document().defaultTextOption()
            option.setAlignment(Qt.AlignmentFlag.AlignHCenter)
            option.setWrapMode(QTextOption.WrapMode.WordWrap)  # between words only: a word too long sticks out
            item.document().setDefaultTextOption(option)
        box = item.boundingRect()
        height = max(TITLE_ROW, box.height())
        label.setMinimumWidth(min(box.width(), room))
        label.setMinimumHeight(box.height())
        label.setMaximumHeight(height)
        self.plotItem.layout.setRowFixedHeight(0, height)

    def resizeEvent(self, event) -> None:  # noqa: N802  (Qt override)
        if self._ready and self.plotItem is not None:  # (pyqtgraph drops its plot item when the widget closes)
            self._fit_title()  # before the plot takes the new size: the title's width bounds the plot's
        super().resizeEvent(event)

    def add_legend(self, below: bool = False, **options) -> pg.LegendItem:
        """A legend over the plot's corner, or `below` its x axis in a row of its own (never over the data)."""
        if below:
            legend = pg.LegendItem(labelTextColor=self._text(), colCount=2, **options)
            self.getPlotItem().layout.addItem(legend, 4, 1)
        else:
            legend = self.addLegend(labelTextColor=self._text(), **options)
        self._legends.append(legend)
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
        text = self._text()
        self.setBackground(self.palette().color(QPalette.ColorRole.Base))
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
        for legend in self._legends:
            legend.setLabelTextColor(text)
            for _sample, label in legend.items:
                label.setText(label.text, color=text)
        for item, role in self._inked:
            item.setColor(ink_color(role, self.palette()))

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


def titled_plot(title: str, left: str, bottom: str) -> FigurePlot:
    """A plot with its title and axis labels in the theme's colours."""
    return FigurePlot(title, left, bottom)
