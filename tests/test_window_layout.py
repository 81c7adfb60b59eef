"""Nothing on top of anything, nothing squeezed below the size it needs: every panel of every workspace at the
default window size (1440x900 on a 1600x1000 screen) and at 1280x800, with the Tasks panel open too, and after a
layout saved at another window size is restored. The geometry is read off the real widgets: two widgets of one
layout may not overlap (the "optimal" bar lay on the "Detection Accuracy" heading), and no widget may be smaller
than its minimum size hint (the Settings fields squashed to slivers, the trial grid's right column cut)."""

from __future__ import annotations

import pytest
from PySide6.QtWidgets import QLayout, QMainWindow, QScrollArea, QSizePolicy, QWidget
from windows import WAIT_MS, make_window, on_screen, open_all, settle, widget_path, world_requests

pytestmark = pytest.mark.usefixtures("isolated_cache")

SIZES = ((1440, 900), (1280, 800))


def _laid_out(layout: QLayout) -> list[QWidget]:
    out = []
    for k in range(layout.count()):
        item = layout.itemAt(k)
        if item.widget() is not None:
            out.append(item.widget())
        elif item.layout() is not None:
            out += _laid_out(item.layout())
    return out


def overlapping(window) -> list[str]:
    """Pairs of widgets of one layout that cover each other (docks are the main windows' business)."""
    found = []
    for parent in [window, *window.findChildren(QWidget)]:
        if parent.layout() is None or isinstance(parent, QMainWindow) or not on_screen(parent):
            continue
        shown = [w for w in _laid_out(parent.layout()) if on_screen(w)]
        for k, a in enumerate(shown):
            for b in shown[k + 1:]:
                common = a.geometry().intersected(b.geometry())
                if common.width() > 1 and common.height() > 1:
                    found.append(f"{widget_path(a)} on {type(b).__name__} {b.geometry().getRect()}")
    return found


def squeezed(window) -> list[str]:
    """Widgets a layout made smaller than they need (their minimum size, else their minimum size hint)."""
    found = []
    for widget in window.findChildren(QWidget):
        parent = widget.parentWidget()
        if parent is None or parent.layout() is None or isinstance(parent, QMainWindow) or not on_screen(widget) \
                or widget not in _laid_out(parent.layout()):
            continue
        policy, hint = widget.sizePolicy(), widget.minimumSizeHint()
        need_w = widget.minimumWidth() or (0 if policy.horizontalPolicy() == QSizePolicy.Policy.Ignored
                                           else hint.width())
        need_h = widget.minimumHeight() or (0 if policy.verticalPolicy() == QSizePolicy.Policy.Ignored
                                            else hint.height())
        if widget.width() + 1 < need_w or widget.height() + 1 < need_h:
            found.append(f"{widget_path(widget)}: {widget.width()}x{widget.height()} < {need_w}x{need_h}")
    return found


MIN_DATA_AREA = 48  # pixels each way a plot's data area keeps inside its title, ticks and labels


def plots_squashed(window) -> list[str]:
    """Plots whose data area their title, tick labels and axis labels leave next to nothing of (the held-out loss
    and convergence plots' ticks ran into their labels), or whose parts run past their right edge (the layer
    ablation's colour bar lost its ticks)."""
    from probescope.widgets.plot_frame import FigurePlot

    found = []
    for plot in window.findChildren(FigurePlot):
        if not on_screen(plot):
            continue
        vb = plot.getViewBox()
        if min(vb.width(), vb.height()) < MIN_DATA_AREA:
            found.append(f"{widget_path(plot)}: data area {vb.width():.0f}x{vb.height():.0f}")
        grid = plot.getPlotItem().layout  # title, axes, legend, colour bar: inside the plot, not past its edge
        for row in range(grid.rowCount()):
            for column in range(grid.columnCount()):
                item = grid.itemAt(row, column)
                if item is not None and item.isVisible() and item.sceneBoundingRect().right() > plot.width() + 1:
                    found.append(f"{widget_path(plot)}: {type(item).__name__} ends at "
                                 f"{item.sceneBoundingRect().right():.0f} > {plot.width()}")
    return found


FIXED_FIGURES = ("TrialSheet",)  # laid out at the size it is exported at: it scrolls in a narrow panel


def cut_sideways(window) -> list[str]:
    """Scrolling panels whose content is wider than they are (the trial grid lost its right-hand column)."""
    return [f"{widget_path(area.widget())}: {area.widget().minimumSizeHint().width()} > {area.viewport().width()}"
            for area in window.findChildren(QScrollArea)
            if on_screen(area) and area.widget() is not None and area.horizontalScrollBar().maximum() > 0
            and type(area.widget()).__name__ not in FIXED_FIGURES]


def check_every_panel(window, when: str) -> None:
    for name, ws in window.workspaces.items():
        window.set_workspace(name)
        for key in ws.area.panels:
            ws.area.raise_panel(key)
            settle(window)
            assert not overlapping(window), (when, name, key, overlapping(window))
            assert not squeezed(window), (when, name, key, squeezed(window))
            assert not cut_sideways(window), (when, name, key, cut_sideways(window))
            assert not plots_squashed(window), (when, name, key, plots_squashed(window))


@pytest.fixture
def loaded(qtbot, window, small_world):
    """The small world with every view drawn: the optimal search on (five bars a chart), the layer ablated."""
    from dataclasses import replace

    open_all(qtbot, window, world_requests(small_world))
    ws = window.workspaces["dissection"]
    ws.run_settings(replace(ws.settings, searches=(*ws.settings.searches, "optimal")))
    qtbot.waitUntil(lambda: not window.pool.active() and "optimal" in ws.data.result.settings["searches"],
                    timeout=WAIT_MS)
    ws.area.raise_panel("role")
    ws.role.layer_button.click()
    qtbot.waitUntil(lambda: ws.role.matrix.isVisible() and not window.pool.active(), timeout=WAIT_MS)
    return window


def check_tab_titles(window, where: str) -> None:
    """Stacked panels' tab titles are whole (the bar scrolls instead: at 1280x800 the Dissection's read "Se...")."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QTabBar

    cut = []
    for ws in window.workspaces.values():
        for bar in ws.area.findChildren(QTabBar, options=Qt.FindChildOption.FindDirectChildrenOnly):
            for k in range(bar.count()):
                if bar.tabRect(k).width() < bar.fontMetrics().horizontalAdvance(bar.tabText(k)):
                    cut.append(f"{ws.name}: {bar.tabText(k)!r}")
    assert not cut, f"{where}: {cut}"


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_no_panel_is_crushed_or_covered_at_the_usual_sizes(qtbot, loaded, size):
    loaded.resize(*size)
    settle()
    for ws in loaded.workspaces.values():
        ws.area.reset()
    check_every_panel(loaded, f"{size}")
    check_tab_titles(loaded, f"{size}")
    loaded.tasks_dock.show()  # it took the Settings fields' height, and they stayed squashed after it closed
    check_every_panel(loaded, f"{size}, Tasks open")
    loaded.tasks_dock.hide()
    check_every_panel(loaded, f"{size}, Tasks closed again")


def test_a_layout_saved_at_another_size_still_fits_the_window(qtbot, settings_path, small_world):
    """A layout saved in a large window, restored in a small one, kept its panels' pixel widths: the beam trace's
    formula column came back 10 px wide (View > Reset Layout fixed it)."""
    from PySide6.QtCore import Qt

    first = make_window(qtbot, settings_path)
    first.resize(2400, 1400)
    open_all(qtbot, first, world_requests(small_world))
    for ws in first.workspaces.values():  # the user widened the left-hand and right-hand panels
        first.set_workspace(ws.name)
        area = ws.area
        qtbot.waitUntil(lambda area=area: area.default_state is not None, timeout=WAIT_MS)
        wide = [dock for dock in area.panels.values() if on_screen(dock)]
        area.resizeDocks(wide, [900] * len(wide), Qt.Orientation.Horizontal)
    settle(first)
    first.close()
    again = make_window(qtbot, settings_path)
    try:
        again.resize(1280, 800)
        open_all(qtbot, again, world_requests(small_world))
        settle(again)
        again.set_workspace("dissection")
        ws = again.workspaces["dissection"]
        ws.area.raise_panel("trace")
        settle(again)
        trace = ws.trace
        assert trace.columnWidth(0) >= max(120, 0.4 * trace.viewport().width())  # the formulas have room
        assert ws.view.width() >= 0.25 * again.width()  # the unit's images keep their room
        check_every_panel(again, "restored from 2400x1400 at 1280x800")
    finally:
        again.close()


def test_the_explanation_lengths_legend_is_off_the_bars_and_each_method_has_its_own_colour(qtbot):
    """The legend sat on the bars, and 'optimal' had the orange of 'compositional' (three colours for four
    series): each method has an Okabe-Ito colour of its own, the same in the unit's bars."""
    import pyqtgraph as pg
    from PySide6.QtGui import QColor

    from probescope.jobs.dissection import rows as r
    from probescope.widgets.dissection.plots import GroupedBars

    okabe_ito = {"#e69f00", "#56b4e9", "#009e73", "#f0e442", "#0072b2", "#d55e00", "#cc79a7", "#000000"}
    colours = [r.METHOD_COLORS[m] for m in r.METHODS]
    assert len(set(colours)) == len(colours) and set(colours) <= okabe_ito
    chart = GroupedBars("Explanation lengths per method", "units", "length",
                        {r.METHOD_NAMES[m]: r.METHOD_COLORS[m] for m in r.METHODS})
    qtbot.addWidget(chart)
    chart.resize(360, 260)
    chart.show()
    chart.set_series({r.METHOD_NAMES[m]: ([1, 2, 3], [90, 40, 10]) for m in r.METHODS[1:]})
    settle()
    legend, view = chart.legend.sceneBoundingRect(), chart.plot.getViewBox().sceneBoundingRect()
    assert not legend.intersects(view) and legend.bottom() <= chart.plot.height() + 1
    drawn = {QColor(bars.opts["brush"].color()).name() for bars in chart.plot.items()
             if isinstance(bars, pg.BarGraphItem)}
    assert drawn == {r.METHOD_COLORS[m] for m in r.METHODS[1:]}


def test_a_scrolled_panel_is_fitted_once_per_turn_and_when_shown(qtbot):
    """Its labels' changes in one turn of the event loop give one fit, a panel out of sight none: it is fitted when
    it is shown, to what it holds then (live numbers asked for 80 fits a second of a 50,000-sample gallery)."""
    from PySide6.QtWidgets import QLabel, QVBoxLayout

    from probescope.app.window.panel_area import FittingScroll

    panel = QWidget()
    label = QLabel("one line")
    label.setWordWrap(True)
    QVBoxLayout(panel).addWidget(label)
    scroll = FittingScroll(panel)
    qtbot.addWidget(scroll)
    scroll.resize(200, 60)
    scroll.show()
    qtbot.waitExposed(scroll)
    fits = []
    original = scroll.fit
    scroll.fit = lambda: (fits.append(1), original())
    for k in range(10):
        label.setText(f"change {k}")
    qtbot.wait(20)
    assert len(fits) == 1
    scroll.hide()
    label.setText(" ".join(["many words that wrap onto several lines"] * 6))
    qtbot.wait(20)
    assert len(fits) == 1  # out of sight: not fitted
    scroll.show()
    qtbot.waitUntil(lambda: len(fits) >= 2)
    assert panel.height() >= panel.layout().minimumHeightForWidth(panel.width())  # the long text's height
    assert scroll.verticalScrollBar().maximum() > 0  # more than the viewport shows: it scrolls
