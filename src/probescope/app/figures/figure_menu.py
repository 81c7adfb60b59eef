"""Every exportable view answers a right click with its figure menu: export (the dialog), copy, and the paper presets
(a column, a full page width), so a plot or the unit card goes into a paper without a trip through the File menu."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QPoint, Qt
from PySide6.QtWidgets import QMenu, QWidget

from probescope.app.figures.export import PAPER_PRESETS, ExportTarget, Preset
from probescope.widgets.plot_frame import plots_in

Request = Callable[[ExportTarget, Preset | None, bool], None]  # (view, preset or None for the dialog, copy)


def figure_menu(target: ExportTarget, request: Request, parent: QWidget) -> QMenu:
    menu = QMenu(parent)
    menu.addAction(f"Export {target.name}…").triggered.connect(lambda _checked=False: request(target, None, False))
    for preset in PAPER_PRESETS:
        menu.addAction(f"Export for a {preset.name.lower()}…").triggered.connect(
            lambda _checked=False, p=preset: request(target, p, False))
    menu.addAction("Copy to Clipboard").triggered.connect(lambda _checked=False: request(target, None, True))
    plots = plots_in(target.widget)
    if plots:
        menu.addSeparator()
        menu.addAction("Reset View").triggered.connect(lambda _checked=False: [plot.reset_view() for plot in plots])
    return menu


def install_figure_menu(widget: QWidget, target: Callable[[], ExportTarget], request: Request) -> None:
    """Right-clicking `widget` opens the figure menu of `target()`, the view as it is then (the unit it shows)."""
    widget.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)

    def show(position: QPoint) -> None:
        figure_menu(target(), request, widget).exec(widget.mapToGlobal(position))

    widget.customContextMenuRequested.connect(show)
