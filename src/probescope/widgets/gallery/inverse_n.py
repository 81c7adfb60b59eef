"""A score against 1/N with its straight-line fit to infinite N (Chong & Forsyth 2020), as a figure.

The x axis is linear in 1/N, labelled with N (∞ at the left edge), so the fit is a straight line and its intercept,
the infinite-N value, sits on the left axis. Drawn: the score on random subsets of each size (the fit's points),
the fitted line extended to 1/N = 0, its intercept, and the live score as N grew (its own path to the same limit).
"""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Qt

from probescope.widgets.plot_axes import FigureAxis
from probescope.widgets.plot_frame import FigurePlot

POINTS = "#3574f0"
FIT = "#e8590c"
LIVE = "#7f7f7f"


class InverseAxis(FigureAxis):
    """An axis in 1/N whose ticks say N (spaced so that "2,000" and "1,000" never run together)."""

    def tickStrings(self, values, scale, spacing) -> list[str]:  # noqa: N802  (pyqtgraph override)
        return ["∞" if abs(v) <= 1e-15 else "" if v < 0 else f"{1.0 / v:,.0f}" for v in values]  # (1/N ≥ 0)


class InverseNPlot(FigurePlot):
    """`set_fit(...)` draws a metric's subsets, fit and live path; `clear_fit(message)` says why there is none.
    The legend has a row of its own under the axis: over the plot, the live curve ran through it and its star
    looked like data."""

    def __init__(self, metric: str):
        super().__init__(f"{metric} against 1/N", metric, "N (axis linear in 1/N)",
                         axisItems={"bottom": InverseAxis("bottom")})
        self.metric_name = metric
        self.setMinimumHeight(230)  # (or more: what its title, axis and legend take, and a usable data area)
        self.add_legend()
        self._live = self.plot([], [], pen=pg.mkPen(LIVE, width=1.5), name="live, as N grew")
        self._points = self.plot([], [], pen=None, symbol="o", symbolSize=6, symbolBrush=POINTS,
                                 symbolPen=None, name="random subsets")
        self._line = self.plot([], [], pen=pg.mkPen(FIT, width=2, style=Qt.PenStyle.DashLine), name="fit")
        self._limit = self.plot([], [], pen=None, symbol="star", symbolSize=14, symbolBrush=FIT, symbolPen=None,
                                name="N → ∞")

    def set_fit(self, sizes: np.ndarray, values: np.ndarray, intercept: float, slope: float,
                live_n: np.ndarray | None = None, live_values: np.ndarray | None = None) -> None:
        """Subset `sizes` and their `values`, the line intercept + slope / N, and the live (N, value) path over the
        fit's range of N."""
        x = 1.0 / np.asarray(sizes, dtype=np.float64)
        self._points.setData(x, np.asarray(values, dtype=np.float64))
        right = float(x.max()) * 1.05
        self._line.setData([0.0, right], [intercept, intercept + slope * right])
        self._limit.setData([0.0], [intercept])
        if live_n is not None and live_values is not None and len(live_n):
            live_n = np.asarray(live_n, dtype=np.float64)
            keep = live_n >= float(np.min(sizes))
            self._live.setData(1.0 / live_n[keep], np.asarray(live_values, dtype=np.float64)[keep])
        else:
            self._live.setData([], [])
        self.set_title(f"{self.metric_name}: {intercept:.4g} at N → ∞ ({intercept:.4g} {'+' if slope >= 0 else '−'} "
                       f"{abs(slope):.3g} / N)")
        self.enableAutoRange()

    def clear_fit(self, message: str) -> None:
        for item in (self._live, self._points, self._line, self._limit):
            item.setData([], [])
        self.set_title(f"{self.metric_name} at N → ∞: {message}")

    def fit_data(self) -> tuple[np.ndarray, np.ndarray]:
        """The drawn subset points (1/N, value), for tests."""
        x, y = self._points.getData()
        return (np.empty(0), np.empty(0)) if x is None else (np.asarray(x), np.asarray(y))
