"""Plots of the Similarity workspace: the embedding as a 2-D scatter with thumbnails on hover, and small bar and
line charts (session grades, catch results, held-out loss per dimensionality, convergence across fits).

Views of plain arrays only; the thumbnail shown on hover is handed in by the owner (`set_thumbnail`) after it
decoded the image in a worker, so hovering never blocks the GUI thread.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QEvent, QObject, Qt, Signal
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from probescope.widgets.plot_frame import PlotBox, titled_plot

QUERY_COLOR = "#555555"
PICK_COLORS = ("#e67e22", "#2e86de")
REFERENCE_COLOR = "#8e44ad"


class _Points(pg.ScatterPlotItem):
    """A scatter whose spots share one style. pyqtgraph looks every new spot's symbol up in its atlas in a Python
    loop (0.25 s for 50,000 stimuli, in the GUI thread); spots in the item's own style are looked up once."""

    def updateSpots(self, dataSet=None):  # noqa: N802, N803  (pyqtgraph's names)
        data = self.data if dataSet is None else dataSet
        fresh = data["sourceRect"]["w"] == 0
        if not (self.opts["pxMode"] and self.opts["useCache"] and fresh.sum() > 1 and _default_style(data, fresh)):
            return super().updateSpots(dataSet)
        first = np.flatnonzero(fresh)[:1]
        style = list(zip(*self._style(["symbol", "size", "pen", "brush"], data=data, idx=first)))
        data["sourceRect"][fresh] = self.fragmentAtlas[style][0]
        self._maybeRebuildAtlas()
        self._updateMaxSpotSizes(data=data)
        self.invalidate()
        return None


def _default_style(data: np.ndarray, rows: np.ndarray) -> bool:
    """No spot among `rows` has a style of its own (pyqtgraph marks the item's style with -1 / None)."""
    return bool((data["size"][rows] == -1).all() and all(np.equal(data[f][rows], None).all()
                                                          for f in ("symbol", "pen", "brush")))


class EmbeddingView(QWidget):
    """Points of a 2-D embedding; `hovered(index)` (-1 when the pointer leaves every point), `clicked(index)`.

    `highlight(query, picks, references)` rings the shown trial's stimuli: the query dark, the picks in the grid's
    pick colours, the other references purple. The point under the pointer is found by one vectorised distance in
    screen pixels (pyqtgraph's own hover builds an object per point: 50,000 of them on the first move).
    """

    hovered = Signal(int)
    clicked = Signal(int)
    HOVER_PX = 6  # how close (screen pixels) the pointer must come to a point's centre

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.plot = titled_plot("", "", "")
        self.plot.setAspectLocked(True)
        self.points = _Points(size=7, pen=pg.mkPen("#ffffff", width=0.5), brush=pg.mkBrush("#7f8c8d"))
        self.name_of: Callable[[int], str] | None = None  # what a point's tooltip says: the stimulus and its class
        self.marks = pg.ScatterPlotItem(size=15, brush=pg.mkBrush(0, 0, 0, 0))
        self.hover_mark = pg.ScatterPlotItem(size=11, pen=pg.mkPen("#ffffff", width=0.5),
                                             brush=pg.mkBrush("#f1c40f"))
        for item in (self.points, self.marks, self.hover_mark):
            self.plot.addItem(item)
        self.plot.scene().sigMouseMoved.connect(self._moved)
        self.plot.scene().sigMouseClicked.connect(self._clicked)
        self.thumbnail = QLabel(self.plot)  # a child of the plot: drawn (and exported) over its corner
        self.thumbnail.setStyleSheet("background: white; border: 1px solid #888; color: black; padding: 2px;")
        self.thumbnail.hide()
        self.plot.viewport().installEventFilter(self)  # the pointer leaving the plot ends the hover
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.plot)
        self._xy = np.empty((0, 2))
        self._hover = -1

    def set_points(self, xy: np.ndarray, title: str, colors: Sequence[str] | None = None,
                   name_of: Callable[[int], str] | None = None) -> None:
        """`name_of(i)` is point i's tooltip (the stimulus and its class); without it the tooltip says 'stimulus i'."""
        self._xy = np.asarray(xy, dtype=np.float64)
        self.name_of = name_of
        if colors is not None:
            palette = {c: pg.mkBrush(c) for c in set(colors)}
            self.points.setData(pos=self._xy, brush=[palette[c] for c in colors])
        else:
            self.points.setData(pos=self._xy)
        self.plot.set_title(title)
        self.marks.setData([])
        self._set_hover(-1)
        self.plot.follow_data()

    def highlight(self, query: int, picks: Sequence[int], references: Sequence[int]) -> None:
        """A trial's stimuli (a new trial: the hover of the last one ends)."""
        self.end_hover()
        if len(self._xy) == 0:
            return
        spots = [(query, QUERY_COLOR, 18)] + [(r, REFERENCE_COLOR, 14) for r in references if r not in picks]
        spots += [(p, PICK_COLORS[min(k, 1)], 16) for k, p in enumerate(picks)]
        spots = [s for s in spots if 0 <= s[0] < len(self._xy)]
        self.marks.setData(pos=self._xy[[s[0] for s in spots]],
                           pen=[pg.mkPen(c, width=3) for _, c, _ in spots],
                           size=[size for _, _, size in spots], brush=pg.mkBrush(0, 0, 0, 0))

    def highlighted(self) -> int:
        """How many stimuli are ringed now."""
        return len(self.marks.data)

    def set_thumbnail(self, index: int, image: QImage | None, caption: str) -> None:
        """Show `image` for point `index` (only while that point is still under the pointer)."""
        if index != self._hover or image is None:
            return
        pixmap = QPixmap.fromImage(image).scaled(96, 96, Qt.AspectRatioMode.KeepAspectRatio,
                                                 Qt.TransformationMode.SmoothTransformation)
        self.thumbnail.setPixmap(pixmap)
        self.thumbnail.setToolTip(caption)
        self.thumbnail.adjustSize()
        self.thumbnail.move(self.plot.width() - self.thumbnail.width() - 8, 8)
        self.thumbnail.show()

    def tip(self, index: int) -> str:
        """What the tooltip says over point `index`."""
        return self.name_of(index) if self.name_of is not None else f"stimulus {index}"

    def point_at(self, scene_pos) -> int:
        """The point within HOVER_PX screen pixels of `scene_pos` (the nearest), -1 when none is."""
        vb = self.plot.getPlotItem().vb
        if len(self._xy) == 0 or not vb.sceneBoundingRect().contains(scene_pos):
            return -1
        where = vb.mapSceneToView(scene_pos)
        px, py = vb.viewPixelSize()
        d2 = ((self._xy[:, 0] - where.x()) / px) ** 2 + ((self._xy[:, 1] - where.y()) / py) ** 2
        nearest = int(np.argmin(d2))
        return nearest if d2[nearest] <= self.HOVER_PX**2 else -1

    def _moved(self, scene_pos) -> None:
        index = self.point_at(scene_pos)
        if index != self._hover:
            self._set_hover(index)
            self.hovered.emit(index)

    def end_hover(self) -> None:
        """No point under the pointer any more: the hover mark and the thumbnail go."""
        if self._hover >= 0 or self.thumbnail.isVisible():
            self._set_hover(-1)
            self.hovered.emit(-1)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:  # noqa: N802
        if event.type() == QEvent.Type.Leave:
            self.end_hover()
        return super().eventFilter(watched, event)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:  # a theme switch: the thumbnail was of the last hover
            self.end_hover()

    def _set_hover(self, index: int) -> None:
        self._hover = index
        self.hover_mark.setData(pos=self._xy[[index]] if index >= 0 else np.empty((0, 2)))
        self.plot.setToolTip(self.tip(index) if index >= 0 else "")
        if index < 0:
            self.thumbnail.hide()

    def _clicked(self, event) -> None:
        index = self.point_at(event.scenePos())
        if index >= 0:
            self.clicked.emit(index)


class BarChart(PlotBox):
    """Labelled bars (counts or values), one colour per bar: as many labels as fit, a long one on lines of its own
    words ("picked 1st" ran into "picked 2nd"); counts (whole values) get whole-number ticks."""

    def __init__(self, title: str, left: str, bottom: str = "", parent: QWidget | None = None):
        super().__init__(titled_plot(title, left, bottom), parent)
        self.plot.setMouseEnabled(False, False)
        self.values: list[float] = []

    def set_bars(self, labels: Sequence[str], values: Sequence[float], colors: Sequence[str]) -> None:
        self.plot.clear()
        self.values = [float(v) for v in values]
        x = np.arange(len(values))
        self.plot.addItem(pg.BarGraphItem(x=x, height=self.values, width=0.7, brushes=[pg.mkBrush(c) for c in colors],
                                          pens=[pg.mkPen(c) for c in colors]))
        self.plot.getAxis("bottom").set_labels([(k, label) for k, label in zip(x.tolist(), labels) if label])
        self.plot.getAxis("left").integer = all(v.is_integer() for v in self.values)
        top = max(self.values, default=1.0)
        self.plot.setYRange(0, top * 1.1 if top > 0 else 1.0, padding=0)
        self.plot.setXRange(-0.6, len(values) - 0.4, padding=0)
