"""The Dissection workspace's selected unit: its images and overlays (the explanation chosen, or a formula clicked
in the beam trace), title, numbers, trace, role and card, and the table's right-click menu (ablate the selection).
It writes the unit and what its overlays show into the view state (`view_state.DissectionState`); the views follow.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, QTimer
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QMenu

from probescope.app.dissection.card import fill_card
from probescope.app.dissection.unit_view import show_trace
from probescope.app.figures.export import ExportTarget
from probescope.app.figures.figure_menu import figure_menu
from probescope.core.dissection.results import Explanation
from probescope.jobs.dissection import rows as r
from probescope.jobs.dissection.layer_data import LayerData


class UnitPresenter(QObject):
    """The per-unit views of the workspace `ws`."""

    def __init__(self, ws):
        super().__init__(ws)
        self.ws = ws
        self._card_due = False  # the card is to be filled (update_card)

    def explanation(self, method: str | None = None) -> Explanation | None:
        """The selected unit's explanation by `method` (default: the one the overlay box names)."""
        return self.ws.current.explanation(method or self.ws.view.controls.method())

    def show_unit(self, unit: int, force: bool = False) -> None:
        ws, state = self.ws, self.ws.current
        d = state.data
        if d is None or unit not in d.result.units or (unit == state.unit and not force):
            return
        state.unit = unit  # (the Layer panel follows: it is bound to the state's unit)
        ws.view.controls.forget_trace_formula()
        state.choose(ws.view.controls.method())
        self.show_overlays()  # first: from the cache it is on screen before the charts below are drawn
        u = d.result.units[unit]
        ws.view.show_title(u, r.tie_note(d.result, u, d.store.n_pixels))
        ws.charts.show_numbers(d, unit)
        self.show_role()
        show_trace(ws.trace, d, u)
        ws.drawing.set_unit(d, self.model_of(d), unit, ws.view.controls.method())

    def model_of(self, d: LayerData):
        """The model a result was dissected from, when it is the loaded one (ablation needs its modules)."""
        loaded = self.ws._inputs[0] if self.ws._inputs is not None else None
        return loaded.value if loaded is not None and not d.origin else None

    def show_role(self) -> None:
        ws = self.ws
        if ws.role.model is not None and ws.current.unit >= 0:
            ws.role.show_units([ws.current.unit], ws.area.on_screen("role"))

    def table_menu(self, position) -> None:
        """Right click on the table: ablate the selected units together, or the table as a figure."""
        ws = self.ws
        units = ws.units.selected_units()
        window = ws.window()
        if hasattr(window, "figures"):
            menu = figure_menu(ExportTarget("Unit table", ws.units), window.figures.figure_request, ws)
        else:
            menu = QMenu(ws)
        first = menu.actions()[0] if menu.actions() else None
        ablate = QAction(f"Ablate {'unit ' + str(units[0]) if len(units) == 1 else f'the {len(units)} selected units'}"
                         " (Role panel)", menu)
        ablate.setEnabled(bool(units))
        ablate.triggered.connect(lambda: self.ablate_selection(units))
        menu.insertAction(first, ablate)
        menu.insertSeparator(first)
        menu.exec(ws.units.viewport().mapToGlobal(position))

    def ablate_selection(self, units: list[int]) -> None:
        ws = self.ws
        ws.area.raise_panel("role")
        if ws.role.model is None:
            ws.role.title.setText("<b>Role</b>: ablation needs the loaded model's own dissection (not a saved "
                                  "result of another model)")
            return
        ws.role.show_units(units, True)

    def trace_clicked(self, step: int, position: int) -> None:
        state = self.ws.current
        e = state.data.result.units[state.unit].trace[step][position]
        state.formula, state.formula_label = e.formula, e.label
        self.ws.view.controls.show_trace_formula(e.label, step, position)  # the overlay box names it
        self.show_overlays()

    def controls_changed(self) -> None:
        controls = self.ws.view.controls
        if controls.method() != "trace":  # (display settings changed with a trace formula shown: it stays)
            controls.forget_trace_formula()
            self.ws.current.choose(controls.method())
        self.show_overlays()

    def show_overlays(self) -> None:
        state = self.ws.current
        if state.data is not None:
            self.ws.unit_images.show(state.data, state.unit, state.formula, state.formula_label)

    def neighbours(self, unit: int) -> list[int]:
        """The units next to `unit` in the table as it is sorted and filtered (below first)."""
        shown = self.ws.units.visible_units()
        if unit not in shown:
            return []
        at = shown.index(unit)
        return [shown[k] for k in (at + 1, at - 1) if 0 <= k < len(shown)]

    def overlays_shown(self) -> None:
        ws = self.ws
        ws.view.set_caption(ws.unit_images.caption)
        ws.charts.draw_histogram()  # computed with the overlays
        self.update_card()
        ws.check_initial()

    def update_card(self) -> None:
        """Fill the card once the GUI thread is done with what it is doing: a unit switch asks for it several
        times (the overlays shown, the drawing panel blanked, its cached drawing), and laying the card out costs."""
        if not self._card_due:
            self._card_due = True
            QTimer.singleShot(0, self.refresh_card)

    def refresh_card(self) -> None:
        """The card of the unit on screen, now."""
        self._card_due = False
        ws, state = self.ws, self.ws.current
        if state.data is not None and state.unit in state.data.result.units:
            fill_card(ws.card, state.data, state.unit, self.explanation, ws.unit_images.caption,
                      ws.role.card_line(state.unit), [i.thumbnail.image for i in ws.unit_images.overlays],
                      state.formula_label, ws.drawing.unit_drawing(state.unit))

    def flush_card(self) -> None:
        """Fill the card now if it is due: an export must not take it before its turn comes."""
        if self._card_due:
            self.refresh_card()

    def subject(self) -> str:
        """What the per-unit views show, for their figures' file names."""
        return f"unit {self.ws.current.unit}" if self.ws.current.unit >= 0 else ""

    def export_card(self, preset) -> None:
        window = self.ws.window()
        self.flush_card()
        if hasattr(window, "figures"):
            window.figures.figure_request(ExportTarget("Unit card", self.ws.card, self.subject()), preset, False)
