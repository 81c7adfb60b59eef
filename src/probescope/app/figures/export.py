"""Export of any view as a figure: PNG, SVG, PDF or the clipboard, at a paper preset's width or a chosen size.

SVG and PDF are composed widget by widget (`export_vector`), so they show what the screen shows in every renderer.
A PNG is the PDF rasterised (pdfium, through Qt PDF) at the figure's resolution: text, markers and strokes are drawn
at that resolution (a 2 px line is 2/96 in wide at 300 dpi, not a 2-pixel hairline; scatter symbols are paths, not
upscaled sprites), the picture is the vector files' picture, and the PNG records its resolution (pHYs), so LaTeX and
Word place it at its size. "Margin-free" trims the border of plain background around the content, in every format.

A paper preset (`Preset`) lays the view out at a physical width (`export_layout`), and a figure is drawn in the
light theme on white paper whatever the window's theme, unless it is asked to follow the theme (`figure_colours`):
every view re-reads its colours when the application's palette changes (the same event a theme switch sends).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PySide6.QtCore import QBuffer, QByteArray, QEvent, QIODevice, QRect, QSize
from PySide6.QtGui import QColor, QGuiApplication, QImage, QPainter, QPalette
from PySide6.QtPdf import QPdfDocument
from PySide6.QtWidgets import QApplication, QWidget

from probescope.app.figures.export_layout import laid_out
from probescope.app.figures.export_vector import pdf_bytes, svg_bytes
from probescope.app.window.theme import palette_for
from probescope.core.atomic import write_bytes
from probescope.core.errors import InputError

FORMATS = ("png", "svg", "pdf")
INCH_PER_METRE = 39.37007874015748
PNG_QUALITY = 80  # Qt's quality for PNG is zlib's speed: 3.5x faster than its default, files 5% larger


@dataclass(frozen=True)
class ExportTarget:
    """One exportable view of a workspace: the whole workspace or a single plot in it; `subject` names what the
    view shows when it shows one item ('unit 17', 'trial 3'), for the file name."""

    name: str
    widget: QWidget
    subject: str = ""


@dataclass(frozen=True)
class Preset:
    """A figure size: `width_in` inches wide (None: the view's own size on screen), a PNG at `dpi`. `key` is the
    command line's name for it (`probescope gui --preset`)."""

    key: str
    name: str
    width_in: float | None
    dpi: int = 300


COLUMN = Preset("column", "Paper column (3.5 in)", 3.5)
PAGE = Preset("page", "Full page width (7 in)", 7.0)
SCREEN = Preset("screen", "Its size on screen", None, 192)
PRESETS = (COLUMN, PAGE, SCREEN)
PAPER_PRESETS = (COLUMN, PAGE)


def preset_named(key: str) -> Preset:
    for preset in PRESETS:
        if preset.key == key:
            return preset
    raise InputError(f"unknown figure preset {key!r} (choose one of {', '.join(p.key for p in PRESETS)})")


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


def _pixel_size(source: QRect, width: int | None, scale: float | None) -> QSize:
    if width is not None:
        if width < 1:
            raise InputError(f"export width must be positive, got {width}")
        factor = width / max(source.width(), 1)
    else:
        factor = 1.0 if scale is None else float(scale)
        if factor <= 0:
            raise InputError(f"export scale must be positive, got {scale}")
    return QSize(max(1, round(source.width() * factor)), max(1, round(source.height() * factor)))


def rasterise_pdf(pdf: bytes, size: QSize, background: QColor) -> QImage:
    """The first page of `pdf` rendered by pdfium at `size` pixels, over `background` (a page's last fraction of a
    point, which the page size rounds up to, is not painted)."""
    data = QByteArray(pdf)
    buffer = QBuffer(data)
    buffer.open(QIODevice.OpenModeFlag.ReadOnly)
    document = QPdfDocument()
    document.load(buffer)
    if document.status() != QPdfDocument.Status.Ready or document.pageCount() < 1:
        raise RuntimeError("Qt PDF could not read the exported page")
    page = document.render(0, size)
    document.close()
    image = QImage(size, QImage.Format.Format_RGB32)
    image.fill(background)
    painter = QPainter(image)
    painter.drawImage(0, 0, page)
    painter.end()
    return image


def render_image(widget: QWidget, *, width: int | None = None, scale: float | None = None,
                 margin_free: bool = False, inches: float | None = None) -> QImage:
    """The view as an image `width` pixels wide (or `scale` times its on-screen size; default 1), recording the
    resolution that makes it `inches` wide (default: its size on screen)."""
    source = _source_rect(widget, margin_free)
    size = _pixel_size(source, width, scale)
    image = rasterise_pdf(pdf_bytes(widget, source, widget.windowTitle() or "figure"), size,
                          widget.palette().color(widget.backgroundRole()))
    dots_per_metre = round(size.width() / (inches or source.width() / widget.logicalDpiX()) * INCH_PER_METRE)
    image.setDotsPerMeterX(dots_per_metre)
    image.setDotsPerMeterY(dots_per_metre)
    return image


def export_widget(widget: QWidget, path: str | Path, *, width: int | None = None, scale: float | None = None,
                  margin_free: bool = False, inches: float | None = None) -> Path:
    """Write `widget` to `path`, `inches` wide (default: its size on screen); the format follows the suffix (.png,
    .svg, .pdf); a PNG is `width` pixels wide (or `scale` times the view's size). The write is atomic."""
    path = Path(path)
    fmt = format_of(path)
    if fmt == "png":
        return write_png(render_image(widget, width=width, scale=scale, margin_free=margin_free, inches=inches), path)
    source = _source_rect(widget, margin_free)
    title = widget.windowTitle() or path.stem
    dpi = source.width() / inches if inches else widget.logicalDpiX()
    data = svg_bytes(widget, source, title, dpi) if fmt == "svg" else pdf_bytes(widget, source, title, dpi)
    write_bytes(path, data)
    return path


def paper_palette() -> QPalette:
    """The light theme on white paper: what a figure is drawn in unless it follows the window's theme."""
    palette = palette_for("light")
    palette.setColor(QPalette.ColorRole.Window, QColor("#ffffff"))
    return palette


@contextmanager
def figure_colours(follow_theme: bool = False) -> Iterator[None]:
    """The paper's colours while a figure is drawn, whatever the window's theme, unless it follows the window's."""
    app = QApplication.instance()
    saved, paper = app.palette(), paper_palette()
    if follow_theme or saved == paper:
        yield
        return
    _set_palette(app, paper)
    try:
        yield
    finally:
        _set_palette(app, saved)


def _set_palette(app: QApplication, palette: QPalette) -> None:
    """The application's palette, reaching every widget now (Qt posts the change to them)."""
    app.setPalette(palette)
    for change in (QEvent.Type.ApplicationPaletteChange, QEvent.Type.PaletteChange):
        QApplication.sendPostedEvents(None, change)


def export_preset(widget: QWidget, path: str | Path, preset: Preset, *, margin_free: bool = False,
                  follow_theme: bool = False) -> Path:
    """Write `widget` as a figure of `preset`'s size (laid out at its width: see `export_layout`), PNG at its dpi;
    what the export dialog, the figure menus, the unit card's buttons and `probescope gui --preset` write."""
    dpi = widget.logicalDpiX()
    width = None if preset.width_in is None else round(preset.width_in * dpi)
    with figure_colours(follow_theme), laid_out(widget, width):
        if preset.width_in is None:
            return export_widget(widget, path, scale=preset.dpi / dpi, margin_free=margin_free)
        return export_widget(widget, path, width=round(preset.width_in * preset.dpi), margin_free=margin_free,
                             inches=preset.width_in)


def write_png(image: QImage, path: str | Path) -> Path:
    """Write `image` as a PNG file (with the resolution it records), atomically."""
    write_bytes(path, _png_bytes(image))
    return Path(path)


def copy_to_clipboard(widget: QWidget, *, scale: float = 2.0, margin_free: bool = False) -> QImage:
    image = render_image(widget, scale=scale, margin_free=margin_free)
    QGuiApplication.clipboard().setImage(image)
    return image


def _png_bytes(image: QImage) -> bytes:
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    if not image.save(buffer, "PNG", PNG_QUALITY):
        raise RuntimeError("Qt could not encode the PNG")
    return bytes(buffer.data())
