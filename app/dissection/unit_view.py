"""The selected unit in the Dissection workspace: what it detects (its images with overlays, the display controls)
and its numbers (IoU and DA of every method's explanation, the length sweep, the activation histogram with the
threshold), plus its beam-search trace with each method's pick marked.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from probescope.app.dissection import rows as r
from probescope.app.dissection.layer import LayerData
from probescope.app.dissection.layer_views import integer_ticks
from probescope.app.dissection.panels import UnitControls
from probescope.core.dissection.results import UnitResult
from probescope.widgets.dissection.plots import ActivationHistogram
from probescope.widgets.dissection.trace import TraceEntry, TraceStep, TraceTree
from probescope.widgets.plots_bars import ClassBars
from probescope.widgets.plots_line import LinePlot
from probescope.widgets.thumbnail_grid import ThumbnailGrid

THUMB = 150


class UnitView(QWidget):
    """The centre pane: title, display controls, the image grid with its caption, and the unit's charts."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.title = QLabel()
        self.title.setWordWrap(True)
        self.controls = UnitControls()
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.images = ThumbnailGrid(THUMB)
        self.images.setMinimumHeight(THUMB + 40)
        self.iou_bars = ClassBars("IoU")
        self.da_bars = ClassBars("Detection Accuracy")
        self.sweep = LinePlot("Length sweep", "score", "max explanation length")
        self.histogram = ActivationHistogram()
        self.bars = QWidget()
        bv = QVBoxLayout(self.bars)
        bv.setContentsMargins(0, 0, 0, 0)
        bv.addWidget(self.iou_bars)
        bv.addWidget(self.da_bars)
        bv.addStretch(1)
        charts = QWidget()
        ch = QHBoxLayout(charts)
        ch.setContentsMargins(0, 0, 0, 0)
        ch.addWidget(self.bars, 4)
        ch.addWidget(self.sweep, 3)
        ch.addWidget(self.histogram, 3)
        charts.setMinimumHeight(200)
        self._histogram_of: tuple[LayerData, int] | None = None  # the unit whose histogram the chart should show
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.controls)
        layout.addWidget(self.caption)
        layout.addWidget(self.images, 3)
        layout.addWidget(charts, 2)

    def show_numbers(self, d: LayerData, unit: int) -> None:
        """The unit's title and charts (the images are UnitImages' job)."""
        u = d.result.units[unit]
        names = [r.METHOD_NAMES[m] for m in r.METHODS]
        exps = [r.explanation_of(u, m) for m in r.METHODS]
        self.iou_bars.set_bars(names, np.array([e.iou if e else 0.0 for e in exps]), vmax=None)
        self.da_bars.set_bars(names, np.array([e.da if e else 0.0 for e in exps]), vmax=1.0)
        heads = u.sweep or [beam[0] for beam in u.trace]
        lengths = list(range(1, len(heads) + 1))
        self.sweep.set_series({"best IoU": (lengths, [e.iou for e in heads]),
                               "its DA": (lengths, [e.da for e in heads])})
        integer_ticks(self.sweep, len(lengths))
        self._histogram_of = (d, unit)
        self._draw_histogram()
        self.title.setText(f"<b>Unit {unit}</b>: threshold {u.threshold:.3g}, fires on {u.fired_images} images"
                           f" ({u.mask_pixels:,} mask pixels). Overlays: heat map = activation, "
                           f"<span style='color:#c9a400'>yellow outline = unit mask</span>, "
                           f"<span style='color:#0a9fd8'>cyan = explanation</span>")

    def set_caption(self, caption: str) -> None:
        """The grid's caption, once the unit's overlays are on screen (its histogram came with them)."""
        self.caption.setText(caption + " (double-click an image for a large view)")
        self._draw_histogram()

    def _draw_histogram(self) -> None:
        """The unit's activation histogram when the I/O pool has computed it (with the overlays), else only its
        threshold: reading a unit's whole column of the layer in the GUI thread stalled every unit switch."""
        if self._histogram_of is None:
            return
        d, unit = self._histogram_of
        threshold = d.result.units[unit].threshold
        found = d.histograms.get(unit)
        if found is None:
            self.histogram.show_threshold(threshold)
        else:
            self.histogram.set_histogram(*found, threshold)


def show_trace(tree: TraceTree, d: LayerData, unit: UnitResult) -> None:
    """The unit's beams step by step, each method's explanation marked where it was picked and where it stopped."""
    s = d.settings
    picks = r.trace_picks(unit, s.max_length, s.da_limit)
    steps = []
    for k, beam in enumerate(unit.trace):
        entries = tuple(TraceEntry(e.label, e.iou, e.da, tuple(r.METHOD_NAMES[m] for m in r.METHODS
                                                                if picks.picks.get(m) == (k, p)))
                        for p, e in enumerate(beam))
        note = ", ".join(f"{m} stopped here" for m, at in picks.stops.items() if at == k)
        steps.append(TraceStep(f"step {k + 1}: beam, formulas of ≤ {k + 1} concepts", entries, note))
    last = max([s.max_length, *(k + 1 for k in picks.stops.values())])
    tree.set_steps(steps, expanded=last)  # later steps repeat the beam: folded
