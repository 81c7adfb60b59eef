"""Every exportable view of every workspace, at every preset (a paper column, a full page width, the view's own size),
as PNG, SVG and PDF, from a dark window.

What a figure shows is read back from its SVG (`figures.svg_marks`: each text's ink box and each image's box against
the clips it is drawn under, the page among them): the paper column shows whole every word and image that the view
shows whole on screen or laid out at a full page's width, and the full page what the screen shows; nothing is
elided, cut by its cell or its widget, or pushed off the page. The PNG is checked to be the SVG's picture (with
librsvg, where it is installed) and the PDF its page and text; every file is the preset's size, a PNG records the
preset's resolution, figures are light (paper) in a dark window, and exporting leaves the window as it was.
"""

from __future__ import annotations

import shutil
import subprocess
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from figures import Mark, png_dpi, svg_inches, svg_marks, text_lightness, tokens, whole_images, whole_words
from PIL import Image
from PySide6.QtGui import QImage
from PySide6.QtPdf import QPdfDocument
from PySide6.QtWidgets import QApplication, QWidget
from windows import WAIT_MS, open_all, world_requests

from probescope.app.figures.export import PRESETS, ExportTarget, Preset, export_preset, figure_colours, paper_palette
from probescope.app.figures.export_layout import natural_size
from probescope.app.window.theme import apply_theme

pytestmark = pytest.mark.usefixtures("isolated_cache")
TICKS = ("AxisItem", "FigureAxis", "InverseAxis")  # tick labels: a plot picks them anew at each size
FORMATS = ("svg", "png", "pdf")


def lost(reference: Counter, marks: list[Mark]) -> list[str]:
    """The words of `reference` a figure does not show whole (as often)."""
    return sorted((reference - whole_words(marks, TICKS)).elements())


def cut(marks: list[Mark], words: list[str]) -> list[str]:
    """The texts holding those words, drawn but not whole: what went wrong, for the message."""
    return sorted({m.text for m in marks if m.kind == "text" and not m.whole and set(tokens(m.text)) & set(words)})


def geometry(window: QWidget) -> dict[int, tuple]:
    return {id(w): (type(w).__name__, w.geometry().getRect()) for w in window.findChildren(QWidget)
            if w.isVisible() and not w.visibleRegion().isEmpty()}


def same_picture(png: Path, svg: Path, size: tuple[int, int]) -> float:
    """Mean grey-level difference of the PNG and the SVG rasterised by librsvg, both at `size`: small enough that
    the two font rasterisers agree, large enough that a missing or moved part shows (0: identical)."""
    out = svg.with_suffix(".rsvg.png")
    subprocess.run(["rsvg-convert", "-w", str(size[0]), "-h", str(size[1]), "-b", "white", "-o", str(out), str(svg)],
                   check=True, timeout=60)
    a = np.asarray(Image.open(png).convert("L").resize(size, Image.Resampling.BOX), dtype=np.float32)
    b = np.asarray(Image.open(out).convert("L"), dtype=np.float32)
    return float(np.abs(a - b).mean())


def pdf_page(path: Path) -> tuple[float, float, str]:
    doc = QPdfDocument()
    assert doc.load(str(path)) == QPdfDocument.Error.None_ and doc.pageCount() == 1
    size = doc.pagePointSize(0)
    text = doc.getAllText(0).text()
    doc.close()
    return size.width(), size.height(), "".join(text.split())


def check_files(target: ExportTarget, preset: Preset, paths: dict[str, Path], marks: list[Mark]) -> list[str]:
    """The three files of one view at one preset: sizes, resolution, colours, the same picture and text."""
    where = f"{target.name} at {preset.name}"
    failures = []
    inches = preset.width_in or natural_size(target.widget).width() / target.widget.logicalDpiX()
    width_in, height_in = svg_inches(paths["svg"].read_bytes())
    if abs(width_in - inches) > 0.02:
        failures.append(f"{where}: the SVG is {width_in:.2f} in wide, not {inches:.2f}")
    png = QImage(str(paths["png"]))
    dpi = png_dpi(png)
    if abs(dpi[0] - preset.dpi) > 0.5 or abs(dpi[1] - preset.dpi) > 0.5:
        failures.append(f"{where}: the PNG records {dpi[0]:.1f} x {dpi[1]:.1f} dpi, not {preset.dpi}")
    if abs(png.width() - inches * preset.dpi) > 1.5 or abs(png.height() / png.width() - height_in / width_in) > 0.01:
        failures.append(f"{where}: the PNG is {png.width()} x {png.height()} px, not {inches:.2f} in at {preset.dpi} "
                        f"dpi in the SVG's shape")
    if text_lightness(marks) > 0.5:
        failures.append(f"{where}: light text (a dark figure) from a dark window: figures are light")
    page_w, page_h, text = pdf_page(paths["pdf"])
    if abs(page_w - inches * 72) > 1.5 or abs(page_h - height_in * 72) > 1.5:
        failures.append(f"{where}: the PDF page is {page_w:.0f} x {page_h:.0f} pt, not {inches * 72:.0f} x "
                        f"{height_in * 72:.0f}")
    missing = [w for w in whole_words(marks, TICKS) if w not in text]
    if missing:
        failures.append(f"{where}: the PDF's text lacks {missing[:5]}")
    if preset.width_in == 3.5 and shutil.which("rsvg-convert"):
        small = (max(png.width() // 12, 1), max(png.height() // 12, 1))
        difference = same_picture(paths["png"], paths["svg"], small)
        if difference > 8:
            failures.append(f"{where}: the PNG is not the SVG's picture ({difference:.1f} grey levels apart)")
    return failures


def content_images(marks: list[Mark]) -> int:
    """The images shown whole, but for scroll bars: a figure of a view laid out to show all its columns has none."""
    return whole_images([m for m in marks if m.piece != "QScrollBar"])


def check_whole(target: ExportTarget, marks: dict[str, list[Mark]]) -> list[str]:
    """What the view shows whole on screen, or laid out at a full page's width, its paper column shows whole too;
    what the screen shows whole, the full page does."""
    failures = []
    for preset, references in (("column", ("screen", "page")), ("page", ("screen",))):
        words = Counter()
        for reference in references:
            words |= whole_words(marks[reference], TICKS)
        gone = lost(words, marks[preset])
        if gone:
            failures.append(f"{target.name} at {preset}: {len(gone)} words not shown whole, e.g. {gone[:8]} "
                            f"(cut: {cut(marks[preset], gone)[:4]})")
        images = max(content_images(marks[reference]) for reference in references)
        if content_images(marks[preset]) < images:
            failures.append(f"{target.name} at {preset}: {images - content_images(marks[preset])} of {images} images "
                            "cut or left out")
    return failures


def test_every_view_of_every_workspace_at_every_preset(qtbot, window, small_world, tmp_path):
    app = QApplication.instance()
    window.resize(1280, 800)
    open_all(qtbot, window, world_requests(small_world))
    apply_theme(app, "dark")
    failures: list[str] = []
    files = 0
    try:
        with figure_colours():  # once for all the exports (each one alone switches to the paper's colours itself)
            for name, workspace in window.workspaces.items():
                window.set_workspace(name)
                if name == "similarity":  # the trial sheet is filled when its panel is shown
                    workspace.area.raise_panel("sheet")
                    qtbot.waitUntil(lambda w=workspace: w.sheet.shown > 0 and not window.pool.active(),
                                    timeout=WAIT_MS)
                for _ in range(3):
                    app.processEvents()
                before = geometry(window)
                for k, target in enumerate(workspace.export_targets()):
                    marks = {}
                    for preset in PRESETS:
                        paths = {fmt: export_preset(target.widget, tmp_path / f"{name}{k}-{preset.key}.{fmt}", preset)
                                 for fmt in FORMATS}
                        files += len(paths)
                        marks[preset.key] = svg_marks(paths["svg"].read_bytes())
                        failures += check_files(target, preset, paths, marks[preset.key])
                    failures += check_whole(target, marks)
                if geometry(window) != before:
                    failures.append(f"exporting changed the {name} workspace's layout on screen")
    finally:
        apply_theme(app, "light")
    assert not failures, "\n".join(failures)
    assert files >= 3 * len(FORMATS) * 25  # every view of the three workspaces


def test_export_figure_from_the_menu_and_ctrl_e(qtbot, window):
    """File > Export Figure… and Ctrl+E open the dialog (they passed the action's `checked` flag in as the view);
    every menu action and figure-menu entry calls its slot without the flag."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QMenu

    from probescope.app.figures.export_dialog import ExportDialog
    from probescope.app.figures.figure_menu import figure_menu

    def dialogs() -> list[ExportDialog]:
        return [w for w in QApplication.topLevelWidgets() if isinstance(w, ExportDialog) and w.isVisible()]

    action = next(a for a in window.menus.actions if a.text() == "&Export Figure…")
    action.trigger()
    assert len(dialogs()) == 1
    dialogs()[0].close()
    window.activateWindow()
    qtbot.waitUntil(window.isActiveWindow, timeout=WAIT_MS)
    qtbot.keyClick(window, Qt.Key.Key_E, Qt.KeyboardModifier.ControlModifier)
    qtbot.waitUntil(lambda: len(dialogs()) == 1, timeout=WAIT_MS)
    dialogs()[0].close()

    seen = []  # an action added like the menus' gets no argument, whatever its slot takes
    window.menus.add(QMenu(window), "probe", lambda view=None: seen.append(view)).trigger()
    target = window.current_workspace().export_targets()[-1]
    requests = []
    for entry in figure_menu(target, lambda *args: requests.append(args), window).actions():
        entry.trigger()
    assert seen == [None]
    assert [(t.name, p.key if p else None, copy) for t, p, copy in requests] == [
        (target.name, None, False), (target.name, "column", False), (target.name, "page", False),
        (target.name, None, True)]
    for dialog in dialogs():
        dialog.close()


def test_figures_are_light_in_a_dark_window_unless_they_follow_the_theme(qtbot, tmp_path):
    """The default is paper (white, dark text) whatever the window's theme; the setting follows it; the window's
    palette is back afterwards."""
    from probescope.widgets.dissection.card import CardLine, UnitCard
    from probescope.widgets.ink import ink
    from probescope.widgets.plot_frame import titled_plot
    from probescope.widgets.similarity.trial_grid import ModelView, TrialGrid

    app = QApplication.instance()
    apply_theme(app, "dark")
    try:
        dark, paper = app.palette(), paper_palette()
        card, plot = UnitCard(), titled_plot("IoU by length", "IoU", "length")
        card.set_card("Unit 7 · layer4", "demo", [], [CardLine("NetDissect", "lake-s", 1, 0.04, 0.7)])
        plot.plot([1, 2, 3], [0.1, 0.3, 0.2])
        trial = TrialGrid(64)  # its red lines, drawn in the paper's shade (they were the dark theme's, 2.7:1)
        tile = QImage(32, 32, QImage.Format.Format_RGB32)
        tile.fill(0x336699)
        trial.set_trial((tile, "q"), [(tile, f"r{k}") for k in range(8)], [0, 1])
        trial.set_model_view(ModelView("m", tuple(range(1, 9)), (0.5,) * 8, ((0, 2),), 12, 13))
        for view in (card, plot, trial):
            qtbot.addWidget(view)
            view.resize(400, 300)
            view.show()
        for view, name in ((card, "card"), (plot, "plot"), (trial, "trial")):
            for follow in (False, True):
                svg = export_preset(view, tmp_path / f"{name}{follow}.svg", PRESETS[0], follow_theme=follow)
                png = export_preset(view, tmp_path / f"{name}{follow}.png", PRESETS[0], follow_theme=follow)
                corner = QImage(str(png)).pixelColor(2, 2).lightnessF()
                marks = svg_marks(svg.read_bytes())
                lightness = text_lightness(marks)
                assert (corner > 0.9 and lightness < 0.3) if not follow else (corner < 0.3 and lightness > 0.7), (
                    name, follow, corner, lightness)
                fills = {m.fill for m in marks if m.text.startswith("model rank")}
                shade, other = (ink("warning", p) for p in ((dark, paper) if follow else (paper, dark)))
                assert name != "trial" or (shade in fills and other not in fills), fills
                assert app.palette() == dark
    finally:
        apply_theme(app, "light")


def test_a_plot_under_another_tab_recolours_when_shown_and_exports_in_paper_colours(qtbot, tmp_path):
    """Plots out of sight (another workspace, a panel under another's tab) follow a palette change when they are
    shown, not at once: every export swaps the application's palette twice, and each swap redrew every plot of
    every workspace. Exported while hidden, such a plot is still drawn in the figure's colours."""
    from PySide6.QtWidgets import QTabWidget

    from probescope.widgets.plot_frame import titled_plot

    app = QApplication.instance()

    def settle() -> None:
        for _ in range(3):
            app.processEvents()

    def base() -> object:
        return app.palette().color(app.palette().ColorRole.Base)

    apply_theme(app, "dark")
    try:
        tabs = QTabWidget()
        front, behind = titled_plot("front", "y", "x"), titled_plot("IoU by length", "IoU", "length")
        behind.plot([1, 2, 3], [0.1, 0.3, 0.2])
        tabs.addTab(behind, "behind")
        tabs.addTab(front, "front")
        qtbot.addWidget(tabs)
        tabs.resize(500, 400)
        tabs.show()
        qtbot.waitExposed(tabs)
        tabs.setCurrentWidget(front)  # the dark plot goes under the other tab
        settle()
        dark = behind.backgroundBrush().color()
        assert dark == base()
        png = export_preset(behind, tmp_path / "behind.png", PRESETS[0])
        assert QImage(str(png)).pixelColor(2, 2).lightnessF() > 0.9  # paper, not the dark theme
        apply_theme(app, "light")
        settle()
        assert front.backgroundBrush().color() == base()
        tabs.setCurrentWidget(behind)
        settle()
        assert behind.backgroundBrush().color() == base() != dark
        assert behind.getAxis("left").textPen().color() == app.palette().color(app.palette().ColorRole.Text)
    finally:
        apply_theme(app, "light")


def test_a_tree_that_scrolls_sideways_shows_every_column_in_a_figure(qtbot, tmp_path):
    """A figure cannot scroll: a beam trace narrower than its columns on screen is exported with every column whole
    (at the 3.5 in preset it showed its formulas, a scroll bar and no IoU or DA), and stays as it was on screen."""
    from probescope.widgets.dissection.trace import TraceEntry, TraceStep, TraceTree

    tree = TraceTree()
    qtbot.addWidget(tree)
    formula = "((house AND street-s) AND NOT roof) OR window"
    tree.set_steps([TraceStep("length ≤ 4", (TraceEntry(formula, 0.1234, 0.567, ("iou",)),))])
    tree.resize(240, 160)
    tree.show()
    qtbot.waitExposed(tree)
    assert tree.horizontalScrollBar().isVisible()  # on screen it scrolls sideways
    column = next(p for p in PRESETS if p.key == "column")
    path = export_preset(tree, tmp_path / "trace.svg", column)
    words = whole_words(svg_marks(path.read_bytes()), TICKS)
    assert {"1234", "567", "iou", "window"} <= set(words)  # (the numbers: 0.1234 and 0.567)
    assert tree.size().width() == 240
    qtbot.waitUntil(tree.horizontalScrollBar().isVisible)  # (as it was, once the tree has laid itself out again)
