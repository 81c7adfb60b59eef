"""Dissection workspace: what each unit of a layer detects (Network Dissection, compositional explanations, and the
Detection Accuracy searches of seed 002).

Left, the unit table (every explanation with its length, IoU and DA; sortable, searchable, filterable by category,
interpretable and specialised units) under a summary line. Centre, the selected unit (`unit_view`): its top images
(or the images where the explanation is present) with the activation heat map, the unit's mask outlined in yellow
and the explanation's concept mask tinted cyan (`unit_images`); below, IoU and DA of each explanation, the length
sweep and the activation histogram with the threshold. Right, tabs: the beam-search trace (click a formula to see
its mask), the layer views (`layer_views`), the unit card (a paper-ready figure), the runs panel (re-dissect with
other settings; every settings set's result is kept and can be switched back to) and the batch panel
(`batch_browser`: a `probescope batch` output folder, each merged layer browsable with every view above).

The dissection runs in the worker pool (`jobs.dissection.layer_data.layer_data_job`), is saved in the cache per
model, layer, dataset and settings, and arrives block by block (`layer_run`). What is on screen is the evented view
state (`view_state`); the selected unit's views are `unit_presenter`'s. This module lays the panes out and wires them:
its helpers get the pool, the state model, the views they draw and a few callables, never the workspace.
"""


from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QFileDialog, QLabel, QVBoxLayout, QWidget

from probescope.app.dissection.batch_browser import BatchBrowser, reusable_inputs
from probescope.app.dissection.card import card_panel
from probescope.app.dissection.drawing import DrawingPanel
from probescope.app.dissection.image_panel import ImagePanel, install_grid_menu
from probescope.app.dissection.layer_run import LayerRunner
from probescope.app.dissection.layer_views import LayerViews
from probescope.app.dissection.panels import BatchPanel, FilterBar, RunsPanel
from probescope.app.dissection.role import RolePanel
from probescope.app.dissection.unit_images import UnitImages
from probescope.app.dissection.unit_presenter import UnitPresenter, table_neighbours
from probescope.app.dissection.unit_view import UnitCharts, UnitView
from probescope.app.dissection.view_state import DissectionState, later_part
from probescope.app.figures.export import ExportTarget, export_widget
from probescope.app.window.panel_area import scrolled
from probescope.app.window.workspace import Workspace
from probescope.core.dissection.settings import WINDOW_SETTINGS, DissectionSettings
from probescope.jobs.dissection import rows as r
from probescope.jobs.dissection.layer_data import LayerData
from probescope.widgets.command_palette import matches
from probescope.widgets.dissection.card import UnitCard
from probescope.widgets.dissection.table import UnitTable
from probescope.widgets.dissection.trace import TraceTree
from probescope.widgets.image_detail import ImageDetail

# The explanations and their IoU first (what a narrow panel shows without scrolling), then DA, lengths, the rest.
COLUMNS = ("unit", "NetDissect", "ND IoU", "compositional", "comp IoU", "da-stop", "stop IoU", "ND DA", "comp DA",
           "stop DA", "len", "stop len", "da-select", "sel IoU", "sel DA", "opt gap", "mask %", "category")


def row_cells(row: r.UnitRow) -> list[object]:
    e = row.explanations
    nd, comp, stop, select = (e.get(m) for m in ("netdissect", "iou", "da-stop", "da-select"))

    def get(x, attr: str) -> object:
        return None if x is None else getattr(x, attr)

    return [row.unit, get(nd, "label"), get(nd, "iou"), get(comp, "label"), get(comp, "iou"), get(stop, "label"),
            get(stop, "iou"), get(nd, "da"), get(comp, "da"), get(stop, "da"), get(comp, "length"),
            get(stop, "length"), get(select, "label"), get(select, "iou"), get(select, "da"), row.gap,
            None if row.mask_share is None else 100 * row.mask_share, row.category or None]


def _state_field(name: str) -> property:
    """The workspace's `data`, `unit`, `settings`, ... are its view state's fields (`DissectionState`)."""
    return property(lambda self: getattr(self.current, name), lambda self, value: setattr(self.current, name, value))


class DissectionWorkspace(Workspace):
    name = "dissection"
    title = "Dissection"
    needs = ("model", "dataset", "layer")
    reads = ("model", "dataset")
    default_settings: DissectionSettings = WINDOW_SETTINGS
    data, unit, rows, settings = (_state_field(n) for n in ("data", "unit", "rows", "settings"))
    _inputs = _state_field("inputs")  # (model, layer, dataset) the live results belong to
    formula, formula_label = _state_field("formula"), _state_field("formula_label")
    overlays = property(lambda self: self.unit_images.overlays, doc="the grid's images with their overlays")

    def __init__(self, pool, parent: QWidget | None = None):
        super().__init__(pool, parent)
        self.current = state = DissectionState(settings=self.default_settings)  # what is on screen
        self.header = QLabel("<b>Units</b>")
        self.header.setWordWrap(True)
        self.filters, self.units, self.view = FilterBar(), UnitTable(), UnitView()
        self.focus_view = self.units
        self.charts, self.trace, self.layer_views, self.card = UnitCharts(), TraceTree(), LayerViews(), UnitCard()
        self.runs, self.batch = RunsPanel(self.default_settings), BatchPanel()  # (the form starts at the preset)
        self.detail, self.role = ImageDetail(self), RolePanel(pool, self.task_key)
        self.image_view, self.drawing = ImagePanel(pool, self.task_key), DrawingPanel(pool, self.task_key,
                                                                                       self.units.selected_units)
        self.unit_images = UnitImages(pool, self.task_key, self.view.images, self.view.controls,
                                      lambda unit: table_neighbours(self.units, unit), self)
        self.selected = UnitPresenter(state, view=self.view, charts=self.charts, trace=self.trace, card=self.card,
                                      role=self.role, drawing=self.drawing, unit_images=self.unit_images,
                                      units=self.units, area=self.area, settled=self.check_initial, parent=self)
        self.runner = LayerRunner(pool, self.task_key("layer"), state, self.runs, self.header, show=self.show_layer,
                                  first_results=self.mark_first_results, settled=self.check_initial,
                                  iou_min=self.iou_min, parent=self)
        self.browser = BatchBrowser(pool, self.task_key, self.batch, lambda: reusable_inputs(self.state, pool.session),
                                    self.runner.showing_saved, self)
        self._build_layout()
        self._connect()

    def _build_layout(self) -> None:
        units = QWidget()
        lv = QVBoxLayout(units)
        lv.setContentsMargins(4, 0, 4, 0)
        lv.addWidget(self.header)
        lv.addWidget(self.filters)
        lv.addWidget(self.units, 1)
        area = self.area
        area.set_central(self.view)
        area.setCorner(Qt.Corner.BottomLeftCorner, Qt.DockWidgetArea.LeftDockWidgetArea)
        area.setCorner(Qt.Corner.BottomRightCorner, Qt.DockWidgetArea.BottomDockWidgetArea)
        area.add("units", "Units", units, "left", 0.33)
        area.add("charts", "Unit numbers", self.charts, "bottom", 0.30, Qt.Orientation.Vertical)
        area.add("trace", "Beam trace", self.trace, "right", 0.29)
        for key, title, widget in (("role", "Role", scrolled(self.role)),
                                   ("layer", "Layer", scrolled(self.layer_views)),
                                   ("card", "Unit card", card_panel(self.card, self.selected.export_card)),
                                   ("image", "Image", scrolled(self.image_view)),
                                   ("settings", "Settings", scrolled(self.runs)),
                                   ("batch", "Batch", scrolled(self.batch))):  # (short panels scroll, never squash)
            area.add(key, title, widget, "right")
            area.tab(key, "trace")
        area.add("drawing", "Drawing", scrolled(self.drawing), "bottom")  # under the unit's images
        area.tab("drawing", "charts")
        area.raise_panel("charts")
        area.raise_panel("trace")
        area.panels["layer"].visibilityChanged.connect(self.layer_views.set_on_screen)
        area.panels["role"].visibilityChanged.connect(lambda shown: shown and self.selected.show_role())
        area.panels["image"].visibilityChanged.connect(self.image_view.set_on_screen)

    def _connect(self) -> None:
        s, runner = self.selected, self.runner
        self.current.events.unit.connect(self.layer_views.select)
        self.filters.changed.connect(self._apply_filters)
        self.units.unit_changed.connect(s.show_unit)
        self.view.controls.changed.connect(s.controls_changed)
        self.view.images.doubleClicked.connect(lambda index: self.open_image(index.row()))
        self.view.images.activated.connect(lambda index: self.open_image(index.row()))
        self.trace.formula_clicked.connect(s.trace_clicked)
        self.layer_views.unit_clicked.connect(lambda u: self.units.select_unit(u))
        self.unit_images.shown.connect(s.overlays_shown)
        self.role.ablated.connect(lambda _result: s.update_card())
        self.image_view.unit_clicked.connect(self._go_to_unit)
        self.drawing.drawn.connect(s.update_card)  # the card shows the unit's drawing once there is one
        install_grid_menu(self.view.images, self.image_view, self.area, lambda: self.unit_images.overlays,
                          lambda: ExportTarget("Unit images", self.view.images, s.subject()))
        self.units.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.units.customContextMenuRequested.connect(s.table_menu)
        self.runs.run_requested.connect(runner.run)
        runner.started.connect(self.browser.leave)  # (the loaded model's layer in place of a batch job's)
        self.runs.cancel_requested.connect(lambda: self.pool.cancel(self.task_key("layer")))
        self.runs.run_chosen.connect(runner.switch)
        self.runs.export_requested.connect(self.export_results_dialog)
        self.batch.live_requested.connect(self.show_loaded_model)
        self.browser.opening.connect(runner.job_opening)
        self.browser.opened.connect(runner.job_opened)
        self.browser.failed.connect(runner.job_failed)
        self.browser.nothing_merged.connect(self.mark_initial_work_done)

    # -- Workspace interface --------------------------------------------------------------------------------------
    def export_targets(self) -> list[ExportTarget]:
        self.layer_views.update_views()  # the Layer panel's views are exported even when not shown
        self.selected.flush_card()  # (a unit shown in the last callback has its card filled at the next turn)
        v, c, lv, unit = self.view, self.charts, self.layer_views, self.selected.subject()
        return [ExportTarget("Dissection", self), ExportTarget("Unit images", v.images, unit),
                ExportTarget("IoU and DA of the explanations", c.bars, unit),
                ExportTarget("Beam-search trace", self.trace, unit), ExportTarget("Length sweep", c.sweep, unit),
                ExportTarget("Activation histogram", c.histogram, unit),
                ExportTarget("IoU against DA (all units)", lv.scatter),
                ExportTarget("Explanation lengths", lv.lengths), ExportTarget("Unit table", self.units),
                ExportTarget("Accuracy correlation", lv.correlation), ExportTarget("Role (ablation)", self.role, unit),
                ExportTarget("Image", self.image_view, self.image_view.subject()),
                ExportTarget("Drawing", self.drawing, self.drawing.subject()),
                ExportTarget("Unit card", self.card, unit)]

    def step(self, offset: int) -> None:
        self.units.step(offset)

    def palette_items(self, query: str) -> list[tuple[str, object]]:
        """Units (by number or explanation), concepts (filter the table to them) and sort orders."""
        items: list[tuple[str, object]] = []
        for name in COLUMNS:
            items.append((f"Sort units by {name}", lambda c=COLUMNS.index(name): self.units.sortByColumn(
                c, Qt.SortOrder.AscendingOrder if COLUMNS[c] in ("unit", "NetDissect", "category")
                else Qt.SortOrder.DescendingOrder)))
        items += [(f"Concept {c}: list its units", lambda c=c: self.filters.search.setText(c))
                  for c in self.current.concepts()]
        for u, row in sorted(self.rows.items()):
            comp = row.explanations.get("iou")
            items.append((f"Unit {u}: {comp.label if comp else '—'}", lambda u=u: self._go_to_unit(u)))
        return [(title, run) for title, run in items if matches(query, title)]

    def _go_to_unit(self, unit: int) -> None:
        if unit not in self.units.visible_units():
            self.filters.clear()
        self.units.select_unit(unit)

    def refresh(self) -> None:
        inputs = (self.state.get("model"), self.state.layer, self.state.dataset)
        shown = self.data is not None or self.pool.is_running(self.task_key("layer"))
        if self.browser.job is None and inputs == self._inputs and shown:
            return
        if inputs != self._inputs:
            refining = self._completes_first_part(inputs)
            loaded = self.state.get("dataset")
            if loaded.first_of:
                self.current.first_part = (loaded.value, loaded.first_of)
            self.current.inputs, self.current.kept = inputs, {}
            if not refining:
                self.unit_images.forget()
                self.clear()
        self.run_settings(self.settings)

    def _completes_first_part(self, inputs: tuple) -> bool:
        """The new inputs are the whole of the dataset whose first part's result is on screen (same model and
        layer): that result stays, labelled, until the whole dataset's is complete."""
        d = self.data
        return (d is not None and not d.origin and self._inputs is not None and inputs[:2] == self._inputs[:2]
                and self.current.of_first_part(d) and not self.state.get("dataset").first_of)

    def clear(self) -> None:
        """Nothing on screen belongs to the previous inputs: every view empty until the first units arrive."""
        self.pool.cancel_group(self.task_key("overlays"))
        self.pool.cancel(self.task_key("prefetch"), superseded=True)
        self.current.clear()
        self.units.set_rows(COLUMNS, [])
        self.view.title.setText("")
        self.view.caption.setText("")
        self.view.images.thumbnails.set_items([])
        self.unit_images.overlays = []
        for bars in (self.charts.iou_bars, self.charts.da_bars):
            bars.clear()
        self.charts.sweep.set_series({})
        self.charts.histogram.clear()
        self.trace.clear()
        self.card.clear()
        self.layer_views.clear()
        self.role.set_layer(None, None)
        self.image_view.clear()
        self.drawing.clear()

    # -- the layer on screen ----------------------------------------------------------------------------------------
    def run_settings(self, settings: DissectionSettings) -> None:
        """Dissect the layer with `settings` (at once from the cache when done before)."""
        self.runner.run(settings)

    def show_layer(self, d: LayerData) -> None:
        state = self.current
        refined = state.data is not None and state.of_first_part(state.data) and not state.of_first_part(d)
        unit = state.unit  # unchanged: a later part of the run on screen, the unit in view the same result in it
        unchanged = later_part(state.data, d) and unit in d.result.units and \
            state.data.result.units.get(unit) is d.result.units[unit]  # (re-drawing it took 30-150 ms each part)
        state.show_layer(d)
        rows = [self.rows[u] for u in sorted(self.rows)]
        first = self.units.rowCount() == 0
        self.units.set_rows(COLUMNS, [row_cells(x) for x in rows], resort=d.result.complete)
        if first:
            self.units.sortByColumn(COLUMNS.index("comp IoU"), Qt.SortOrder.DescendingOrder)
        self.filters.set_categories(sorted({x.category for x in rows if x.category}))
        self._apply_filters()
        self.header.setText(state.header(d, self.iou_min()))
        self.layer_views.set_layer(d, self.rows, self.unit)
        self.image_view.set_layer(d)
        self.role.set_layer(d, state.live_model(d))
        if refined and self.unit == state.picked:  # not the user's choice: the whole result's first unit instead
            shown, state.picked = self.unit, state.first_unit()
            self.units.select_unit(state.picked)
            if state.picked == shown:
                self.selected.show_unit(shown, force=True)
        elif self.unit in self.rows:
            if not unchanged:
                self.selected.show_unit(self.unit, force=True)
        elif rows:
            state.picked = state.first_unit()
            if first:  # the table and header are painted in this turn of the event loop, the unit in the next:
                QTimer.singleShot(0, self._show_picked)  # together they were one 45-60 ms stall on the demo
            else:
                self._select(state.picked)

    def _show_picked(self) -> None:
        """The unit the workspace picked, unless the user chose one meanwhile (or the layer or the window went)."""
        state = self.current
        if not self.pool.is_shut_down and state.unit < 0 and state.picked in self.rows:
            self._select(state.picked)

    def _select(self, unit: int) -> None:
        """Highlight `unit` in the table and show it. The table signals a change of its row only, and it may have
        the unit highlighted already, kept across new rows of the same layer. (A clear makes it forget: layer4 ->
        layer4.conv -> layer4 once left unit 18 highlighted with its images, trace and numbers empty, issue 45.)"""
        self.units.select_unit(unit)
        self.selected.show_unit(unit)

    def iou_min(self) -> float:
        """The interpretable units' IoU threshold the filter bar sets (the header's summary counts with it)."""
        return self.filters.iou_min.value()

    def _apply_filters(self) -> None:
        f = self.filters
        category = f.category.currentText()
        self.units.show_only(r.filtered(self.rows, f.search.text(), None if category == "all categories" else category,
                                        f.iou_min.value() if f.interpretable.isChecked() else None,
                                        f.specialised.isChecked(), f.hide_ties.isChecked()))

    def check_initial(self) -> None:
        if self.runner.done and self.unit_images.ready:
            self.mark_initial_work_done()

    # -- a batch output folder ----------------------------------------------------------------------------------------
    def open_batch(self, folder: str | Path) -> None:
        """List the jobs of the batch in `folder` in the Batch tab and show its first merged layer."""
        self.area.raise_panel("batch")
        self.browser.open(folder)

    def open_batch_dialog(self) -> None:
        self.browser.open_dialog(self)

    def show_job(self, number: int) -> None:
        """Show the batch job `number` (its saved result, with overlays), unless it is not merged yet."""
        self.browser.show_job(number)

    def show_loaded_model(self) -> None:
        """Back from a batch job to the loaded model's layer (from the cache when dissected before)."""
        if not self.ready():
            self.batch.message.setText("no model and dataset loaded")
            return
        self.refresh()

    # -- large view, exports ---------------------------------------------------------------------------------------
    def open_image(self, row: int) -> None:
        """The large view of the grid's image `row`, with the same overlays and its labels."""
        self.unit_images.open_large(row, self.formula, self.formula_label, self.detail)

    def export_unit_card(self, path: str | Path, width: int | None = None) -> Path:
        """Write the unit card (PNG at `width` pixels, SVG or PDF by suffix)."""
        self.selected.refresh_card()
        return export_widget(self.card, path, width=width)

    def export_results(self, kind: str, path: str | Path) -> Path:
        """'tally' writes tally.csv of the units the table shows (its filters apply), 'json' the whole dissection
        JSON, of the result shown."""
        if self.data is None:
            raise ValueError("nothing dissected yet")
        if kind == "tally":
            shown = self.units.visible_units()
            self.data.result.write_tally(path, self.data.settings.searches, shown)
            self.runs.set_running(False, f"wrote {len(shown)} of {len(self.data.result.units)} units (the table's "
                                         f"filters) to {Path(path).name}")
        else:
            self.data.result.save(path)
        return Path(path)

    def export_results_dialog(self, kind: str) -> None:
        """Ask where to write tally.csv ('tally') or the dissection JSON ('json') of the result shown."""
        if self.data is None:
            self.runs.set_running(False, "nothing dissected yet")
            return
        name, pattern = ("tally.csv", "CSV (*.csv)") if kind == "tally" else ("dissection.json", "JSON (*.json)")
        path, _ = QFileDialog.getSaveFileName(self, "Export dissection results", name, pattern)
        if path:
            self.export_results(kind, path)
