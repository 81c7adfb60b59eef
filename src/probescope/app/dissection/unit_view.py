"""The selected unit in the Dissection workspace: what it detects (its images with overlays, the display controls:
the central view) and its numbers (IoU and DA of every method's explanation, the length sweep, the activation
histogram with the threshold: a panel), plus its beam-search trace with each method's pick marked.
"""

from __future__ import annotations

from html import escape

import numpy as np
from PySide6.QtWidgets import QHBoxLayout, QLabel, QVBoxLayout, QWidget

from probescope.app.dissection.panels import UnitControls
from probescope.app.window.panel_area import scrolled
from probescope.core.dissection.results import UnitResult
from probescope.jobs.dissection import rows as r
from probescope.jobs.dissection.layer_data import LayerData
from probescope.widgets.dissection.plots import ActivationHistogram
from probescope.widgets.dissection.trace import TraceEntry, TraceStep, TraceTree
from probescope.widgets.ink import InkLabel, inked
from probescope.widgets.plots_bars import ClassBars
from probescope.widgets.plots_line import LinePlot
from probescope.widgets.thumbnail_grid import ThumbnailGrid

THUMB = 150


class UnitView(QWidget):
    """The central view: the unit's title, the display controls and the image grid with its caption."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.title = InkLabel()
        self.title.setWordWrap(True)
        self.controls = UnitControls()
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.images = ThumbnailGrid(THUMB)
        self.images.setMinimumHeight(THUMB + 40)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.addWidget(self.title)
        layout.addWidget(self.controls)
        layout.addWidget(self.caption)
        layout.addWidget(self.images, 1)

    def show_title(self, u: UnitResult, note: str = "") -> None:
        """The unit's title line; `note` (plain text, e.g. rows.tie_note) follows it, in warning ink."""
        optimal = u.explanations.get("optimal")
        gap = "" if u.optimality_gap is None or optimal is None else (
            " The beam's explanation is optimal." if u.optimality_gap <= 1e-12 else
            f" The optimal formula, {escape(optimal.label)}, has IoU {optimal.iou:.4f}: "
            f"<b>{u.optimality_gap:.4f}</b> above the beam's.")
        warning = "<br>" + inked("warning", escape(note, quote=False)) if note else ""
        self.title.setText(f"<b>Unit {u.unit}</b>: threshold {u.threshold:.3g}, fires on {u.fired_images} images"
                           f" ({u.mask_pixels:,} mask pixels).{gap} Overlays: heat map = activation, "
                           f"{inked('unit', 'yellow outline = unit mask')}, "
                           f"{inked('concept', 'cyan = explanation')}{warning}")

    def set_caption(self, caption: str) -> None:
        self.caption.setText(caption + " (double-click an image for a large view)")


class UnitCharts(QWidget):
    """The unit's numbers: IoU and DA of every method's explanation, the length sweep, the activation histogram."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
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
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.addWidget(scrolled(self.bars), 4)  # a short panel scrolls the bars, never stacks them on each other
        layout.addWidget(self.sweep, 3)
        layout.addWidget(self.histogram, 3)
        self.setMinimumHeight(180)
        self._histogram_of: tuple[LayerData, int] | None = None  # the unit whose histogram the chart should show

    def show_numbers(self, d: LayerData, unit: int) -> None:
        u = d.result.units[unit]
        methods = [m for m in r.METHODS if r.explanation_of(u, m) is not None]  # the searches that ran
        names = [r.METHOD_NAMES[m] for m in methods]
        exps = [r.explanation_of(u, m) for m in methods]
        colours = [r.METHOD_COLORS[m] for m in methods]  # each method keeps its colour
        self.iou_bars.set_bars(names, np.array([e.iou for e in exps]), colors=colours, vmax=None)
        self.da_bars.set_bars(names, np.array([e.da for e in exps]), colors=colours, vmax=1.0)
        heads = u.sweep or [beam[0] for beam in u.trace]
        lengths = list(range(1, len(heads) + 1))
        self.sweep.set_series({"best IoU": (lengths, [e.iou for e in heads]),
                               "its DA": (lengths, [e.da for e in heads])})
        self._histogram_of = (d, unit)
        self.draw_histogram()

    def draw_histogram(self) -> None:
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
        entries = tuple(TraceEntry(e.label, e.iou, e.da, tuple(r.METHOD_SHORT[m] for m in r.METHODS
                                                                if picks.picks.get(m) == (k, p)))
                        for p, e in enumerate(beam))
        note = ", ".join(f"{m} stopped here" for m, at in picks.stops.items() if at == k)
        steps.append(TraceStep(f"step {k + 1}: beam, formulas of ≤ {k + 1} concepts", entries, note))
    last = max([s.max_length, *(k + 1 for k in picks.stops.values())])
    tree.set_steps(steps, expanded=last)  # later steps repeat the beam: folded
