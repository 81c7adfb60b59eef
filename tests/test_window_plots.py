"""Plots a reader can read (issue 45 §4): every plot of every workspace, at the window's default size (1440x900 on
a 1600x1000 screen) and at 1280x800, has tick labels that do not run into each other, whole-number ticks on axes
that count or number things, legends that cover no data point, curve or bar, no data point on its frame, nothing
cut off by its edge and a data area that is not squashed flat (tests/plot_checks.py); then one test per way a
plot's layout went wrong on the way there.

The window holds the small world; the views whose defects showed at the demo world's scale (its 128 units ablated
one by one, FID and IS fits over a thousand samples, unit 18's length sweep) are handed data of that scale, through
the calls the workspaces make."""

from __future__ import annotations

import numpy as np
import pytest
from plot_checks import plot_problems, tick_labels
from PySide6.QtWidgets import QApplication, QWidget
from windows import open_all, settle, world_requests

pytestmark = pytest.mark.usefixtures("isolated_cache")

SIZES = ((1440, 900), (1280, 800))
# axes that count or number things, by their label: their ticks are whole numbers
INTEGER_AXES = {"fit", "max explanation length", "length", "unit (by concept)", "dimensions", "units", "sessions",
                "trials"}


def _layer_ablation(units: int, classes: list[str]):
    """Every unit of a 128-unit layer ablated alone (the demo world's layer4), in a shuffled concept order."""
    from probescope.core.ablation.groups import each_unit
    from probescope.core.ablation.results import AblationResult

    rng = np.random.default_rng(3)
    images = np.full(len(classes), 100)
    correct = np.full(len(classes), 95)
    after = correct - rng.integers(0, 4, (units, len(classes)))
    return AblationResult("layer4", "zero", "tail", "", classes, list(range(len(classes))), images, correct,
                          np.full(len(classes), 0.9), each_unit(rng.permutation(units)), after,
                          np.full((units, len(classes)), 0.85))


def _fit(plot, intercept: float, slope: float, noise: float) -> None:
    """A score on random subsets of 500 to 1,000 samples, its 1/N fit and the live path (the demo gallery's)."""
    rng = np.random.default_rng(5)
    sizes = np.repeat([500, 600, 700, 800, 900, 1000], 3)
    live_n = np.arange(10, 1001, 10)
    walk = np.cumsum(rng.normal(0, noise / 4, len(live_n)))
    plot.set_fit(sizes, intercept + slope / sizes + rng.normal(0, noise, len(sizes)), intercept, slope,
                 live_n, intercept + slope / live_n + walk - walk[-1])


def _demo_scale(window) -> dict:
    """What to show in a panel once it is in front, in the workspaces' own calls (raising the Role panel ablates
    the selected unit, whose bars replace the layer's matrix; the gallery's fits are its own until then)."""
    from probescope.core.demo import world

    role = window.workspaces["dissection"].role
    real = window.workspaces["gallery"].real_panel
    sweep = window.workspaces["dissection"].charts.sweep
    lengths = list(range(1, 11))
    return {("dissection", "charts"): lambda: sweep.set_series({"best IoU": (lengths, [0.04] + [0.237] * 9),
                                                                 "its DA": (lengths, [0.664] * 10)}),  # unit 18's
            ("dissection", "role"): lambda: role._show_layer_matrix(_layer_ablation(128, list(world.SCENES)),
                                                                     "layer4"),
            ("gallery", "real"): lambda: (_fit(real.fid_plot, 1.327, 485.0, 0.15),
                                          _fit(real.is_plot, 12.22, 17.6, 0.04))}


def test_every_plot_of_every_workspace_is_readable_at_both_sizes(qtbot, window, small_world):
    from probescope.widgets.plot_frame import FigurePlot

    open_all(qtbot, window, world_requests(small_world))
    assert window.workspaces["dissection"].charts.sweep.series  # the unit's own views hold their data
    assert window.workspaces["similarity"].embedding.convergence_plot.series  # (one fit)
    demo_scale = _demo_scale(window)
    problems, checked = [], set()
    for size in SIZES:
        window.resize(*size)
        for name, ws in window.workspaces.items():
            window.set_workspace(name)
            for key, dock in ws.area.panels.items():
                ws.area.raise_panel(key)
                settle(window)
                if (name, key) in demo_scale:
                    demo_scale[name, key]()
                    settle(window)
                for plot in dock.findChildren(FigurePlot) if ws.area.on_screen(key) else ():
                    if not plot.isVisible():
                        continue
                    checked.add(plot.plotItem.titleLabel.text or plot.getAxis("left").labelText)
                    integer = [a for a in ("left", "bottom") if plot.getAxis(a).labelText in INTEGER_AXES]
                    problems += [f"{size[0]}x{size[1]} {name}/{key} {plot.plotItem.titleLabel.text!r}: {p}"
                                 for p in plot_problems(plot, integer)]
    assert len(checked) >= 10, checked
    assert not problems, "\n".join(sorted(set(problems)))


@pytest.fixture
def shown(qtbot):
    """shown(widget, w, h): `widget` shown at w x h and laid out."""

    def show(widget, width: int, height: int):
        qtbot.addWidget(widget)
        widget.resize(width, height)
        widget.show()
        qtbot.waitExposed(widget)
        for _ in range(3):
            QApplication.processEvents()
        return widget

    return show


def test_a_line_plot_keeps_its_legend_off_the_data_whatever_the_data(qtbot, shown):
    """The length sweep's legend sat on its DA line at 1280x800 (picked from the data's span, not its pixels), and
    one fit drew x ticks 0.6 ... 1.4 with a point on the frame: the legend has a row of its own under the axis and
    the plot asks for the height that row takes; x ticks are whole numbers."""
    from probescope.widgets.plots_line import LinePlot

    plot = shown(LinePlot("Convergence across fits", "value", "fit"), 232, 150)
    x = list(range(1, 11))
    for series in ({"best IoU": (x, [0.04] + [0.237] * 9), "its DA": (x, [0.664] * 10)},  # the demo's unit 18
                   {"best IoU": (x, [0.1 * k for k in x]), "its DA": (x, [0.1 * k for k in x])},  # a rising line
                   {"within-ensemble r": ([1], [0.903]), "coarse-grained loss": ([1], [2.939]),
                    "consecutive-fit r": ([1], [None])}):  # one fit
        plot.set_series(series)
        qtbot.waitUntil(lambda: plot.height() >= plot.plot.room())
        assert not plot_problems(plot.plot, ("bottom",)), series
        legend, view = plot.legend.sceneBoundingRect(), plot.plot.getViewBox().sceneBoundingRect()
        assert legend.top() >= view.bottom() and legend.bottom() <= plot.plot.height()
        assert plot.legend.brush().color() == plot.plot.backgroundBrush().color()  # opaque, in the theme's colour


def test_named_ticks_show_as_many_names_as_fit_and_wrap_a_long_one(qtbot, shown):
    """The layer ablation labelled 1 unit in 16 whatever the width ("59103"); the catch trials' "picked 1st" ran
    into "picked 2nd"; counts got ticks at 0.2."""
    from probescope.widgets.similarity.plots import BarChart

    chart = shown(BarChart("Catch trials: the mirrored query was…", "trials"), 246, 254)
    chart.set_bars(["picked 1st", "picked 2nd", "missed"], [2, 1, 0], ["#27ae60", "#f39c12", "#c0392b"])
    assert not plot_problems(chart.plot, ("left",))
    assert [t for _r, t in tick_labels(chart.plot.getAxis("bottom"))] == ["picked\n1st", "picked\n2nd", "missed"]
    axis = chart.plot.getAxis("bottom")
    axis.set_labels([(k + 0.5, str(u)) for k, u in enumerate(np.random.default_rng(0).permutation(128))])
    chart.plot.setXRange(0, 128, padding=0)
    shown_labels = tick_labels(axis)
    assert 4 <= len(shown_labels) < 40 and not plot_problems(chart.plot, ("left",))


def test_a_colour_bar_beside_the_data_keeps_its_ticks_inside_the_plot(qtbot, shown):
    """The layer ablation's matrix at 1280x800 (360 px wide): its title, as wide as the plot, pushed the colour
    bar's ticks ("0.015", "-0.005") past the plot's right edge once the bar was shown beside the data."""
    import pyqtgraph as pg

    from probescope.core.demo import world
    from probescope.widgets.plot_frame import titled_plot

    plot = shown(titled_plot("Δ accuracy without each unit", "class", "unit (by concept)"), 360, 302)
    image = pg.ImageItem()
    plot.addItem(image)
    bar = pg.ColorBarItem(values=(-1, 1), interactive=False, width=16)
    bar.setImageItem(image, insert_in=plot.getPlotItem())
    delta = np.random.default_rng(0).normal(0, 0.005, (128, len(world.SCENES)))
    image.setImage(delta, autoLevels=False)
    bar.setLevels((-0.019, 0.019))
    plot.getAxis("bottom").set_labels([(k + 0.5, str(u)) for k, u in
                                       enumerate(np.random.default_rng(1).permutation(128))])
    plot.getAxis("left").set_labels([(k + 0.5, name) for k, name in enumerate(world.SCENES)])
    plot.getPlotItem().setRange(xRange=(0, 128), yRange=(0, len(world.SCENES)), padding=0)
    qtbot.waitUntil(lambda: not plot_problems(plot, ("bottom",)), timeout=2000)


def test_the_live_score_curve_ends_inside_its_frame(qtbot, shown):
    """The Score panel's IS against N (painted, not pyqtgraph): the dot at the last N sat on the right-hand frame."""
    from probescope.widgets.plots_curve import CurvePlot

    plot = shown(CurvePlot("N (images scored)", "IS", "live IS (one marginal over the first N)"), 400, 160)
    n = np.arange(10, 1001, 10)
    plot.set_curve(n, 12.25 - 10.0 / np.sqrt(n))
    plot.set_band(11.41, 0.28, "split protocol 11.41 ± 0.28")
    frame, last = plot.plot_area(), plot.to_pixels(float(n[-1]), 12.25 - 10.0 / np.sqrt(1000))
    assert frame.adjusted(4, 4, -4, -4).contains(last), (frame, last)


def test_a_plot_narrowed_until_its_legend_wraps_shows_all_of_it(qtbot, shown):
    """The convergence plot beside the held-out loss at 1440x900: narrowed, its legend took a third row, the plot
    grew taller within that resize, and its viewport kept the shorter height (the legend's last row cut off)."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QSplitter, QVBoxLayout

    from probescope.widgets.plots_line import LinePlot
    from probescope.widgets.similarity.plots import BarChart

    outer = QWidget()
    split = QSplitter(Qt.Orientation.Horizontal)
    QVBoxLayout(outer).addWidget(split)
    loss, convergence = BarChart("Held-out loss by dimensions", "nats per trial", "dimensions"), \
        LinePlot("Convergence across fits", "value", "fit")
    for plot in (loss, convergence):
        plot.setMinimumHeight(150)
        split.addWidget(plot)
    loss.set_bars(["4"], [2.94], ["#27ae60"])
    convergence.set_series({"within-ensemble r": ([1, 2], [0.903, 0.95]), "coarse-grained loss": ([1, 2], [2.94, 2.9]),
                            "consecutive-fit r": ([2], [0.97])})
    shown(outer, 1100, 180)
    outer.resize(500, 180)
    qtbot.waitUntil(lambda: convergence.plot.height() >= convergence.plot.room())
    for plot in (loss, convergence):
        assert not plot_problems(plot.plot, ("bottom",) if plot is convergence else ())
    assert convergence.plot.viewport().height() == convergence.plot.height()
