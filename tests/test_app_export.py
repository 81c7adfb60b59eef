"""Export writes PNG/SVG/PDF files that open, at sizes larger than the screen, with and without margins."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
import pytest
from PySide6.QtGui import QColor, QGuiApplication, QImage
from PySide6.QtSvg import QSvgRenderer
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from probescope.app.figures.export import content_rect, copy_to_clipboard, export_widget, render_image
from probescope.core.errors import InputError


@pytest.fixture
def figure(qtbot):
    widget = QWidget()
    layout = QVBoxLayout(widget)
    layout.setContentsMargins(30, 30, 30, 30)
    layout.addWidget(QLabel("unit 17: water (IoU 0.31)"))
    plot = pg.PlotWidget()
    plot.plot(np.arange(10), np.arange(10) ** 2, pen="r")
    layout.addWidget(plot)
    widget.resize(400, 300)
    qtbot.addWidget(widget)
    widget.show()
    qtbot.waitExposed(widget)
    return widget


def test_png_at_width_larger_than_screen(figure, tmp_path):
    path = export_widget(figure, tmp_path / "fig.png", width=3000)
    image = QImage(str(path))
    assert image.width() == 3000 and image.height() == 2250
    # not blank: many distinct colours
    small = image.scaled(100, 75).convertToFormat(QImage.Format.Format_RGB32)
    colors = {small.pixel(x, y) for x in range(100) for y in range(75)}
    assert len(colors) > 3


def test_png_scale_and_margin_free(figure, tmp_path):
    full = QImage(str(export_widget(figure, tmp_path / "a.png", scale=2)))
    assert (full.width(), full.height()) == (800, 600)
    rect = content_rect(figure)
    assert rect.x() >= 25 and rect.y() >= 25 and rect.width() <= 350
    trimmed = QImage(str(export_widget(figure, tmp_path / "b.png", scale=2, margin_free=True)))
    assert trimmed.width() == 2 * rect.width() and trimmed.height() == 2 * rect.height()
    background = QColor(figure.palette().color(figure.backgroundRole())).rgb()
    corners = [full.pixel(1, 1), trimmed.pixel(0, 0), trimmed.pixel(trimmed.width() - 1, trimmed.height() - 1)]
    assert corners[0] == background
    assert corners[1] != background or corners[2] != background


def test_svg_and_pdf_open(figure, tmp_path):
    svg = export_widget(figure, tmp_path / "fig.svg")
    renderer = QSvgRenderer(str(svg))
    assert renderer.isValid()
    assert renderer.viewBox().width() == 400 and renderer.viewBox().height() == 300
    pdf = export_widget(figure, tmp_path / "fig.pdf", margin_free=True)
    from PySide6.QtPdf import QPdfDocument

    doc = QPdfDocument()
    assert doc.load(str(pdf)) == QPdfDocument.Error.None_
    assert doc.pageCount() == 1
    size = doc.pagePointSize(0)
    rect = content_rect(figure)
    points = 72 / figure.logicalDpiX()  # the page is the view at the screen's resolution: fonts keep their size
    assert abs(size.width() - rect.width() * points) < 1.5 and abs(size.height() - rect.height() * points) < 1.5
    doc.close()


def test_bad_format_and_clipboard(figure, tmp_path):
    with pytest.raises(InputError, match="cannot export"):
        export_widget(figure, tmp_path / "fig.jpg2")
    image = copy_to_clipboard(figure, scale=1)
    assert QGuiApplication.clipboard().image().size() == image.size()
    assert render_image(figure, width=100).width() == 100
