"""Vector export (SVG, PDF) of a view as it is on screen, so that every renderer draws the same picture.

`QWidget.render` into an SVG generator or a PDF writer neither clips children to their parents (a table's rows and a
scroll area's content spill over their neighbours) nor is limited to what is shown. So the view is composed here,
widget by widget: each visible widget is painted alone, clipped to what its parents show; hidden widgets (the other
tabs) are never painted. Form controls (buttons, combo boxes, sliders, spin boxes, headers), whose style paints
gradients that PDF cannot take, are embedded as images at three times their size. pyqtgraph plots are put into
pyqtgraph's export mode (scatter symbols as paths, not a pixmap atlas), and the SVG's strokes that pyqtgraph draws in
a scaled coordinate system are rewritten in page coordinates (`svg_geometry.flatten_scaled_strokes`), because
librsvg, Inkscape-based pipelines and ImageMagick ignore `vector-effect="non-scaling-stroke"`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pyqtgraph as pg
from PySide6.QtCore import QBuffer, QByteArray, QIODevice, QMarginsF, QPoint, QPointF, QRect, QRectF, QSize, QSizeF, Qt
from PySide6.QtGui import QFont, QFontInfo, QImage, QPageLayout, QPageSize, QPainter, QPdfWriter
from PySide6.QtSvg import QSvgGenerator, QSvgRenderer
from PySide6.QtWidgets import (
    QAbstractButton,
    QAbstractSlider,
    QAbstractSpinBox,
    QComboBox,
    QGraphicsItem,
    QGraphicsScene,
    QGraphicsView,
    QHeaderView,
    QLineEdit,
    QProgressBar,
    QStyleOptionGraphicsItem,
    QTabBar,
    QWidget,
)

from probescope.app.figures.svg_geometry import compose_svg, flatten_scaled_strokes, font_families

RASTER_CONTROLS = (QAbstractButton, QComboBox, QAbstractSlider, QAbstractSpinBox, QLineEdit, QHeaderView, QTabBar,
                   QProgressBar)
CONTROL_SCALE = 3.0  # controls embedded as images at this many pixels per point


@dataclass(frozen=True)
class Piece:
    """One widget of the view to paint alone: at `origin`, clipped to `shown` (both in the view's coordinates)."""

    widget: QWidget
    origin: QPoint
    shown: QRect
    flags: QWidget.RenderFlag
    raster: bool  # a form control: embedded as an image


def pieces(root: QWidget, source: QRect) -> Iterator[Piece]:
    """The visible widgets under `root`, parents before children, each clipped to what its parents show."""

    def walk(widget: QWidget, origin: QPoint, clip: QRect) -> Iterator[Piece]:
        shown = QRect(origin, widget.size()) & clip
        if shown.isEmpty():
            return
        raster = isinstance(widget, RASTER_CONTROLS)
        background = widget is root or widget.autoFillBackground()
        yield Piece(widget, origin, shown, QWidget.RenderFlag.DrawWindowBackground if background
                    else QWidget.RenderFlag(0), raster)
        if raster:
            return
        for child in widget.children():
            if isinstance(child, QWidget) and not child.isWindow() and child.isVisibleTo(root):
                yield from walk(child, origin + child.pos(), shown)

    yield from walk(root, QPoint(0, 0), source)


def _svg_document(size: QSize, dpi: int, paint) -> bytes:
    """An SVG of `size` painted by `paint(painter)`, with strokes in page coordinates."""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    generator = QSvgGenerator(QSvgGenerator.SvgVersion.Svg11)
    generator.setOutputDevice(buffer)
    generator.setResolution(dpi)
    generator.setSize(size)
    generator.setViewBox(QRect(QPoint(0, 0), size))
    painter = QPainter(generator)
    try:
        _hints(painter)
        paint(painter)
    finally:
        painter.end()
    buffer.close()
    return flatten_scaled_strokes(bytes(data))


def scene_items(view: QGraphicsView) -> Iterator[tuple[QRectF, QGraphicsItem | None]]:
    """A graphics view's scene as (clip rectangle in viewport coordinates, item), bottom first; None first for the
    view's background. Each item is painted into a document of its own: Qt's SVG engine would carry the clip of
    one item (a text item's) over to the items painted after it."""
    prepare = getattr(view.scene(), "prepareForPaint", None)
    if prepare is not None:
        prepare()  # pyqtgraph: view boxes bring their transforms up to date, as before any paint
    viewport = QRectF(view.viewport().rect())
    yield viewport, None
    to_view = view.viewportTransform()
    for item in view.scene().items(Qt.SortOrder.AscendingOrder):
        if not item.isVisible() or item.effectiveOpacity() <= 0:
            continue
        clip = viewport
        parent = item.parentItem()
        while parent is not None:
            if parent.flags() & QGraphicsItem.GraphicsItemFlag.ItemClipsChildrenToShape:
                clip = clip & to_view.map(parent.mapToScene(parent.shape())).boundingRect()
            parent = parent.parentItem()
        if not clip.isEmpty():
            yield clip, item


def paint_scene_item(view: QGraphicsView, item: QGraphicsItem | None, painter: QPainter) -> None:
    """One item of the view's scene (None: the background) in viewport coordinates."""
    if item is None:
        painter.fillRect(view.viewport().rect(), view.backgroundBrush())
        return
    painter.setTransform(item.deviceTransform(view.viewportTransform()))
    painter.setOpacity(item.effectiveOpacity())
    option = QStyleOptionGraphicsItem()
    option.exposedRect = item.boundingRect()
    item.paint(painter, option, None)


def paint_piece(piece: Piece, painter: QPainter, origin: QPoint) -> None:
    """Paint `piece` with its top left corner at `origin` (in painter coordinates)."""
    widget = piece.widget
    if piece.raster:
        image = QImage((widget.size().toSizeF() * CONTROL_SCALE).toSize(), QImage.Format.Format_ARGB32_Premultiplied)
        image.fill(0)
        inner = QPainter(image)
        inner.scale(CONTROL_SCALE, CONTROL_SCALE)
        QWidget.render(widget, inner, QPoint(0, 0), widget.rect(), QWidget.RenderFlag.DrawChildren)
        inner.end()
        painter.drawImage(QRect(origin, widget.size()), image)
    else:
        QWidget.render(widget, painter, origin, widget.rect(), piece.flags)  # (QGraphicsView overrides render)


def scene_view(piece: Piece) -> QGraphicsView | None:
    """The graphics view (a plot) whose viewport `piece` is, if it is one."""
    view = piece.widget.parent()
    return view if isinstance(view, QGraphicsView) and piece.widget is view.viewport() else None


def paint_clipped(piece: Piece, painter: QPainter, dpi: int) -> None:
    """A widget only part of which its parents show, painted through an SVG document of its own. Painted straight
    into a PDF writer, the text of a label at a scroll area's fold ran past the painter's clip over the status bar
    below: Qt's shared painter does not take the writer's clip into the widget's painting, while Qt SVG's renderer
    draws under it."""
    document = _svg_document(piece.widget.size(), dpi, lambda p: paint_piece(piece, p, QPoint(0, 0)))
    QSvgRenderer(QByteArray(document)).render(painter, QRectF(QPointF(piece.origin), piece.widget.size().toSizeF()))


def _hints(painter: QPainter) -> None:
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)


@contextmanager
def export_mode(root: QWidget) -> Iterator[None]:
    """pyqtgraph's export mode for every plot under `root` (vector scatter symbols, no cached pixmaps), and no item
    index in their scenes: a plot just laid out at a figure's size has moved items the index has not caught up with
    (Qt updates it later, from the event loop), and a view paints only the items its index finds. Views that
    follow a palette change only once shown are brought to the current one (the figure's colours) first."""
    for widget in [root, *root.findChildren(QWidget)]:
        follow = getattr(widget, "follow_palette", None)
        if follow is not None:
            follow()
    views = root.findChildren(pg.GraphicsView) + ([root] if isinstance(root, pg.GraphicsView) else [])
    items = [item for view in views for item in view.scene().items() if hasattr(item, "setExportMode")]
    scenes = {view.scene(): view.scene().itemIndexMethod() for view in views}
    for scene in scenes:
        scene.setItemIndexMethod(QGraphicsScene.ItemIndexMethod.NoIndex)
    for item in items:
        item.setExportMode(True, {"antialias": True})
    try:
        yield
    finally:
        for item in items:
            item.setExportMode(False)
        for scene, method in scenes.items():
            scene.setItemIndexMethod(method)


def svg_bytes(widget: QWidget, source: QRect, title: str, page_dpi: float | None = None) -> bytes:
    """The view as SVG, one user unit per screen pixel, `page_dpi` units to the inch (default: the screen's, the
    view's size on screen): every piece drawn into its own SVG at its own origin (so the clips that item views set
    are right: Qt's SVG engine writes them without the offset of a widget being rendered), its strokes in page
    coordinates, then placed and clipped in one document."""
    dpi = widget.logicalDpiX()  # the screen's: fonts keep the size the layout measured them at
    placed = []
    with export_mode(widget):
        for piece in pieces(widget, source):
            origin, shown = piece.origin - source.topLeft(), piece.shown.translated(-source.topLeft())
            rect = (shown.x(), shown.y(), shown.width(), shown.height())
            view = scene_view(piece)
            if view is not None:  # a plot: item by item
                for clip, item in scene_items(view):
                    box = (clip.translated(QPointF(origin)) & QRectF(shown)).getRect()
                    placed.append((type(item).__name__ if item is not None else "background", (origin.x(), origin.y()),
                                   box, _svg_document(piece.widget.size(), dpi,
                                                      lambda p, v=view, i=item: paint_scene_item(v, i, p))))
                continue
            placed.append((type(piece.widget).__name__, (origin.x(), origin.y()), rect, _svg_document(
                piece.widget.size(), dpi, lambda p, x=piece: paint_piece(x, p, QPoint(0, 0)))))
    return compose_svg(placed, (source.width(), source.height()), title, page_dpi or dpi, fonts=_named_fonts)


def _named_fonts(family: str) -> str:
    """The font-family list an SVG names for Qt's `family`: the font Qt resolved it to, and a generic fallback."""
    return font_families(family, QFontInfo(QFont(family)).family())


def pdf_bytes(widget: QWidget, source: QRect, title: str, page_dpi: float | None = None) -> bytes:
    """A PDF whose single page is exactly the view, `page_dpi` screen pixels to the inch (default: the screen's
    resolution, the view's size on screen), with no page margins."""
    data = QByteArray()
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    writer = QPdfWriter(buffer)
    writer.setTitle(title)
    writer.setCreator("probescope")
    dpi = widget.logicalDpiX()  # fonts keep the size the layout measured them at
    writer.setResolution(dpi)
    page = QPageSize(QSizeF(source.size()) * (72 / (page_dpi or dpi)), QPageSize.Unit.Point)
    writer.setPageLayout(QPageLayout(page, QPageLayout.Orientation.Portrait, QMarginsF(0, 0, 0, 0)))
    painter = QPainter(writer)
    try:
        points = page.sizePoints()  # the page is whole points: the view is stretched (< 1/2 pt) to fill it exactly
        painter.scale(points.width() * dpi / 72 / source.width(), points.height() * dpi / 72 / source.height())
        painter.translate(-source.topLeft())
        _hints(painter)
        with export_mode(widget):
            for piece in pieces(widget, source):
                painter.save()
                painter.setClipRect(piece.shown)
                if piece.raster or piece.shown.size() == piece.widget.size() or scene_view(piece) is not None:
                    paint_piece(piece, painter, piece.origin)  # (a graphics view clips its own painting)
                else:  # partly shown (a scroll area's content at the fold): see `paint_clipped`
                    paint_clipped(piece, painter, dpi)
                painter.restore()
    finally:
        painter.end()
    buffer.close()
    return bytes(data)
