"""The look every pyqtgraph plot in the app shares: the theme's background and text (light or dark, following the
application palette as it changes), axes without SI prefixes, no context menu."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QEvent, Qt
from PySide6.QtGui import QPalette, QTextOption

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

    def add_legend(self, **options) -> pg.LegendItem:
        legend = self.addLegend(labelTextColor=self._text(), **options)
        self._legends.append(legend)
        return legend

    def _text(self):
        return self.palette().color(QPalette.ColorRole.Text)

    def apply_palette(self) -> None:
        """Background, axes, labels, title and legends in the palette's colours."""
        self._applied = self._colours()
        text = self._text()
        self.setBackground(self.palette().color(QPalette.ColorRole.Base))
        self.setTitle(self._title, color=text.name(), size="10pt")
        self._fit_title()
        for axis, label in self._labels.items():
            item = self.getAxis(axis)
            item.setPen(text)
            item.setTextPen(text)
            self.setLabel(axis, label, color=text.name())
        for legend in self._legends:
            legend.setLabelTextColor(text)
            for _sample, label in legend.items:
                label.setText(label.text, color=text)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802  (Qt override)
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self._ready and self._colours() != self._applied:
            self.apply_palette()

    def _colours(self) -> tuple[int, int]:
        """The palette's colours a plot is drawn in (a change of others, e.g. the window's, leaves it as it is)."""
        return self.palette().color(QPalette.ColorRole.Base).rgba(), self._text().rgba()


def titled_plot(title: str, left: str, bottom: str) -> FigurePlot:
    """A plot with its title and axis labels in the theme's colours."""
    return FigurePlot(title, left, bottom)
