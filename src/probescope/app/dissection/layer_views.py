"""The Dissection workspace's Layer tab: IoU against DA over the layer's units, explanation lengths per method (the
seed's figure 4) and the accuracy correlation (the seed's tables 2-4).

Drawn when the panel is on screen or exported rather than on every block of units: it is most of a layer update's
GUI-thread time.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from probescope.core.dissection import correlation
from probescope.jobs.dissection import rows as r
from probescope.jobs.dissection.layer_data import LayerData
from probescope.widgets.dissection.plots import GroupedBars, UnitScatter
from probescope.widgets.ink import InkLabel, inked

CORRELATION_COLUMNS = ("method", "image set", "r (IoU)", "r (DA)", "units", "mean accuracy")
CEILING = 0.98  # a mean accuracy from which the correlation has no variation left to explain
MIN_VIEW_HEIGHT = 120  # pixels: below this a plot's ticks run into its labels
SCATTER_HEIGHT = 240  # pixels for the scatter: at 120 its data area was a flat strip at 1280x800 (issue 45 §4)


class LayerViews(QWidget):
    """`unit_clicked(unit)` from the scatter."""

    unit_clicked = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.scatter = UnitScatter()
        self.lengths = GroupedBars("Explanation lengths per method", "units", "length",
                                   {r.METHOD_NAMES[m]: r.METHOD_COLORS[m] for m in r.METHODS})
        self.correlation_caption = InkLabel("<b>Accuracy correlation</b>: needs the model's predictions")
        self.correlation_caption.setWordWrap(True)
        self.correlation = QTableWidget(0, len(CORRELATION_COLUMNS))
        self.correlation.setHorizontalHeaderLabels(list(CORRELATION_COLUMNS))
        self.correlation.verticalHeader().setVisible(False)
        self.correlation.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.scatter.setMinimumHeight(SCATTER_HEIGHT)  # in a short panel they scroll, not squash
        self.lengths.setMinimumHeight(MIN_VIEW_HEIGHT + 50)  # (or what its plot asks for with its legend's rows)
        self.correlation.setMinimumHeight(MIN_VIEW_HEIGHT * 2 // 3)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.scatter, 3)
        layout.addWidget(self.lengths, 3)
        layout.addWidget(self.correlation_caption)
        layout.addWidget(self.correlation, 2)
        self.scatter.unit_clicked.connect(self.unit_clicked)
        self._data: LayerData | None = None
        self._rows: dict[int, r.UnitRow] = {}
        self._unit = -1
        self._stale = False
        self.on_screen = False

    def set_layer(self, d: LayerData, rows: dict[int, r.UnitRow], unit: int) -> None:
        """A new or grown result: drawn now when the panel is on screen, else when it is shown or exported."""
        self._data, self._rows, self._unit, self._stale = d, rows, unit, True
        if self.on_screen:
            self.update_views()

    def set_on_screen(self, shown: bool) -> None:
        """The panel's visibility (its dock's, which knows whether its tab is in front)."""
        self.on_screen = shown
        if shown:
            self.update_views()

    def clear(self) -> None:
        self._data, self._rows, self._stale = None, {}, False
        self.scatter.clear()
        self.lengths.set_series({})
        self.correlation.setRowCount(0)

    def select(self, unit: int) -> None:
        self._unit = unit
        self.scatter.select(unit)

    def update_views(self) -> None:
        if not self._stale or self._data is None:
            return
        self._stale = False
        result, rows = self._data.result, self._rows
        units = np.array(sorted(rows))
        comp = [rows[u].explanations.get("iou") for u in units]
        self.scatter.set_points(units, np.array([e.iou if e else 0.0 for e in comp]),
                                np.array([e.da if e else 0.0 for e in comp]),
                                np.array([r.is_specialised(rows[u]) for u in units]))
        self.scatter.plot.set_title("Units' explanations (orange: specialised)")  # (fits a narrow panel)
        self.scatter.select(self._unit)
        hist = r.length_histogram(result, self._data.settings.max_length)
        self.lengths.set_series(hist)  # (lengths and unit counts: whole-number axes)
        self._show_correlation(result)

    def _show_correlation(self, result) -> None:
        """Pearson correlation of IoU and of DA with the model's accuracy on each image set."""
        found = correlation.accuracy_correlation(result) if result.complete else []
        shown = [x for x in found if x["set"] in ("union", "intersection") and not x["method"].startswith("length-")]
        self.correlation.setRowCount(len(shown))
        for k, x in enumerate(shown):
            cells = [r.METHOD_NAMES.get(x["method"], x["method"]), x["set"], x["pearson_iou"], x["pearson_da"],
                     x["units"], x["mean_accuracy"]]
            for c, v in enumerate(cells):
                text = "—" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)
                self.correlation.setItem(k, c, QTableWidgetItem(text))
        self.correlation.resizeColumnsToContents()
        accuracy = max((x["mean_accuracy"] for x in shown if x["mean_accuracy"] is not None), default=None)
        ceiling = ("<br>" + inked("warning", f"The model is right on almost every image (mean accuracy up to "
                                             f"{accuracy:.3f}): at this ceiling the accuracies hardly vary between "
                                             "units, so these correlations say little.")
                   if accuracy is not None and accuracy >= CEILING else "")
        self.correlation_caption.setText(
            "<b>Accuracy correlation</b> (Pearson r over units: explanation score against the model's top-1 accuracy "
            "on the images where the unit fires or the explanation is present)" + ceiling if shown else
            "<b>Accuracy correlation</b>: needs the model's predictions and a finished dissection")
