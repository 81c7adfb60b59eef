"""Named series over a shared x, joined by lines, with a legend: a pyqtgraph plot in the app's figure look."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QWidget

from probescope.widgets.plot_frame import PlotBox, titled_plot


class LinePlot(PlotBox):
    """One or more named series over a shared x (points joined by lines), with a legend in a row under the x axis
    (over the plot it sat on the length sweep's DA line and on the convergence plot's point). The x values count
    (explanation lengths, fits): whole-number ticks only, half a step of room either side (one fit drew ticks
    0.6 ... 1.4)."""

    COLORS = ("#2e86de", "#e67e22", "#27ae60", "#c0392b")

    def __init__(self, title: str, left: str, bottom: str, parent: QWidget | None = None):
        super().__init__(titled_plot(title, left, bottom, integer=("bottom",)), parent)
        self.legend = self.plot.add_legend()
        self.series: dict[str, tuple[list[float], list[float]]] = {}
        self._curves: list[pg.PlotDataItem] = []

    def set_series(self, series: dict[str, tuple[Sequence[float], Sequence[float]]]) -> None:
        kept = {name: [(a, b) for a, b in zip(x, y) if b is not None and np.isfinite(b)]
                for name, (x, y) in series.items()}
        kept = {name: ([float(a) for a, _ in pts], [float(b) for _, b in pts]) for name, pts in kept.items() if pts}
        if list(kept) == list(self.series) and len(self._curves) == len(kept):
            for curve, (xs, ys) in zip(self._curves, kept.values(), strict=True):  # same series: update in place
                curve.setData(xs, ys)  # (rebuilding items and legend costs ~20 ms per call)
            self.series = kept
            self._frame_x()
            return
        self.plot.clear()
        self.legend.clear()
        self.series = {}
        self._curves = []
        for k, (name, (_x, _y)) in enumerate(series.items()):
            if name not in kept:
                continue
            xs, ys = kept[name]
            self.series[name] = (xs, ys)
            color = self.COLORS[k % len(self.COLORS)]
            self._curves.append(self.plot.plot(xs, ys, pen=pg.mkPen(color, width=2), symbol="o", symbolBrush=color,
                                               symbolPen=color, symbolSize=7, name=name))
        self._frame_x()

    def _frame_x(self) -> None:
        """x from half a step before the first value to half a step after the last (the points' symbols clear of
        the frame, one value in the middle); y follows the data (auto range, with the figure's padding)."""
        xs = [x for xs, _ys in self.series.values() for x in xs]
        vb = self.plot.getViewBox()
        if xs:
            vb.setXRange(min(xs) - 0.5, max(xs) + 0.5, padding=0)
        vb.enableAutoRange(axis=pg.ViewBox.YAxis)
        vb.updateAutoRange()
