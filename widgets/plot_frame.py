"""The look every pyqtgraph plot in the app shares: white background, black axes and labels, no SI prefixes."""

from __future__ import annotations

import pyqtgraph as pg


def titled_plot(title: str, left: str, bottom: str) -> pg.PlotWidget:
    """A plot ready for figures: title, axis labels, black text on white, no context menu."""
    plot = pg.PlotWidget(background="w")
    plot.setTitle(title, color="k", size="10pt")
    for axis, text in (("left", left), ("bottom", bottom)):
        plot.setLabel(axis, text, color="k")
        plot.getAxis(axis).setPen("k")
        plot.getAxis(axis).setTextPen("k")
        plot.getAxis(axis).enableAutoSIPrefix(False)
    plot.setMenuEnabled(False)
    return plot
