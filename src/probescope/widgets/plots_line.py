"""Named series over a shared x, joined by lines, with a legend: a pyqtgraph plot in the app's figure look."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtWidgets import QVBoxLayout, QWidget

from probescope.widgets.plot_frame import titled_plot


class LinePlot(QWidget):
    """One or more named series over a shared x (points joined by lines), with a legend."""

    COLORS = ("#2e86de", "#e67e22", "#27ae60", "#c0392b")

    def __init__(self, title: str, left: str, bottom: str, parent: QWidget | None = None):
        super().__init__(parent)
        self.plot = titled_plot(title, left, bottom)
        self.legend = self.plot.add_legend(offset=(-10, 10))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot)
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
            self._place_legend()
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
        self._place_legend()

    def _place_legend(self) -> None:
        """The legend where the curves pass least (the length sweep's DA runs along the top, its IoU along the bottom):
        of six places (corners and the middle of each side), the one with the fewest points inside a box of 45% of
        the data's width and 35% of its height there; ties go to the top right, then left, then the middles."""
        points = np.array([(x, y) for xs, ys in self.series.values() for x, y in zip(xs, ys)], float).reshape(-1, 2)
        if not len(points):
            return
        low, span = points.min(axis=0), np.ptp(points, axis=0)
        u = (points - low) / np.where(span > 0, span, 1.0)  # 0..1, y up
        right, left = u[:, 0] > 0.55, u[:, 0] < 0.45
        top, middle, bottom = u[:, 1] > 0.65, (u[:, 1] > 0.325) & (u[:, 1] < 0.675), u[:, 1] < 0.35
        places = {(1, 0): right & top, (0, 0): left & top, (1, 0.5): right & middle, (0, 0.5): left & middle,
                  (1, 1): right & bottom, (0, 1): left & bottom}  # (x, y) of the legend's anchor, y down
        place = min(places, key=lambda p: int(places[p].sum()))
        offset = (10 if place[0] == 0 else -10, {0: 10, 0.5: 0, 1: -10}[place[1]])
        self.legend.anchor(itemPos=place, parentPos=place, offset=offset)
        self.legend_place = place
