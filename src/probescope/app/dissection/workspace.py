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

The dissection runs in the worker pool (`layer.layer_task`), is saved in the cache per model, layer, dataset and
settings, and arrives block by block. This module lays the panes out and wires them.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QFileDialog, QLabel, QMenu, QVBoxLayout, QWidget

from probescope.app.dissection import rows as r
from probescope.app.dissection.batch_browser import BatchBrowser
from probescope.app.dissection.card import card_panel, fill_card
from probescope.app.dissection.drawing import DrawingPanel
from probescope.app.dissection.image_panel import ImagePanel, install_grid_menu
from probescope.app.dissection.layer import DEFAULT_SETTINGS, LayerData, layer_task, settings_label
from probescope.app.dissection.layer_views import LayerViews
from probescope.app.dissection.panels import BatchPanel, FilterBar, RunsPanel
from probescope.app.dissection.role import RolePanel
from probescope.app.dissection.unit_images import UnitImages
from probescope.app.dissection.unit_view import UnitCharts, UnitView, show_trace
from probescope.app.export import ExportTarget, export_widget
from probescope.app.figure_menu import figure_menu
from probescope.app.panel_area import scrolled
from probescope.app.workers import TaskHandle
from probescope.app.workspace import Workspace
from probescope.core.dissection.formula import Formula
from probescope.core.dissection.results import Explanation
from probescope.core.dissection.settings import DissectionSettings
from probescope.jobs.protocol import TaskError
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


class DissectionWorkspace(Workspace):
    name = "dissection"
    title = "Dissection"
    needs = ("model", "dataset", "layer")
    default_settings: DissectionSettings = DEFAULT_SETTINGS

    def __init__(self, pool, parent: QWidget | None = None):
        super().__init__(pool, parent)
        self.header = QLabel("<b>Units</b>")
        self.header.setWordWrap(True)
        self.filters, self.units, self.view = FilterBar(), UnitTable(), UnitView()
        self.charts, self.trace, self.layer_views, self.card = UnitCharts(), TraceTree(), LayerViews(), UnitCard()
        self.runs, self.batch, self.detail = RunsPanel(), BatchPanel(), ImageDetail(self)
        self.role = RolePanel(pool, self.task_key)
        self.image_view, self.drawing = ImagePanel(pool, self.task_key), DrawingPanel(pool, self.task_key,
                                                                                       self.units.selected_units)
        self.unit_images = UnitImages(pool, self.task_key, self.view.images, self.view.controls,
                                      self._neighbours, self)
        self.browser = BatchBrowser(pool, self.task_key, self.batch, self._reusable_inputs, self._showing_saved,
                                    self)
        self._build_layout()
        self._connect()
        self.settings = self.default_settings
        self.data: LayerData | None = None  # the result on screen (live or saved)
        self.unit = -1
        self.rows: dict[int, r.UnitRow] = {}
        self.formula: Formula | None = None  # what the overlays show (the chosen explanation or a trace formula)
        self.formula_label = ""
        self._inputs: tuple | None = None  # (model, layer, dataset) the live results belong to
        self._kept: dict[str, LayerData] = {}  # results per settings for the current inputs
        self._store: tuple | None = None  # (dataset, LabelStore) read last, reused by the next task
        self._first_part: tuple | None = None  # (dataset, size of the whole) when a first part was loaded
        self._picked = -1  # the unit the workspace chose to show first (not the user)
        self._layer_done = False
        self._layer_run: TaskHandle | None = None  # the dissection running for the inputs on screen
        self._before: LayerData | None = None  # the complete result on screen when it started: back on cancel
        self._cut_short: LayerData | None = None  # what a cancelled run finished (no complete result before it)
        pool.finished.connect(self._task_finished)

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
                                   ("card", "Unit card", card_panel(self.card, self._export_card)),
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
        area.panels["role"].visibilityChanged.connect(lambda shown: shown and self._show_role())
        area.panels["image"].visibilityChanged.connect(self.image_view.set_on_screen)

    def _export_card(self, preset) -> None:
        window = self.window()
        if hasattr(window, "figure_request"):
            window.figures.figure_request(ExportTarget("Unit card", self.card, self._unit_subject()), preset, False)

    def _unit_subject(self) -> str:
        """What the per-unit views show, for their figures' file names."""
        return f"unit {self.unit}" if self.unit >= 0 else ""

    def _connect(self) -> None:
        self.filters.changed.connect(self._apply_filters)
        self.units.unit_changed.connect(self._show_unit)
        self.view.controls.changed.connect(self._controls_changed)
        self.view.images.doubleClicked.connect(lambda index: self.open_image(index.row()))
        self.view.images.activated.connect(lambda index: self.open_image(index.row()))
        self.trace.formula_clicked.connect(self._trace_clicked)
        self.layer_views.unit_clicked.connect(lambda u: self.units.select_unit(u))
        self.unit_images.shown.connect(self._overlays_shown)
        self.role.ablated.connect(lambda _result: self._update_card())
        self.image_view.unit_clicked.connect(self._go_to_unit)
        install_grid_menu(self.view.images, self.image_view, self.area, lambda: self.unit_images.overlays,
                          lambda: ExportTarget("Unit images", self.view.images, self._unit_subject()))
        self.units.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
        self.units.customContextMenuRequested.connect(self._table_menu)
        self.runs.run_requested.connect(self.run_settings)
        self.runs.cancel_requested.connect(lambda: self.pool.cancel(self.task_key("layer")))
        self.runs.run_chosen.connect(self._switch_run)
        self.runs.export_requested.connect(self.export_results_dialog)
        self.batch.live_requested.connect(self.show_loaded_model)
        self.browser.opening.connect(self._job_opening)
        self.browser.opened.connect(self._job_opened)
        self.browser.failed.connect(self._job_failed)
        self.browser.nothing_merged.connect(self.mark_initial_work_done)

    # -- Workspace interface --------------------------------------------------------------------------------------
    def export_targets(self) -> list[ExportTarget]:
        self.layer_views.update_views()  # the Layer panel's views are exported even when not shown
        v, c, lv, unit = self.view, self.charts, self.layer_views, self._unit_subject()
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
        concepts = sorted({c for row in self.rows.values() for c in row.concepts()})
        items += [(f"Concept {c}: list its units", lambda c=c: self.filters.search.setText(c)) for c in concepts]
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
                self._first_part = (loaded.value, loaded.first_of)
            self._inputs, self._kept = inputs, {}
            if not refining:
                self.unit_images.forget()
                self.clear()
        self.run_settings(self.settings)

    def _completes_first_part(self, inputs: tuple) -> bool:
        """The new inputs are the whole of the dataset whose first part's result is on screen (same model and
        layer): that result stays, labelled, until the whole dataset's is complete."""
        d = self.data
        return (d is not None and not d.origin and self._inputs is not None and inputs[:2] == self._inputs[:2]
                and self._of_first_part(d) and not self.state.get("dataset").first_of)

    def _of_first_part(self, d: LayerData) -> bool:
        return self._first_part is not None and d.dataset is self._first_part[0]

    def clear(self) -> None:
        """Nothing on screen belongs to the previous inputs: every view empty until the first units arrive."""
        self.pool.cancel_group(self.task_key("overlays"))
        self.pool.cancel(self.task_key("prefetch"))
        self.data, self.rows, self.unit, self.formula, self.formula_label = None, {}, -1, None, ""
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

    # -- the layer's dissection -----------------------------------------------------------------------------------
    def run_settings(self, settings: DissectionSettings) -> None:
        """Dissect the layer with `settings` (at once from the cache when done before)."""
        loaded, layer, dataset = self._inputs
        self.browser.leave()
        settings = replace(settings, device=str(loaded.value.device))  # where the model is: the app's device
        self.settings = settings
        self.runs.show_settings(settings)
        store = self._store[1] if self._store is not None and self._store[0] is dataset else None
        self._layer_done = False
        self._before = self.data if self.data is not None and self.data.result.complete else None
        refining = self.data is not None and self._of_first_part(self.data) and dataset is not self.data.dataset
        if refining:
            self._show_header(self.data, (0, self.data.result.n_units))
        else:
            self.header.setText(f"<b>Units of {layer}</b> of {loaded.label} (computing…)")
        self.runs.set_running(True, "dissecting " + settings_label(settings))
        first = self.unit if self.unit >= 0 else None  # the unit in view comes first, and stays selected

        def shown(d: LayerData) -> None:
            self._store = (dataset, d.store)
            if refining and not d.result.complete:  # the first part's units stay until the whole's are all done
                self._show_header(self.data, (len(d.result.units), d.result.n_units))
                return
            self._show_layer(d)

        def finished(d: LayerData) -> None:
            self._layer_done = not self._of_first_part(d)  # a first part's result is not the initial work's end
            self._kept[d.key] = d
            shown(d)
            part = f" (first {d.dataset.n_images:,} images)" if self._of_first_part(d) else ""
            self.runs.set_running(False, f"done: {len(d.result.units)} units{part}")
            self.runs.set_runs([(k, settings_label(v.settings)) for k, v in self._kept.items()], d.key)
            self._check_initial()

        def failed(error: TaskError) -> None:
            self.runs.set_running(False, error.message)
            what = f"on the first {self.data.dataset.n_images:,} images (all of them: " if refining else "("
            self.header.setText(f"<b>Units of {layer}</b> {what}failed: see the message above)")

        self._layer_run = self.pool.submit(lambda ctx: layer_task(loaded, layer, dataset, store, settings, ctx, first),
                                           name=f"dissect {layer}", key=self.task_key("layer"), on_partial=shown,
                                           on_result=finished, on_error=failed)

    def _task_finished(self, handle: TaskHandle) -> None:
        """The dissection on screen was cancelled (Settings, the status bar or the Tasks panel; not replaced by a
        newer run): the complete result shown before it comes back with its settings, or, when there was none,
        what it finished stays, said to be cut short."""
        if handle is not self._layer_run:
            return
        self._layer_run = None
        superseded = self.pool.is_running(self.task_key("layer"))  # (a batch job opened in its place)
        if not handle.cancelled or superseded or self.pool.is_shut_down:
            return
        before, self._before = self._before, None
        if before is not None:
            self.settings = before.settings
            self.runs.show_settings(before.settings)
            self._layer_done = True
            self._show_layer(before)
            self.runs.set_runs([(k, settings_label(v.settings)) for k, v in self._kept.items()], before.key)
            self.runs.set_running(False, f"cancelled; back to the result with {settings_label(before.settings)}")
            self._check_initial()
            return
        if self.data is not None:
            self._cut_short = self.data
            self._show_layer(self.data)
        self.runs.set_running(False, "cancelled" + (f" after {len(self.data.result.units)} units" if self.data
                                                     else ""))

    def _switch_run(self, key: str) -> None:
        d = self._kept.get(key)
        if d is not None:
            self.settings = d.settings
            self.runs.show_settings(d.settings)
            self._show_layer(d)

    def _show_layer(self, d: LayerData) -> None:
        refined = self.data is not None and self._of_first_part(self.data) and not self._of_first_part(d)
        self.data = d
        result = d.result
        self.rows = {u: r.unit_row(result, x, d.store.n_pixels) for u, x in result.units.items()}
        rows = [self.rows[u] for u in sorted(self.rows)]
        first = self.units.rowCount() == 0
        self.units.set_rows(COLUMNS, [row_cells(x) for x in rows], resort=result.complete)
        if first:
            self.units.sortByColumn(COLUMNS.index("comp IoU"), Qt.SortOrder.DescendingOrder)
        self.filters.set_categories(sorted({x.category for x in rows if x.category}))
        self._apply_filters()
        self._show_header(d)
        self.layer_views.set_layer(d, self.rows, self.unit)
        self.image_view.set_layer(d)
        self.role.set_layer(d, self._model_of(d))
        if refined and self.unit == self._picked:  # not the user's choice: the whole result's first unit instead
            shown, self._picked = self.unit, self._first_unit()
            self.units.select_unit(self._picked)
            if self._picked == shown:
                self._show_unit(shown, force=True)
        elif self.unit in self.rows:
            self._show_unit(self.unit, force=True)
        elif rows:
            self._picked = self._first_unit()
            self.units.select_unit(self._picked)

    def _show_header(self, d: LayerData, refining: tuple[int, int] | None = None) -> None:
        """What the table holds: its summary, how far the dissection is, and which images it is of when they are a
        first part of the dataset (`refining`: units done and in all of the whole dataset's dissection, under way)."""
        rows = [self.rows[u] for u in sorted(self.rows)]
        result = d.result
        state = "" if refining else " done: cancelled" if d is self._cut_short else " so far"
        progress = "" if result.complete else f" ({len(rows)} of {result.n_units} units{state})"
        where = f" ({d.model_label}, from {d.origin})" if d.origin else ""
        part = ""
        if self._of_first_part(d):
            whole = self._first_part[1]
            part = f" · <i>on the first {d.dataset.n_images:,} of {whole:,} images</i>"
            if refining:
                part += f"; dissecting all {whole:,} images: {refining[0]} of {refining[1]} units done"
        self.header.setText(f"<b>Units of {d.layer}</b>{where}: {r.summary(rows, self.filters.iou_min.value())}"
                            f"{progress}{part}")

    def _first_unit(self) -> int:
        """The unit shown first: the best (by IoU) real composition, among the specialised units when there are
        any, so the first view shows where the searches disagree."""
        composed = [x for x in self.rows.values() if x.explanations.get("iou") is not None
                    and x.explanations["iou"].length > 1]
        pool = [x for x in composed if r.is_specialised(x)] or composed or list(self.rows.values())
        return max(pool, key=lambda x: (x.iou("iou"), -x.unit)).unit

    def _apply_filters(self) -> None:
        f = self.filters
        category = f.category.currentText()
        self.units.show_only(r.filtered(self.rows, f.search.text(), None if category == "all categories" else category,
                                        f.iou_min.value() if f.interpretable.isChecked() else None,
                                        f.specialised.isChecked(), f.hide_ties.isChecked()))

    # -- the selected unit -----------------------------------------------------------------------------------------
    @property
    def overlays(self) -> list:
        """The grid's images with their overlays (ImageOverlay), in grid order."""
        return self.unit_images.overlays

    def explanation(self, method: str | None = None) -> Explanation | None:
        u = self.data.result.units.get(self.unit) if self.data is not None else None
        return None if u is None else r.explanation_of(u, method or self.view.controls.method())

    def _show_unit(self, unit: int, force: bool = False) -> None:
        if self.data is None or unit not in self.data.result.units or (unit == self.unit and not force):
            return
        self.unit = unit
        self.layer_views.select(unit)
        self.view.controls.forget_trace_formula()
        chosen = self.explanation()
        self.formula = chosen.formula if chosen else None
        self.formula_label = chosen.label if chosen else ""
        self._show_overlays()  # first: from the cache it is on screen before the charts below are drawn
        u = self.data.result.units[unit]
        self.view.show_title(u, r.tie_note(self.data.result, u, self.data.store.n_pixels))
        self.charts.show_numbers(self.data, unit)
        self._show_role()
        show_trace(self.trace, self.data, self.data.result.units[unit])
        self.drawing.set_unit(self.data, self._model_of(self.data), unit, self.view.controls.method())

    def _model_of(self, d: LayerData):
        """The model a result was dissected from, when it is the loaded one (ablation needs its modules)."""
        loaded = self._inputs[0] if self._inputs is not None else None
        return loaded.value if loaded is not None and not d.origin else None

    def _show_role(self) -> None:
        if self.role.model is not None and self.unit >= 0:
            self.role.show_units([self.unit], self.area.on_screen("role"))

    def _table_menu(self, position) -> None:
        """Right click on the table: ablate the selected units together, or the table as a figure."""
        units = self.units.selected_units()
        window = self.window()
        if hasattr(window, "figure_request"):
            menu = figure_menu(ExportTarget("Unit table", self.units), window.figures.figure_request, self)
        else:
            menu = QMenu(self)
        first = menu.actions()[0] if menu.actions() else None
        ablate = QAction(f"Ablate {'unit ' + str(units[0]) if len(units) == 1 else f'the {len(units)} selected units'}"
                         " (Role panel)", menu)
        ablate.setEnabled(bool(units))
        ablate.triggered.connect(lambda: self._ablate_selection(units))
        menu.insertAction(first, ablate)
        menu.insertSeparator(first)
        menu.exec(self.units.viewport().mapToGlobal(position))

    def _ablate_selection(self, units: list[int]) -> None:
        self.area.raise_panel("role")
        if self.role.model is None:
            self.role.title.setText("<b>Role</b>: ablation needs the loaded model's own dissection (not a saved "
                                    "result of another model)")
            return
        self.role.show_units(units, True)

    def _trace_clicked(self, step: int, position: int) -> None:
        e = self.data.result.units[self.unit].trace[step][position]
        self.formula, self.formula_label = e.formula, e.label
        self.view.controls.show_trace_formula(e.label)  # the overlay box names what the overlays show
        self._show_overlays()

    def _controls_changed(self) -> None:
        if self.view.controls.method() == "trace":  # display settings changed: the trace formula stays
            self._show_overlays()
            return
        self.view.controls.forget_trace_formula()
        chosen = self.explanation()
        self.formula = chosen.formula if chosen else None
        self.formula_label = chosen.label if chosen else ""
        self._show_overlays()

    def _show_overlays(self) -> None:
        if self.data is not None:
            self.unit_images.show(self.data, self.unit, self.formula, self.formula_label)

    def _neighbours(self, unit: int) -> list[int]:
        """The units next to `unit` in the table as it is sorted and filtered (below first)."""
        shown = self.units.visible_units()
        if unit not in shown:
            return []
        at = shown.index(unit)
        return [shown[k] for k in (at + 1, at - 1) if 0 <= k < len(shown)]

    def _overlays_shown(self) -> None:
        self.view.set_caption(self.unit_images.caption)
        self.charts.draw_histogram()  # computed with the overlays
        self._update_card()
        self._check_initial()

    def _update_card(self) -> None:
        if self.data is not None and self.unit in self.data.result.units:
            fill_card(self.card, self.data, self.unit, self.explanation, self.unit_images.caption,
                      self.role.card_line(self.unit), [i.thumbnail.image for i in self.overlays], self.formula_label)

    def _check_initial(self) -> None:
        if self._layer_done and self.unit_images.ready:
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
        """Back from a batch job to the loaded model's layer."""
        if not self.ready():
            self.batch.message.setText("no model and dataset loaded")
            return
        self.refresh()  # a batch job shown: the loaded model's layer again (from the cache when dissected before)

    def _reusable_inputs(self) -> tuple:
        model = self.state.model if self.state is not None else None
        dataset = self.state.dataset if self.state is not None else None
        return model, dataset, self._store

    def _showing_saved(self) -> bool:
        return self.pool.is_running(self.task_key("layer")) or (self.data is not None and bool(self.data.origin))

    def _job_opening(self, job) -> None:
        origin = self.browser.view.overview.folder.name
        self._layer_done = False
        self.header.setText(f"<b>Units of {job.layer}</b> ({job.model}, opening from batch {origin}…)")
        self.runs.set_saved(f"opening {job.model} / {job.layer} from batch {origin}")

    def _job_opened(self, d: LayerData) -> None:
        job = self.browser.job
        self._layer_done = True
        self._store = (d.dataset, d.store)
        self.runs.show_settings(d.settings)
        self.runs.set_runs([(d.key, f"{d.origin}: " + settings_label(d.settings))], d.key)
        self.runs.set_saved(f"a saved result of {d.origin} ({job.model} / {job.layer}); to dissect with other "
                            "settings, go back to the loaded model (Batch tab) or re-run the batch")
        self._show_layer(d)
        self._check_initial()

    def _job_failed(self, job, message: str) -> None:
        self.runs.set_running(False, message)
        self.header.setText(f"<b>Units of {job.layer}</b> ({job.model}: could not be opened, see the Batch tab)")

    # -- large view, exports ---------------------------------------------------------------------------------------
    def open_image(self, row: int) -> None:
        """The large view of the grid's image `row`, with the same overlays and its labels."""
        self.unit_images.open_large(row, self.formula, self.formula_label, self.detail)

    def export_unit_card(self, path: str | Path, width: int | None = None) -> Path:
        """Write the unit card (PNG at `width` pixels, SVG or PDF by suffix)."""
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
