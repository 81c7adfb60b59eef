"""Export of any view as a figure: PNG at a chosen width or scale (larger than the screen), SVG, PDF, clipboard.

A PNG is rendered through `QWidget.render` into an image of the requested size, so pyqtgraph plots and text are
redrawn at that resolution (not upscaled screen pixels). SVG and PDF are composed widget by widget
(`export_vector`), so they show what the screen shows in every renderer. The whole widget with all its visible
children is drawn, so overlays are never cropped. "Margin-free" trims the border of plain background around the
content, in every format.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PySide6.QtCore import QBuffer, QIODevice, QPoint, QRect, QSize
from PySide6.QtGui import QColor, QGuiApplication, QImage, QPainter
from PySide6.QtWidgets import QWidget

from probescope.app.export_vector import pdf_bytes, svg_bytes
from probescope.core.atomic import write_bytes
from probescope.core.errors import InputError

FORMATS = ("png", "svg", "pdf")


@dataclass(frozen=True)
class ExportTarget:
    """One exportable view of a workspace: the whole workspace or a single plot in it."""

    name: str
    widget: QWidget


def format_of(path: str | Path) -> str:
    suffix = Path(path).suffix.lower().lstrip(".")
    if suffix not in FORMATS:
        raise InputError(f"cannot export to '.{suffix}'; use one of .png, .svg, .pdf", path)
    return suffix


def content_rect(widget: QWidget) -> QRect:
    """The part of `widget` that is not plain background (its own window colour), in widget coordinates."""
    image = widget.grab().toImage().convertToFormat(QImage.Format.Format_RGB32)
    ratio = image.devicePixelRatio()
    arr = _rgb32_array(image)
    background = widget.palette().color(widget.backgroundRole())
    bg = np.uint32(QColor(background).rgb() & 0xFFFFFFFF)
    rows = np.flatnonzero((arr != bg).any(axis=1))
    cols = np.flatnonzero((arr != bg).any(axis=0))
    if rows.size == 0:
        return widget.rect()
    x0, x1 = int(cols[0] / ratio), int(np.ceil((cols[-1] + 1) / ratio))
    y0, y1 = int(rows[0] / ratio), int(np.ceil((rows[-1] + 1) / ratio))
    return QRect(x0, y0, x1 - x0, y1 - y0)


def _rgb32_array(image: QImage) -> np.ndarray:
    ptr = image.constBits()
    arr = np.frombuffer(ptr, dtype=np.uint32, count=image.bytesPerLine() * image.height() // 4)
    return arr.reshape(image.height(), image.bytesPerLine() // 4)[:, : image.width()].copy()


def _source_rect(widget: QWidget, margin_free: bool) -> QRect:
    return content_rect(widget) if margin_free else widget.rect()


def _render(widget: QWidget, painter: QPainter, source: QRect, scale: float) -> None:
    painter.setRenderHint(QPainter.RenderHint.Antialiasing)
    painter.setRenderHint(QPainter.RenderHint.TextAntialiasing)
    painter.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
    painter.scale(scale, scale)
    flags = QWidget.RenderFlag.DrawChildren | QWidget.RenderFlag.DrawWindowBackground
    QWidget.render(widget, painter, QPoint(0, 0), source, flags)  # (QGraphicsView overrides render)


def render_image(widget: QWidget, *, width: int | None = None, scale: float | None = None,
                 margin_free: bool = False) -> QImage:
    """The view as an image `width` pixels wide (or `scale` times its on-screen size; default 1)."""
    source = _source_rect(widget, margin_free)
    if width is not None:
        if width < 1:
            raise InputError(f"export width must be positive, got {width}")
        factor = width / max(source.width(), 1)
    else:
        factor = 1.0 if scale is None else float(scale)
        if factor <= 0:
            raise InputError(f"export scale must be positive, got {scale}")
    size = QSize(max(1, round(source.width() * factor)), max(1, round(source.height() * factor)))
    image = QImage(size, QImage.Format.Format_ARGB32_Premultiplied)
    image.fill(widget.palette().color(widget.backgroundRole()))
    painter = QPainter(image)
    try:
        _render(widget, painter, source, factor)
    finally:
        painter.end()
    return image


def export_widget(widget: QWidget, path: str | Path, *, width: int | None = None, scale: float | None = None,
                  margin_free: bool = False) -> Path:
    """Write `widget` to `path`; the format follows the suffix (.png, .svg, .pdf). The write is atomic."""
    path = Path(path)
    fmt = format_of(path)
    if fmt == "png":
        return write_png(render_image(widget, width=width, scale=scale, margin_free=margin_free), path)
    source = _source_rect(widget, margin_free)
    title = widget.windowTitle() or path.stem
    data = svg_bytes(widget, source, title) if fmt == "svg" else pdf_bytes(widget, source, title)
    write_bytes(path, data)
    return path


@dataclass(frozen=True)
class Preset:
    """A figure of a given physical width: the view is laid out at that width (so its fonts print at their point
    size, readable) and a PNG is rendered at `dpi`."""

    name: str
    width_in: float
    dpi: int = 300


PRESETS = (Preset("Paper column (3.5 in)", 3.5), Preset("Full page width (7 in)", 7.0))


@contextmanager
def laid_out_at(widget: QWidget, width: int) -> Iterator[None]:
    """`widget` laid out `width` pixels wide (as tall as it needs at that width, or 3/4 of the width) while
    exporting; its size and size limits are put back afterwards."""
    from PySide6.QtWidgets import QApplication

    saved = widget.size(), widget.minimumSize(), widget.maximumSize()
    height = widget.heightForWidth(width) if widget.hasHeightForWidth() else round(width * 0.75)
    widget.setFixedSize(width, max(height, 1))
    QApplication.sendPostedEvents()  # layouts (pyqtgraph's included) settle at the new size
    try:
        yield
    finally:
        widget.setMinimumSize(saved[1])
        widget.setMaximumSize(saved[2])
        widget.resize(saved[0])
        QApplication.sendPostedEvents()


def export_preset(widget: QWidget, path: str | Path, preset: Preset) -> Path:
    """Write `widget` as a figure of `preset`'s width: PNG at its dpi, or SVG/PDF of that physical width."""
    dpi = widget.logicalDpiX()
    with laid_out_at(widget, round(preset.width_in * dpi)):
        return export_widget(widget, path, scale=preset.dpi / dpi)


def write_png(image: QImage, path: str | Path) -> Path:
    """Write `image` as a PNG file, atomically."""
    write_bytes(path, _png_bytes(image))
    return Path(path)


def copy_to_clipboard(widget: QWidget, *, scale: float = 2.0, margin_free: bool = False) -> QImage:
    image = render_image(widget, scale=scale, margin_free=margin_free)
    QGuiApplication.clipboard().setImage(image)
    return image


def _png_bytes(image: QImage) -> bytes:
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG"):
        raise RuntimeError("Qt could not encode the PNG")
    return bytes(buffer.data())
