"""Plots of the Dissection workspace that the shared charts do not cover: a unit's activation histogram with its
threshold marked, the layer's IoU-against-DA scatter (one point per unit, click to open the unit) and grouped bars
(how many units each method explains with 1, 2, 3 ... concepts: the seed's figure 4)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QWidget

from probescope.widgets.plot_frame import PlotBox, titled_plot

BAR_COLOR = "#4e79a7"
THRESHOLD_COLOR = "#d62728"
SELECTED_COLOR = "#e15759"
POINT_COLOR = "#4e79a7"
HIGHLIGHT_COLOR = "#f28e2b"


class ActivationHistogram(PlotBox):
    """`set_histogram(edges, counts, threshold)`: counts on a log scale, the threshold as a labelled red line."""

    def __init__(self, title: str = "Activation histogram", parent: QWidget | None = None):
        super().__init__(titled_plot(title, "positions (log10)", "activation"), parent)
        self.plot.setMouseEnabled(False, False)
        self.threshold: float | None = None
        self.counts = np.empty(0)
        self.bars = pg.BarGraphItem(x=[], height=[], width=1.0, brush=pg.mkBrush(BAR_COLOR), pen=pg.mkPen(BAR_COLOR))
        self.line = pg.InfiniteLine(pos=0.0, angle=90, pen=pg.mkPen(THRESHOLD_COLOR, width=2), label="",
                                    labelOpts={"position": 0.9})
        self.plot.add_inked(self.line.label, "warning")  # the line's red, in a shade the theme's text can take
        self.plot.addItem(self.bars)
        self.plot.addItem(self.line)

    def set_histogram(self, edges: np.ndarray, counts: np.ndarray, threshold: float) -> None:
        """Updates the items in place (a new plot per unit would cost more than the unit switch may take)."""
        self.counts = np.asarray(counts)
        self.threshold = float(threshold)
        self.bars.setOpts(x=(edges[:-1] + edges[1:]) / 2, height=np.log10(1.0 + self.counts),
                          width=float(edges[1] - edges[0]))
        self.line.setValue(self.threshold)
        self.line.label.setFormat(f"T = {self.threshold:.3g}")
        self.line.show()
        self.plot.follow_data()

    def clear(self) -> None:
        """No unit: no bars, no threshold, and none of the previous unit's axes (issue 45: a layer switch kept the
        other layer's range until a row was clicked)."""
        self.counts, self.threshold = np.empty(0), None
        self.bars.setOpts(x=[], height=[])
        self.line.hide()
        self.plot.setRange(xRange=(0.0, 1.0), yRange=(0.0, 1.0))

    def show_threshold(self, threshold: float) -> None:
        """Only the threshold line: the counts are still being computed. The axes are the line's, not the previous
        unit's (whose activations may lie on another scale)."""
        self.counts = np.empty(0)
        self.threshold = float(threshold)
        self.bars.setOpts(x=[], height=[], width=1.0)
        self.line.setValue(self.threshold)
        self.line.label.setFormat(f"T = {self.threshold:.3g}")
        self.line.show()
        span = max(abs(self.threshold), 1e-6)
        self.plot.setRange(xRange=(min(0.0, self.threshold), self.threshold + 0.25 * span), yRange=(0.0, 1.0))


class UnitScatter(PlotBox):
    """IoU against DA, one point per unit: `set_points(units, iou, da, highlight)`; `unit_clicked(unit)`."""

    unit_clicked = Signal(int)

    def __init__(self, title: str = "IoU against DA, all units", parent: QWidget | None = None):
        super().__init__(titled_plot(title, "Detection Accuracy", "IoU"), parent)
        self.points = pg.ScatterPlotItem(size=8, hoverable=True, tip=self._tip)
        self.points.sigClicked.connect(self._clicked)
        self.selected = pg.ScatterPlotItem(size=14, pen=pg.mkPen(SELECTED_COLOR, width=2), brush=None)
        self.plot.addItem(self.points)
        self.plot.addItem(self.selected)
        self.units = np.empty(0, np.int64)
        self.xy = np.empty((0, 2))

    def set_points(self, units: np.ndarray, iou: np.ndarray, da: np.ndarray, highlight: np.ndarray) -> None:
        """`highlight` (bool per unit) draws those units in the second colour (e.g. specialised units)."""
        self.units = np.asarray(units, np.int64)
        self.xy = np.column_stack([iou, da]).astype(np.float64)
        brushes = [pg.mkBrush(HIGHLIGHT_COLOR if h else POINT_COLOR) for h in highlight]
        self.points.setData(x=self.xy[:, 0], y=self.xy[:, 1], data=self.units, brush=brushes,
                            pen=pg.mkPen("w", width=0.5))

    def clear(self) -> None:
        empty = np.empty(0)
        self.set_points(empty.astype(int), empty, empty, empty.astype(bool))

    def select(self, unit: int) -> None:
        hit = np.flatnonzero(self.units == unit)
        if len(hit):
            x, y = self.xy[hit[0]]
            self.selected.setData(x=[x], y=[y])
        else:
            self.selected.setData(x=[], y=[])

    @staticmethod
    def _tip(x: float, y: float, data: object) -> str:
        return f"unit {data}\nIoU {x:.3f}, DA {y:.3f}"

    def _clicked(self, _item, points, _event=None) -> None:
        if len(points):
            self.unit_clicked.emit(int(points[0].data()))


class GroupedBars(PlotBox):
    """Bars side by side per x (one colour per named series, with a legend under the plot, never on the bars):
    `set_series({name: (x, y)})`, x and y whole numbers (e.g. units per explanation length). `colors` go to the
    series in order, or by name when a mapping."""

    GROUP_WIDTH = 0.8  # of the distance between neighbouring x values

    def __init__(self, title: str, left: str, bottom: str,
                 colors: Sequence[str] | Mapping[str, str] = ("#4e79a7", "#f28e2b", "#59a14f", "#e15759"),
                 parent: QWidget | None = None):
        super().__init__(titled_plot(title, left, bottom, integer=("left", "bottom")), parent)
        self.plot.setMouseEnabled(False, False)
        self.legend = self.plot.add_legend()
        self.colors = colors
        self.series: dict[str, tuple[list[float], list[float]]] = {}

    def set_series(self, series: dict[str, tuple[Sequence[float], Sequence[float]]]) -> None:
        self.plot.clear()
        self.legend.clear()
        self.series = {name: ([float(v) for v in x], [float(v) for v in y]) for name, (x, y) in series.items()}
        width = self.GROUP_WIDTH / max(1, len(self.series))
        for k, (name, (x, y)) in enumerate(self.series.items()):
            color = self.colors[name] if isinstance(self.colors, Mapping) else self.colors[k % len(self.colors)]
            offset = (k - (len(self.series) - 1) / 2) * width
            bars = pg.BarGraphItem(x=np.asarray(x) + offset, height=y, width=width, brush=pg.mkBrush(color),
                                   pen=pg.mkPen(color))
            self.plot.addItem(bars)
            self.legend.addItem(bars, name)
        self.plot.follow_data()
