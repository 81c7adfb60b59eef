"""What a reader of a pyqtgraph plot can read, checked on a plot that is laid out and shown (for tests of plots).

`plot_problems(plot)` lists, in words, what is wrong with one plot: tick labels that touch or run into each other
(read off the axis's own drawing specs: the boxes, texts and font it paints them with), ticks that are not whole
numbers on an axis that counts or numbers things, a legend that leaves out a named curve or lies over a data point,
a curve or a bar, a data point on (or past) the frame of the data area, labels or a legend cut off by the plot's
edge, and a data area squashed flat. Positions are compared in scene pixels, as they are painted.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QPointF, QRectF
from PySide6.QtGui import QFontMetricsF, QPainter, QPicture
from PySide6.QtWidgets import QApplication

MIN_GAP = 3.0  # pixels between two tick labels side by side (a space's width): "59" and "103" read "59103"
FRAME_GAP = 1.0  # pixels a point's symbol keeps inside the data area's frame
FLAT = (70.0, 0.2)  # a data area lower than this many pixels, or than this share of its width, is squashed flat
_INTEGER = re.compile(r"[−-]?\d{1,3}(,\d{3})*|[−-]?\d+")


def tick_labels(axis: pg.AxisItem) -> list[tuple[QRectF, str]]:
    """The tick labels `axis` paints now: each text and the box its ink covers, in scene coordinates (laid out by
    the axis's own drawing specs, measured line by line in the font it paints them in)."""
    if not axis.isVisible() or not axis.style["showValues"]:
        return []
    picture = QPicture()
    painter = QPainter(picture)
    try:
        specs = axis.generateDrawSpecs(painter)
        metrics = QFontMetricsF(painter.font())
        laid = [] if specs is None else [(painter.boundingRect(rect, flags, text), text)
                                          for rect, flags, text in specs[2] if text and text.strip()]
    finally:
        painter.end()
    out = []
    for box, text in laid:
        ink = QRectF()
        for k, line in enumerate(text.split("\n")):
            glyphs = metrics.tightBoundingRect(line)
            left = box.center().x() - metrics.horizontalAdvance(line) / 2 if axis.orientation in ("top", "bottom") \
                else box.right() - metrics.horizontalAdvance(line)
            ink = ink.united(glyphs.translated(left, box.top() + metrics.ascent() + k * metrics.lineSpacing()))
        out.append((axis.mapRectToScene(ink), text))
    return out


def overlapping_ticks(axis: pg.AxisItem) -> list[str]:
    """Neighbouring tick labels that overlap, or sit closer than MIN_GAP side by side (a bottom axis)."""
    labels = tick_labels(axis)
    horizontal = axis.orientation in ("top", "bottom")
    labels.sort(key=lambda lt: lt[0].center().x() if horizontal else lt[0].center().y())
    found = []
    for (a, ta), (b, tb) in zip(labels, labels[1:]):
        gap = b.left() - a.right() if horizontal else b.top() - a.bottom()
        if gap < (MIN_GAP if horizontal else 0.0):
            found.append(f"{axis.orientation} ticks {ta!r} and {tb!r} {'overlap' if gap < 0 else 'touch'} "
                         f"({gap:.1f} px apart)")
    return found


def fractional_ticks(axis: pg.AxisItem) -> list[str]:
    """Tick labels of `axis` that are not whole numbers (on an axis of counts or numbers)."""
    bad = [text for _rect, text in tick_labels(axis) if not _INTEGER.fullmatch(text.strip())]
    return [f"{axis.orientation} axis counts, but has ticks {bad}"] if bad else []


def _symbol_points(item) -> tuple[np.ndarray, float]:
    """The (x, y) of the symbols `item` draws, in data coordinates, and their largest size in pixels."""
    if isinstance(item, pg.PlotDataItem):
        if item.opts.get("symbol") is None:
            return np.empty((0, 2)), 0.0
        x, y = item.getData()
        size = float(item.opts.get("symbolSize") or 0)
    elif isinstance(item, pg.ScatterPlotItem):
        x, y = item.getData()
        sizes = item.data["size"] if len(item.data) else np.empty(0)
        size = float(max(np.max(sizes, initial=0), item.opts.get("size", 0)))
    else:
        return np.empty((0, 2)), 0.0
    if x is None or len(x) == 0:
        return np.empty((0, 2)), 0.0
    xy = np.column_stack([np.asarray(x, float), np.asarray(y, float)])
    return xy[np.isfinite(xy).all(axis=1)], size


def _curve(item) -> np.ndarray:
    """The polyline a PlotDataItem draws (its pen's line), in data coordinates."""
    if not isinstance(item, pg.PlotDataItem) or item.opts.get("pen") is None or not item.curve.isVisible():
        return np.empty((0, 2))
    x, y = item.getData()
    if x is None or len(x) < 2:
        return np.empty((0, 2))
    return np.column_stack([np.asarray(x, float), np.asarray(y, float)])


def _to_scene(vb: pg.ViewBox, xy: np.ndarray) -> np.ndarray:
    if not len(xy):
        return xy
    transform = vb.childGroup.sceneTransform()
    return np.array([(p.x(), p.y()) for p in (transform.map(QPointF(x, y)) for x, y in xy)])


def _segment_meets(rect: QRectF, a: np.ndarray, b: np.ndarray) -> bool:
    """The segment a-b passes through `rect` (Liang-Barsky clipping)."""
    t0, t1 = 0.0, 1.0
    d = b - a
    for p, q in ((-d[0], a[0] - rect.left()), (d[0], rect.right() - a[0]), (-d[1], a[1] - rect.top()),
                 (d[1], rect.bottom() - a[1])):
        if p == 0:
            if q < 0:
                return False
        else:
            t = q / p
            if p < 0:
                t0 = max(t0, t)
            else:
                t1 = min(t1, t)
            if t0 > t1:
                return False
    return True


def _bars(vb: pg.ViewBox, item) -> list[QRectF]:
    """The bars a BarGraphItem draws, in scene coordinates."""
    if not isinstance(item, pg.BarGraphItem) or item.opts.get("height") is None:
        return []
    x0, y0, x1, y1 = (np.broadcast_to(np.asarray(v, float), np.shape(item.opts["height"]))
                      for v in item._getNormalizedCoords())
    corners = [_to_scene(vb, np.array([[a, b], [c, d]])) for a, b, c, d in zip(x0, y0, x1, y1)]
    return [QRectF(QPointF(*c.min(axis=0)), QPointF(*c.max(axis=0))) for c in corners]


def _data_items(plot) -> Iterable:
    return [item for item in plot.getPlotItem().listDataItems() + list(plot.getViewBox().addedItems)
            if item.isVisible()]


def covered_by_legends(plot) -> list[str]:
    """Data points, curves and bars a legend of `plot` lies on."""
    vb = plot.getViewBox()
    view = vb.sceneBoundingRect()
    legends = [item for item in plot.scene().items() if isinstance(item, pg.LegendItem) and item.isVisible()
               and item.items]
    found = []
    for legend in legends:
        box = legend.sceneBoundingRect()
        for item in set(_data_items(plot)):
            name = item.name() if hasattr(item, "name") and item.name() else type(item).__name__
            points, size = _symbol_points(item)
            scene = _to_scene(vb, points)
            grown = box.adjusted(-size / 2, -size / 2, size / 2, size / 2)
            hits = [p for p in scene if view.contains(QPointF(*p)) and grown.contains(QPointF(*p))]
            if hits:
                found.append(f"the legend covers {len(hits)} point(s) of {name!r}")
            line = _to_scene(vb, _curve(item))
            inside = box.intersected(view)
            if inside.isValid() and any(_segment_meets(inside, a, b) for a, b in zip(line, line[1:])
                                        if np.isfinite(a).all() and np.isfinite(b).all()):
                found.append(f"the legend lies on the curve of {name!r}")
            if any(bar.intersects(inside) for bar in _bars(vb, item)):
                found.append(f"the legend lies on the bars of {name!r}")
    return found


def unlisted(plot) -> list[str]:
    """Named data items a legend of `plot` does not list (a plot with a legend lists what it draws)."""
    legends = [item for item in plot.scene().items() if isinstance(item, pg.LegendItem)]
    if not legends:
        return []
    listed = {label.text for legend in legends for _sample, label in legend.items}
    names = {item.name() for item in _data_items(plot) if isinstance(item, pg.PlotDataItem) and item.name()
             and item.getData()[0] is not None and len(item.getData()[0])}
    return [f"the legend does not list {name!r}" for name in sorted(names - listed)]


def points_on_frame(plot) -> list[str]:
    """Data points whose symbol touches the data area's frame or lies outside it."""
    vb = plot.getViewBox()
    view = vb.sceneBoundingRect()
    found = []
    for item in set(_data_items(plot)):
        points, size = _symbol_points(item)
        margin = size / 2 + FRAME_GAP
        inner = view.adjusted(margin, margin, -margin, -margin)
        off = [p for p in _to_scene(vb, points) if not inner.contains(QPointF(*p))]
        if off:
            name = item.name() if hasattr(item, "name") and item.name() else type(item).__name__
            found.append(f"{len(off)} point(s) of {name!r} on or past the frame")
    return found


def squashed(plot) -> list[str]:
    """A data area too low or too narrow to read its points apart (an aspect-locked plot keeps its proportions)."""
    vb = plot.getViewBox()
    least, share = FLAT
    if min(vb.width(), vb.height()) >= least and (vb.state["aspectLocked"] or vb.height() >= share * vb.width()):
        return []
    return [f"its data area is squashed: {vb.width():.0f}x{vb.height():.0f} px"]


def cut_off(plot) -> list[str]:
    """Tick labels and legends that run past the plot's edges (the layout gave it less than they take), or past
    what its viewport shows of it."""
    shown = plot.viewport().size()
    edge = QRectF(0, 0, min(plot.width(), shown.width()), min(plot.height(), shown.height())).adjusted(-1, -1, 1, 1)
    axes = [item for item in plot.scene().items() if isinstance(item, pg.AxisItem)]  # a colour bar's too
    boxes = [(f"tick {text!r}", box) for axis in axes for box, text in tick_labels(axis)]
    boxes += [("the legend", item.sceneBoundingRect()) for item in plot.scene().items()
              if isinstance(item, pg.LegendItem) and item.isVisible() and item.items]
    return [f"{what} is cut off by the plot's edge" for what, box in boxes if not edge.contains(box)]


def plot_problems(plot, integer_axes: Iterable[str] = ()) -> list[str]:
    """Everything `plot` (a pyqtgraph PlotWidget, laid out and shown) does that a reader cannot read; the axes named
    in `integer_axes` ("left", "bottom") count or number things and may only have whole-number ticks."""
    for _ in range(2):  # painted, as a reader sees it: pyqtgraph fits a view's range to its data when it paints
        plot.grab()  # it, and an axis makes room for taller labels at one paint to show them at the next
        QApplication.processEvents()
    problems = []
    for name in ("left", "bottom"):
        axis = plot.getAxis(name)
        problems += overlapping_ticks(axis)
        if name in integer_axes:
            problems += fractional_ticks(axis)
    return problems + cut_off(plot) + unlisted(plot) + covered_by_legends(plot) + points_on_frame(plot) + \
        squashed(plot)
