"""The Dissection workspace's selected unit: its images and overlays (the explanation chosen, or a formula clicked
in the beam trace), title, numbers, trace, role and card, and the table's right-click menu (ablate the selection).
It writes the unit and what its overlays show into the view state (`view_state.DissectionState`); the views follow.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu, QWidget

from probescope.app.dissection.card import fill_card
from probescope.app.dissection.drawing import DrawingPanel
from probescope.app.dissection.role import RolePanel
from probescope.app.dissection.unit_images import UnitImages
from probescope.app.dissection.unit_view import UnitCharts, UnitView, show_trace
from probescope.app.dissection.view_state import DissectionState
from probescope.app.figures.export import ExportTarget
from probescope.app.figures.figure_menu import figure_menu
from probescope.app.window.panel_area import PanelArea
from probescope.core.dissection.results import Explanation
from probescope.jobs.dissection import rows as r
from probescope.widgets.dissection.card import UnitCard
from probescope.widgets.dissection.table import UnitTable
from probescope.widgets.dissection.trace import TraceTree


def table_neighbours(units: UnitTable, unit: int) -> list[int]:
    """The units next to `unit` in the table as it is sorted and filtered (below first)."""
    shown = units.visible_units()
    if unit not in shown:
        return []
    at = shown.index(unit)
    return [shown[k] for k in (at + 1, at - 1) if 0 <= k < len(shown)]


class UnitPresenter(QObject):
    """The per-unit views: it reads and writes the selected unit in `state` and draws the unit's images
    (`unit_images`, in `view` with its display controls), numbers (`charts`), `trace`, `card`, `role` and `drawing`;
    `units` is the table (its selection and menu), `area` the panels (the Role panel raised or on screen), `parent`
    the workspace (the menus' parent, and the window with its figure exports). `settled()` asks the workspace
    whether its initial work is done."""

    def __init__(self, state: DissectionState, *, view: UnitView, charts: UnitCharts, trace: TraceTree,
                 card: UnitCard, role: RolePanel, drawing: DrawingPanel, unit_images: UnitImages, units: UnitTable,
                 area: PanelArea, settled: Callable[[], None], parent: QWidget):
        super().__init__(parent)
        self.state, self.view, self.charts, self.trace, self.card = state, view, charts, trace, card
        self.role, self.drawing, self.unit_images, self.units, self.area = role, drawing, unit_images, units, area
        self._settled = settled
        self._card_due = False  # the card is to be filled (update_card)

    def explanation(self, method: str | None = None) -> Explanation | None:
        """The selected unit's explanation by `method` (default: the one the overlay box names)."""
        return self.state.explanation(method or self.view.controls.method())

    def show_unit(self, unit: int, force: bool = False) -> None:
        state, controls = self.state, self.view.controls
        d = state.data
        if d is None or unit not in d.result.units or (unit == state.unit and not force):
            return
        state.unit = unit  # (the Layer panel follows: it is bound to the state's unit)
        controls.forget_trace_formula()
        state.choose(controls.method())
        self.show_overlays()  # first: from the cache it is on screen before the charts below are drawn
        u = d.result.units[unit]
        self.view.show_title(u, r.tie_note(d.result, u, d.store.n_pixels))
        self.charts.show_numbers(d, unit)
        self.show_role()
        show_trace(self.trace, d, u)
        self.drawing.set_unit(d, state.live_model(d), unit, controls.method())

    def show_role(self) -> None:
        if self.role.model is not None and self.state.unit >= 0:
            self.role.show_units([self.state.unit], self.area.on_screen("role"))

    def table_menu(self, position) -> None:
        """Right click on the table: ablate the selected units together, or the table as a figure."""
        host = self.parent()
        units = self.units.selected_units()
        window = host.window()
        if hasattr(window, "figures"):
            menu = figure_menu(ExportTarget("Unit table", self.units), window.figures.figure_request, host)
        else:
            menu = QMenu(host)
        first = menu.actions()[0] if menu.actions() else None
        ablate = QAction(f"Ablate {'unit ' + str(units[0]) if len(units) == 1 else f'the {len(units)} selected units'}"
                         " (Role panel)", menu)
        ablate.setEnabled(bool(units))
        ablate.triggered.connect(lambda: self.ablate_selection(units))
        menu.insertAction(first, ablate)
        menu.insertSeparator(first)
        menu.exec(self.units.viewport().mapToGlobal(position))

    def ablate_selection(self, units: list[int]) -> None:
        self.area.raise_panel("role")
        if self.role.model is None:
            self.role.title.setText("<b>Role</b>: ablation needs the loaded model's own dissection (not a saved "
                                    "result of another model)")
            return
        self.role.show_units(units, True)

    def trace_clicked(self, step: int, position: int) -> None:
        state = self.state
        e = state.data.result.units[state.unit].trace[step][position]
        state.formula, state.formula_label = e.formula, e.label
        self.view.controls.show_trace_formula(e.label, step, position)  # the overlay box names it
        self.show_overlays()

    def controls_changed(self) -> None:
        controls = self.view.controls
        if controls.method() != "trace":  # (display settings changed with a trace formula shown: it stays)
            controls.forget_trace_formula()
            self.state.choose(controls.method())
        self.show_overlays()

    def show_overlays(self) -> None:
        state = self.state
        if state.data is not None:
            self.unit_images.show(state.data, state.unit, state.formula, state.formula_label)

    def overlays_shown(self) -> None:
        self.view.set_caption(self.unit_images.caption)
        self.charts.draw_histogram()  # computed with the overlays
        self.update_card()
        self._settled()

    def update_card(self) -> None:
        """Fill the card once the GUI thread is done with what it is doing: a unit switch asks for it several
        times (the overlays shown, the drawing panel blanked, its cached drawing), and laying the card out costs."""
        if not self._card_due:
            self._card_due = True
            QTimer.singleShot(0, self.refresh_card)

    def refresh_card(self) -> None:
        """The card of the unit on screen, now."""
        self._card_due = False
        state, images = self.state, self.unit_images
        if state.data is not None and state.unit in state.data.result.units:
            fill_card(self.card, state.data, state.unit, self.explanation, images.caption,
                      self.role.card_line(state.unit), [i.thumbnail.image for i in images.overlays],
                      state.formula_label, self.drawing.unit_drawing(state.unit))

    def flush_card(self) -> None:
        """Fill the card now if it is due: an export must not take it before its turn comes."""
        if self._card_due:
            self.refresh_card()

    def subject(self) -> str:
        """What the per-unit views show, for their figures' file names."""
        return f"unit {self.state.unit}" if self.state.unit >= 0 else ""

    def export_card(self, preset) -> None:
        window = self.parent().window()
        self.flush_card()
        if hasattr(window, "figures"):
            window.figures.figure_request(ExportTarget("Unit card", self.card, self.subject()), preset, False)
