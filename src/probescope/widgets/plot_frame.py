"""The look every pyqtgraph plot in the app shares: the theme's background and text (light or dark, following the
application palette as it changes), axes without SI prefixes, no context menu."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6.QtCore import QEvent
from PySide6.QtGui import QPalette

from probescope.widgets.ink import ink_color


class FigurePlot(pg.PlotWidget):
    """A plot ready for figures. `set_title` and `add_legend` keep title and legend in the theme's text colour."""

    def __init__(self, title: str, left: str, bottom: str, **options):
        """`options` go to pyqtgraph's PlotWidget (e.g. `axisItems`)."""
        self._ready = False  # (palette changes arrive while pyqtgraph builds the plot)
        super().__init__(**options)
        self._title = title
        self._labels = {"left": left, "bottom": bottom}
        self._legends: list[pg.LegendItem] = []
        self._inked: list[tuple[pg.TextItem, str]] = []
        for axis in self._labels:
            self.getAxis(axis).enableAutoSIPrefix(False)
        self.setMenuEnabled(False)
        self._ready = True
        self.apply_palette()

    def set_title(self, title: str) -> None:
        self._title = title
        self.setTitle(title, color=self._text().name(), size="10pt")

    def add_legend(self, **options) -> pg.LegendItem:
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
        text = self._text()
        self.setBackground(self.palette().color(QPalette.ColorRole.Base))
        self.setTitle(self._title, color=text.name(), size="10pt")
        for item in self.scene().items():  # every axis: the plot's and any beside it (a colour bar's)
            if isinstance(item, pg.AxisItem):
                item.setPen(text)
                item.setTextPen(text)
                if item.labelText and item not in (self.getAxis(a) for a in self._labels):
                    item.setLabel(item.labelText, color=text.name())
        for axis, label in self._labels.items():
            self.setLabel(axis, label, color=text.name())
        for legend in self._legends:
            legend.setLabelTextColor(text)
            for _sample, label in legend.items:
                label.setText(label.text, color=text)
        for item, role in self._inked:
            item.setColor(ink_color(role, self.palette()))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802  (Qt override)
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self._ready:
            self.apply_palette()


def titled_plot(title: str, left: str, bottom: str) -> FigurePlot:
    """A plot with its title and axis labels in the theme's colours."""
    return FigurePlot(title, left, bottom)
