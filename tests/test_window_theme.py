"""A theme switched while the app runs: every text item with a colour of its own takes the new theme's shade
(contrast at least 4.5:1, WCAG AA), as when the app starts in that theme. The colours were baked into rich text,
tree items and style sheets when they were made, so after a switch the header's "yellow outline" read at 2.2:1, the
red "SIMULATED judgments" at 2.2:1 and the error banner kept the old background."""

from __future__ import annotations

import re

import numpy as np
import pytest
from PySide6.QtCore import QAbstractListModel, QModelIndex, QPoint, Qt
from PySide6.QtGui import QBrush, QColor, QImage, QPainter, QPalette
from PySide6.QtWidgets import QAbstractItemView, QApplication, QHeaderView, QLabel, QWidget
from windows import open_all, world_requests

from probescope.app.window.theme import apply_theme
from probescope.core.similarity.catalog import Catalog, read_catalog_hdf5, write_catalog_hdf5
from probescope.jobs.inputs import OpenRequest
from probescope.widgets.gallery.grid import GalleryDelegate
from probescope.widgets.ink import ROLES, contrast, ink, ink_color, readable_on
from probescope.widgets.plot_frame import FigurePlot
from probescope.widgets.plots_bars import class_color

pytestmark = pytest.mark.usefixtures("isolated_cache")

COLOUR = re.compile(r"(?<![-\w])color:\s*(#[0-9a-fA-F]{6}|[a-z]+)")
BACKGROUND = re.compile(r"background(?:-color)?:\s*(#[0-9a-fA-F]{6}|[a-z]+)")
MAX_ROWS = 300  # rows of each item view looked at


@pytest.fixture
def loaded(qtbot, window, small_world, tmp_path):
    """The small world, its judgments flagged as simulated (the header's red warning), and an error banner."""
    catalog = read_catalog_hdf5(small_world["catalog"], small_world["image_root"])
    write_catalog_hdf5(tmp_path / "simulated.hdf5", Catalog(catalog.paths, catalog.mirror_of, catalog.root,
                                                            catalog.classes, simulated=True))
    requests = world_requests(small_world)[:3] + [
        OpenRequest("judgments", str(small_world["judgments"]), str(tmp_path / "simulated.hdf5"),
                    str(small_world["image_root"]))]
    open_all(qtbot, window, requests)
    window.notify("a task failed", "its details")
    return window


def _pump() -> None:
    for _ in range(3):
        QApplication.processEvents()


def _drawn(label: QLabel, colour: QColor, background: QColor) -> bool:
    """`colour` is on the label as it paints now (glyph cores, rendered at 3x on its background)."""
    image = QImage(label.size() * 3, QImage.Format.Format_RGB888)
    image.fill(background)
    painter = QPainter(image)
    painter.scale(3, 3)
    label.render(painter, QPoint())
    painter.end()
    arr = np.frombuffer(image.constBits(), np.uint8, image.bytesPerLine() * image.height())
    rgb = arr.reshape(image.height(), image.bytesPerLine())[:, : 3 * image.width()].reshape(-1, 3).astype(int)
    return bool((np.abs(rgb - [colour.red(), colour.green(), colour.blue()]).max(axis=1) <= 8).any())


def _background(widget: QWidget) -> QColor:
    """What a widget without a background of its own is drawn on: the nearest ancestor's that paints one (the
    error banner paints the tooltip colour), else the window's."""
    from probescope.widgets.notification import Notification

    w = widget
    while w is not None:
        if isinstance(w, Notification):
            return w.palette().color(QPalette.ColorRole.ToolTipBase)
        w = w.parentWidget()
    return widget.palette().color(QPalette.ColorRole.Window)


def _labels(window) -> list[tuple[str, QColor, QColor]]:
    found = []
    for label in window.findChildren(QLabel):
        text = label.text()
        assert "{ink:" not in text, label.objectName() or text[:60]
        background = _background(label)
        if label.foregroundRole() not in (QPalette.ColorRole.WindowText, QPalette.ColorRole.NoRole):
            found.append((f"label role {label.foregroundRole().name}", label.palette().color(label.foregroundRole()),
                          background))
        sheet = label.styleSheet()
        if "color" in sheet:
            colour = COLOUR.search(sheet)
            under = BACKGROUND.search(sheet)
            if colour:
                found.append((f"style sheet {sheet[:40]}", QColor(colour.group(1)),
                              QColor(under.group(1)) if under else background))
        for colour in {c.lower() for c in COLOUR.findall(text) if c.startswith("#")}:
            assert not label.isVisibleTo(window) or _drawn(label, QColor(colour), background), text[:80]
            found.append((f"label text {re.sub('<[^>]+>', '', text)!r}", QColor(colour), background))
    return found


def _item_views(window) -> list[tuple[str, QColor, QColor]]:
    found = []

    def walk(view: QAbstractItemView, parent, depth: int) -> None:
        model = view.model()
        base = view.palette().color(QPalette.ColorRole.Base)
        alternate = view.palette().color(QPalette.ColorRole.AlternateBase)
        for r in range(min(model.rowCount(parent), MAX_ROWS)):
            for c in range(1 if isinstance(model, QAbstractListModel) else model.columnCount(parent)):
                index = model.index(r, c, parent)
                brush = model.data(index, Qt.ItemDataRole.ForegroundRole)
                if isinstance(brush, (QBrush, QColor)) and (not isinstance(brush, QBrush)
                                                            or brush.style() != Qt.BrushStyle.NoBrush):
                    colour = brush.color() if isinstance(brush, QBrush) else brush
                    text = str(model.data(index))[:30]
                    for bg in (base, alternate):
                        found.append((f"{type(view).__name__} cell {text!r}", colour, bg))
            if depth < 2 and model.rowCount(model.index(r, 0, parent)):
                walk(view, model.index(r, 0, parent), depth + 1)

    for view in window.findChildren(QAbstractItemView):
        if view.model() is not None and not isinstance(view, QHeaderView):
            walk(view, QModelIndex(), 0)
    return found


def _plots(window) -> list[tuple[str, QColor, QColor]]:
    found = []
    for plot in window.findChildren(FigurePlot):
        for item, role in plot.inked_items():
            found.append((f"plot text {role}", QColor(item.color), plot.backgroundBrush().color()))
    return found


def coloured_texts(window) -> list[tuple[str, QColor, QColor]]:
    """(where, text colour, background) of every text item with a colour of its own."""
    return _labels(window) + _item_views(window) + _plots(window)


def test_switching_the_theme_at_run_time_recolours_every_coloured_text(qtbot, loaded):
    try:
        for theme in ("dark", "light", "dark"):
            loaded.set_theme(theme)  # View > Theme
            _pump()
            for name in loaded.workspaces:  # each looked at: views hidden under another workspace recolour when shown
                loaded.set_workspace(name)
                _pump()
            found = coloured_texts(loaded)
            poor = [(where[:80], fg.name(), bg.name(), round(contrast(fg, bg), 2)) for where, fg, bg in found
                    if contrast(fg, bg) < 4.5]
            assert not poor, (theme, poor)
            colours = {fg.name() for _, fg, _ in found}
            for role in ROLES:  # each meaning is on screen, in this theme's shade
                assert ink(role) in colours, (theme, role)
            texts = " ".join(where for where, _, _ in found)
            for shown in ("yellow outline = unit mask", "cyan = explanation", "SIMULATED judgments",
                          "Disagreeing triplets", "model rank", "plot text warning"):
                assert shown in texts, (theme, shown)
            banner = loaded.notification
            assert banner.isVisible()
            image = banner.grab().toImage()
            assert QColor(image.pixel(image.width() // 2, 3)) == banner.palette().color(QPalette.ColorRole.ToolTipBase)
    finally:
        apply_theme(QApplication.instance(), "light")


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_gallery_bar_labels_read_on_their_bars_and_keep_their_underscores(qtbot, theme):
    """The p(y|x) labels were white on pink and light grey bars in the dark theme (1.3:1), and the underscore of
    'sunset_sea-s' fell below the bar, where it could not be seen."""
    from PySide6.QtGui import QFontMetrics

    from probescope.widgets.gallery.grid import GalleryModel

    apply_theme(QApplication.instance(), theme)
    try:
        for k in range(20):
            assert contrast(readable_on(class_color(k)), class_color(k)) >= 4.5
        delegate = GalleryDelegate(96)
        font = delegate.small_font(QApplication.font())
        assert delegate.bar_row() >= QFontMetrics(font).height() + 4
        text = QApplication.palette().color(QPalette.ColorRole.Text)
        bars = []
        names = ("______", "      ")  # underscores or spaces: only the underscores differ, left of the value
        for name in names:
            model = GalleryModel()
            model.set_items(np.arange(1), np.array([[3, -1, -1]]), np.array([[1.0, 0, 0]]), ["a", "b", "c", name])
            pixmap = delegate._bars(model, 0, np.array([3, -1, -1]), np.array([1.0, 0, 0]), 96, font, text)
            picture = pixmap.toImage().convertToFormat(QImage.Format.Format_ARGB32)
            pixels = np.frombuffer(picture.constBits(), np.uint8)
            bars.append(pixels.reshape(picture.height(), picture.width(), 4).copy())
        row = delegate.bar_row()
        left = 3 + min(QFontMetrics(font).horizontalAdvance(n) for n in names)
        underscores = np.argwhere(np.abs(bars[0][:row, :left].astype(int) - bars[1][:row, :left]).max(axis=2) > 60)
        assert len(underscores) >= 10
        assert underscores[:, 0].min() >= 1 and underscores[:, 0].max() <= row - 2  # on the bar, not under it
        bar = class_color(3)
        ink_there = bars[0][underscores[:, 0], underscores[:, 1], :3].astype(int)  # (BGRA bytes: BGR)
        darkest = QColor(*ink_there[np.argmax(np.abs(ink_there - [bar.blue(), bar.green(), bar.red()]).sum(axis=1))][
            ::-1].tolist())
        assert contrast(darkest, bar) >= 4.5  # the underscore reads on the bar
    finally:
        apply_theme(QApplication.instance(), "light")


def test_inks_keep_their_contrast_in_both_themes(qtbot):
    for theme in ("light", "dark"):
        apply_theme(QApplication.instance(), theme)
        palette = QApplication.palette()
        for role in ROLES:
            for background in (QPalette.ColorRole.Window, QPalette.ColorRole.Base, QPalette.ColorRole.AlternateBase):
                assert contrast(ink_color(role), palette.color(background)) >= 4.5, (theme, role, background)
    apply_theme(QApplication.instance(), "light")


def test_a_theme_switch_changes_the_palette_and_keeps_the_style(qapp):
    """Switching themes changes only the palette: it used to set the Fusion style again each time, a new style
    object that every widget was polished with anew."""
    apply_theme(qapp, "light")
    style = qapp.style()
    try:
        assert apply_theme(qapp, "dark") == "dark" and qapp.style() is style
        assert qapp.palette().color(QPalette.ColorRole.Window) == QColor("#2b2d30")
        assert apply_theme(qapp, "light") == "light" and qapp.style() is style
        assert qapp.palette().color(QPalette.ColorRole.Window) != QColor("#2b2d30")
        assert style.baseStyle().name().lower() == "fusion"  # (Fusion, its check boxes edged: app/window/theme.py)
    finally:
        apply_theme(qapp, "light")
