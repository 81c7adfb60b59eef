"""Dissection workspace: what each unit of a layer detects (Network Dissection, compositional explanations, and the
Detection Accuracy searches of seed 002).

Left, the unit table (every explanation with its length, IoU and DA; sortable, searchable, filterable by category,
interpretable and specialised units) under a summary line. Centre, the selected unit: its top images (or the images
where the explanation is present) with the activation heat map, the unit's mask outlined in yellow and the
explanation's concept mask tinted cyan; below, IoU and DA of each explanation, the length sweep and the activation
histogram with the threshold. Right, tabs: the beam-search trace (click a formula to see its mask), the layer views
(IoU against DA over units, explanation lengths per method), the unit card (a paper-ready figure), the runs panel
(re-dissect with other settings; every settings set's result is kept and can be switched back to) and the batch
panel (the jobs of a `probescope batch` output folder: click a merged layer to browse its saved result with every
view above; changing the loaded model, dataset or layer goes back to them).

The dissection runs in the worker pool (`layer.layer_task`), is saved in the cache per model, layer,
dataset and settings, and arrives block by block; overlays are built in the I/O pool and kept per unit, so going
back to a unit is instant.
"""

from __future__ import annotations

from collections import OrderedDict
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import (
    QFileDialog,
    QHBoxLayout,
    QLabel,
    QScrollArea,
    QSplitter,
    QTableWidget,
    QTableWidgetItem,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from probescope.app.dissection import layer as data
from probescope.app.dissection.batch import BatchView, job_state, overview_task, saved_layer_task
from probescope.app.dissection.overlays import (
    ImageOverlay,
    OverlayOptions,
    image_labels,
    image_overlay,
    overlay_task,
    present_images,
)
from probescope.app.dissection.panels import BatchPanel, FilterBar, RunsPanel, UnitControls
from probescope.app.export import ExportTarget, export_widget
from probescope.app.tasks import IO, Partial, TaskError
from probescope.app.workspace import Workspace
from probescope.core.dissection.formula import Formula
from probescope.core.dissection.results import Explanation
from probescope.core.dissection.settings import DissectionSettings
from probescope.widgets.dissection.card import CardLine, UnitCard
from probescope.widgets.dissection.detail import ImageDetail
from probescope.widgets.dissection.plots import ActivationHistogram, GroupedBars, UnitScatter
from probescope.widgets.dissection.table import UnitTable
from probescope.widgets.dissection.trace import TraceEntry, TraceStep, TraceTree
from probescope.widgets.images import to_qimage
from probescope.widgets.plots_bars import ClassBars, class_color
from probescope.widgets.similarity.plots import LinePlot
from probescope.widgets.thumbnail_grid import ThumbnailGrid

COLUMNS = ("unit", "NetDissect", "category", "ND IoU", "ND DA", "compositional", "len", "comp IoU", "comp DA",
           "da-select", "sel IoU", "sel DA", "da-stop", "stop len", "stop IoU", "stop DA")
CORRELATION_COLUMNS = ("method", "image set", "r (IoU)", "r (DA)", "units", "mean accuracy")
THUMB = 150
OVERLAY_CACHE = 96  # units x views whose overlays stay in memory
CARD_IMAGES = 12
PREFETCH_DELAY_MS = 150
BATCH_POLL_MS = 3000  # how often a running batch's status is read again while its panel is shown


def row_cells(row: data.UnitRow) -> list[object]:
    e = row.explanations

    def part(method: str, length: bool) -> list[object]:
        x = e.get(method)
        if x is None:
            return [None, None, None, None] if length else [None, None, None]
        return [x.label, x.length, x.iou, x.da] if length else [x.label, x.iou, x.da]

    nd = e.get("netdissect")
    return [row.unit, nd.label if nd else None, row.category or None, nd.iou if nd else None,
            nd.da if nd else None, *part("iou", True), *part("da-select", False), *part("da-stop", True)]


def integer_ticks(plot: LinePlot | GroupedBars, top: int) -> None:
    """Explanation lengths are whole numbers: label 1..top on the x axis."""
    plot.plot.getAxis("bottom").setTicks([[(k, str(k)) for k in range(1, top + 1)]])


class DissectionWorkspace(Workspace):
    name = "dissection"
    title = "Dissection"
    needs = ("model", "dataset", "layer")
    default_settings: DissectionSettings = data.DEFAULT_SETTINGS

    def __init__(self, pool, parent: QWidget | None = None):
        super().__init__(pool, parent)
        self.header = QLabel("<b>Units</b>")
        self.header.setWordWrap(True)
        self.units_caption = self.header
        self.filters = FilterBar()
        self.units = UnitTable()
        self.controls = UnitControls()
        self.unit_title = QLabel()
        self.unit_title.setWordWrap(True)
        self.grid_caption = QLabel()
        self.grid_caption.setWordWrap(True)
        self.images = ThumbnailGrid(THUMB)
        self.images.setMinimumHeight(THUMB + 40)
        self.iou_bars = ClassBars("IoU")
        self.da_bars = ClassBars("Detection Accuracy")
        self.sweep = LinePlot("Length sweep", "score", "max explanation length")
        self.histogram = ActivationHistogram()
        self.trace = TraceTree()
        self.scatter = UnitScatter()
        self.lengths = GroupedBars("Explanation lengths per method", "units", "length",
                                   [class_color(data.METHODS.index(m)).name() for m in data.SEARCHES])
        self.correlation_caption = QLabel("<b>Accuracy correlation</b>: needs the model's predictions")
        self.correlation_caption.setWordWrap(True)
        self.correlation = QTableWidget(0, len(CORRELATION_COLUMNS))
        self.correlation.setHorizontalHeaderLabels(list(CORRELATION_COLUMNS))
        self.correlation.verticalHeader().setVisible(False)
        self.correlation.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.card = UnitCard()
        self.runs = RunsPanel()
        self.batch = BatchPanel()
        self.detail = ImageDetail(self)
        self._build_layout()

        self.filters.changed.connect(self._apply_filters)
        self.units.unit_changed.connect(self._show_unit)
        self.controls.changed.connect(self._controls_changed)
        self.trace.formula_clicked.connect(self._trace_clicked)
        self.scatter.unit_clicked.connect(lambda u: self.units.select_unit(u))
        self.images.doubleClicked.connect(lambda index: self.open_image(index.row()))
        self.images.activated.connect(lambda index: self.open_image(index.row()))
        self.runs.run_requested.connect(self.run_settings)
        self.runs.cancel_requested.connect(lambda: self.pool.cancel(self.task_key("layer")))
        self.runs.run_chosen.connect(self._switch_run)
        self.runs.export_requested.connect(self.export_results_dialog)
        self.batch.open_requested.connect(self.open_batch_dialog)
        self.batch.reload_requested.connect(self._read_batch)
        self.batch.live_requested.connect(self.show_loaded_model)
        self.batch.job_chosen.connect(self.show_job)

        self.settings = self.default_settings
        self.data: data.LayerData | None = None
        self.unit = -1
        self.rows: dict[int, data.UnitRow] = {}
        self.formula: Formula | None = None  # what the overlays show (the chosen explanation or a trace formula)
        self.formula_label = ""
        self.overlays: list[ImageOverlay] = []
        self._inputs: tuple | None = None
        self._kept: dict[str, data.LayerData] = {}  # results per settings for the current inputs
        self._store: tuple | None = None  # (dataset, LabelStore)
        self._cache: OrderedDict[tuple, list[ImageOverlay]] = OrderedDict()
        self._layer_done = False
        self._pending: tuple | None = None  # the overlays on their way
        self._caption = ""
        self._overlays_ready = False  # the overlays asked for last are all on screen
        self._prefetch_timer = QTimer(self)  # neighbours' overlays start once the current ones are painted
        self._prefetch_timer.setSingleShot(True)
        self._prefetch_timer.setInterval(PREFETCH_DELAY_MS)
        self._prefetch_timer.timeout.connect(self._prefetch)
        self._layer_views_stale = False  # the Layer tab's views wait for the tab to be shown
        self._batch_folder: Path | None = None
        self._batch_view: BatchView | None = None
        self._batch_known: dict = {}  # the batch's layer summaries, kept between reads (see overview_task)
        self._job = None  # the batch job shown (a BatchJob), None while the loaded model's layer is shown
        self._batch_timer = QTimer(self)
        self._batch_timer.setSingleShot(True)
        self._batch_timer.setInterval(BATCH_POLL_MS)
        self._batch_timer.timeout.connect(self._poll_batch)

    def _build_layout(self) -> None:
        left = QWidget()
        lv = QVBoxLayout(left)
        lv.setContentsMargins(0, 0, 0, 0)
        lv.addWidget(self.header)
        lv.addWidget(self.filters)
        lv.addWidget(self.units, 1)
        charts = QWidget()
        ch = QHBoxLayout(charts)
        ch.setContentsMargins(0, 0, 0, 0)
        bars = QWidget()
        bv = QVBoxLayout(bars)
        bv.setContentsMargins(0, 0, 0, 0)
        bv.addWidget(self.iou_bars)
        bv.addWidget(self.da_bars)
        bv.addStretch(1)
        self.bars = bars
        ch.addWidget(bars, 4)
        ch.addWidget(self.sweep, 3)
        ch.addWidget(self.histogram, 3)
        charts.setMinimumHeight(200)
        centre = QWidget()
        cv = QVBoxLayout(centre)
        cv.setContentsMargins(0, 0, 0, 0)
        cv.addWidget(self.unit_title)
        cv.addWidget(self.controls)
        cv.addWidget(self.grid_caption)
        cv.addWidget(self.images, 3)
        cv.addWidget(charts, 2)
        layer = self.layer_tab = QWidget()
        yv = QVBoxLayout(layer)
        yv.setContentsMargins(0, 0, 0, 0)
        yv.addWidget(self.scatter, 3)
        yv.addWidget(self.lengths, 3)
        yv.addWidget(self.correlation_caption)
        yv.addWidget(self.correlation, 2)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.trace, "Beam trace")
        self.tabs.addTab(layer, "Layer")
        card = QScrollArea()
        card.setWidget(self.card)
        self.tabs.addTab(card, "Unit card")
        self.tabs.addTab(self.runs, "Settings")
        self.tabs.addTab(self.batch, "Batch")
        self.tabs.currentChanged.connect(lambda _i: self._update_layer_views()
                                         if self.tabs.currentWidget() is self.layer_tab else None)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        for w in (left, centre, self.tabs):
            w.setMinimumSize(160, 160)  # explicit: the panes may shrink below their layouts' wishes (small windows)
            splitter.addWidget(w)
        splitter.setStretchFactor(0, 3)
        splitter.setStretchFactor(1, 4)
        splitter.setStretchFactor(2, 3)
        splitter.setSizes([480, 600, 520])
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 4, 4, 4)
        layout.addWidget(splitter)

    # -- Workspace interface --------------------------------------------------------------------------------------
    def export_targets(self) -> list[ExportTarget]:
        self._update_layer_views()  # the Layer tab's views are exported even when not shown
        return [ExportTarget("Dissection", self), ExportTarget("Unit images", self.images),
                ExportTarget("IoU and DA of the explanations", self.bars),
                ExportTarget("Beam-search trace", self.trace),
                ExportTarget("Length sweep", self.sweep), ExportTarget("Activation histogram", self.histogram),
                ExportTarget("IoU against DA (all units)", self.scatter),
                ExportTarget("Explanation lengths", self.lengths), ExportTarget("Unit table", self.units),
                ExportTarget("Accuracy correlation", self.correlation),
                ExportTarget("Unit card", self.card)]

    def step(self, offset: int) -> None:
        self.units.step(offset)

    def refresh(self) -> None:
        inputs = (self.state.get("model"), self.state.layer, self.state.dataset)
        shown = self.data is not None or self.pool.is_running(self.task_key("layer"))
        if self._job is None and inputs == self._inputs and shown:
            return
        if inputs != self._inputs:
            self._inputs, self._kept = inputs, {}
            self._cache.clear()
        self.run_settings(self.settings)

    # -- the layer's dissection -----------------------------------------------------------------------------------
    def run_settings(self, settings: DissectionSettings) -> None:
        """Dissect the layer with `settings` (at once from the cache when done before)."""
        loaded, layer, dataset = self._inputs
        self._job = None
        self.settings = settings
        self.runs.show_settings(settings)
        key = self.task_key("layer")
        store = self._store[1] if self._store is not None and self._store[0] is dataset else None
        self._layer_done = False
        self.header.setText(f"<b>Units of {layer}</b> (dissecting…)")
        self.runs.set_running(True, "dissecting " + data.settings_label(settings))

        def shown(d: data.LayerData) -> None:
            self._store = (dataset, d.store)
            self._show_layer(d)

        def finished(d: data.LayerData) -> None:
            self._layer_done = True
            self._kept[d.key] = d
            shown(d)
            self.runs.set_running(False, f"done: {len(d.result.units)} units")
            self.runs.set_runs([(k, data.settings_label(v.settings)) for k, v in self._kept.items()], d.key)
            self._check_initial()

        def failed(error: TaskError) -> None:
            self.runs.set_running(False, error.message)
            self.header.setText(f"<b>Units of {layer}</b> (failed: see the message above)")

        self.pool.submit(lambda ctx: data.layer_task(loaded, layer, dataset, store, settings, ctx),
                         name=f"dissect {layer}", key=key, on_partial=shown, on_result=finished, on_error=failed)

    def _switch_run(self, key: str) -> None:
        d = self._kept.get(key)
        if d is not None:
            self.settings = d.settings
            self.runs.show_settings(d.settings)
            self._show_layer(d)

    def _show_layer(self, d: data.LayerData) -> None:
        self.data = d
        result = d.result
        self.rows = {u: data.unit_row(result, r) for u, r in result.units.items()}
        rows = [self.rows[u] for u in sorted(self.rows)]
        first = self.units.rowCount() == 0
        self.units.set_rows(COLUMNS, [row_cells(r) for r in rows])
        if first:
            self.units.sortByColumn(COLUMNS.index("comp IoU"), Qt.SortOrder.DescendingOrder)
        self.filters.set_categories(sorted({r.category for r in rows if r.category}))
        self._apply_filters()
        progress = "" if result.complete else f" ({len(rows)} of {result.n_units} units so far)"
        where = f" ({d.model_label}, from {d.origin})" if d.origin else ""
        self.header.setText(f"<b>Units of {d.layer}</b>{where}: {data.summary(rows, self.filters.iou_min.value())}"
                            f"{progress}")
        self._layer_views_stale = True
        if self.tabs.currentWidget() is self.layer_tab:
            self._update_layer_views()
        if self.unit in self.rows:
            self._show_unit(self.unit, force=True)
        elif rows:
            self.units.select_unit(self._first_unit())

    def _update_layer_views(self) -> None:
        """The Layer tab (IoU against DA over units, explanation lengths, accuracy correlation), drawn when it is
        shown or exported rather than on every block of units: it is most of a layer update's GUI-thread time."""
        if not self._layer_views_stale or self.data is None:
            return
        self._layer_views_stale = False
        result = self.data.result
        units = np.array(sorted(self.rows))
        comp = [self.rows[u].explanations.get("iou") for u in units]
        self.scatter.set_points(units, np.array([e.iou if e else 0.0 for e in comp]),
                                np.array([e.da if e else 0.0 for e in comp]),
                                np.array([data.is_specialised(self.rows[u]) for u in units]))
        self.scatter.plot.setTitle("Compositional explanations (orange: specialised units)",
                                   color="k", size="10pt")
        self.scatter.select(self.unit)
        hist = data.length_histogram(result, self.data.settings.max_length)
        self.lengths.set_series(hist)
        integer_ticks(self.lengths, max((len(x) for x, _ in hist.values()), default=1))
        self._show_correlation(result)

    def _show_correlation(self, result) -> None:
        """Seed 002's tables 2-4: Pearson correlation of IoU and of DA with the model's accuracy on each image set."""
        from probescope.core.dissection.correlation import accuracy_correlation

        rows = accuracy_correlation(result) if result.complete else []
        shown = [r for r in rows if r["set"] in ("union", "intersection") and not r["method"].startswith("length-")]
        self.correlation.setRowCount(len(shown))
        for k, r in enumerate(shown):
            cells = [data.METHOD_NAMES.get(r["method"], r["method"]), r["set"], r["pearson_iou"], r["pearson_da"],
                     r["units"], r["mean_accuracy"]]
            for c, v in enumerate(cells):
                text = "—" if v is None else f"{v:.3f}" if isinstance(v, float) else str(v)
                self.correlation.setItem(k, c, QTableWidgetItem(text))
        self.correlation.resizeColumnsToContents()
        self.correlation_caption.setText(
            "<b>Accuracy correlation</b> (Pearson r over units: explanation score against the model's top-1 accuracy "
            "on the images where the unit fires or the explanation is present)" if shown else
            "<b>Accuracy correlation</b>: needs the model's predictions and a finished dissection")

    def _first_unit(self) -> int:
        """The unit shown first: the best (by IoU) real composition, among the specialised units when there are
        any, so the first view shows where the searches disagree."""
        composed = [r for r in self.rows.values() if r.explanations.get("iou") is not None
                    and r.explanations["iou"].length > 1]
        pool = [r for r in composed if data.is_specialised(r)] or composed or list(self.rows.values())
        return max(pool, key=lambda r: (r.iou("iou"), -r.unit)).unit

    def _apply_filters(self) -> None:
        f = self.filters
        text = f.search.text().strip().lower()
        category = f.category.currentText()
        keep = set()
        for u, row in self.rows.items():
            if text and not any(text in c.lower() for c in row.concepts()):
                continue
            if category != "all categories" and row.category != category:
                continue
            if f.interpretable.isChecked() and not data.is_interpretable(row, f.iou_min.value()):
                continue
            if f.specialised.isChecked() and not data.is_specialised(row):
                continue
            keep.add(u)
        self.units.show_only(keep)

    # -- the selected unit -----------------------------------------------------------------------------------------
    def explanation(self, method: str | None = None) -> Explanation | None:
        r = self.data.result.units.get(self.unit) if self.data is not None else None
        if r is None:
            return None
        method = method or self.controls.method()
        return r.netdissect if method == "netdissect" else r.explanations.get(method)

    def _show_unit(self, unit: int, force: bool = False) -> None:
        if self.data is None or unit not in self.data.result.units or (unit == self.unit and not force):
            return
        self.unit = unit
        self.scatter.select(unit)
        result = self.data.result
        r = result.units[unit]
        chosen = self.explanation()
        self.formula = chosen.formula if chosen else None
        self.formula_label = chosen.label if chosen else ""
        self._request_overlays()  # first: from the cache it is on screen before the charts below are drawn
        names = [data.METHOD_NAMES[m] for m in data.METHODS]
        exps = [self.explanation(m) for m in data.METHODS]
        self.iou_bars.set_bars(names, np.array([e.iou if e else 0.0 for e in exps]), vmax=None)
        self.da_bars.set_bars(names, np.array([e.da if e else 0.0 for e in exps]), vmax=1.0)
        heads = r.sweep or [beam[0] for beam in r.trace]
        lengths = list(range(1, len(heads) + 1))
        self.sweep.set_series({"best IoU": (lengths, [e.iou for e in heads]),
                               "its DA": (lengths, [e.da for e in heads])})
        integer_ticks(self.sweep, len(lengths))
        values = np.asarray(self.data.activations[:, unit], dtype=np.float32).ravel()
        counts, edges = np.histogram(values, bins=60)
        self.histogram.set_histogram(edges, counts, r.threshold)
        self._show_trace(r)
        self.unit_title.setText(f"<b>Unit {unit}</b>: threshold {r.threshold:.3g}, fires on {r.fired_images} images"
                                f" ({r.mask_pixels:,} mask pixels). Overlays: heat map = activation, "
                                f"<span style='color:#c9a400'>yellow outline = unit mask</span>, "
                                f"<span style='color:#0a9fd8'>cyan = explanation</span>")

    def _show_trace(self, r) -> None:
        s = self.data.settings
        picks = data.trace_picks(r, s.max_length, s.da_limit)
        steps = []
        for k, beam in enumerate(r.trace):
            entries = tuple(TraceEntry(e.label, e.iou, e.da, tuple(data.METHOD_NAMES[m] for m in data.METHODS
                                                                    if picks.picks.get(m) == (k, p)))
                            for p, e in enumerate(beam))
            note = ", ".join(f"{m} stopped here" for m, at in picks.stops.items() if at == k)
            steps.append(TraceStep(f"step {k + 1}: beam, formulas of ≤ {k + 1} concepts", entries, note))
        last = max([s.max_length, *(k + 1 for k in picks.stops.values())])
        self.trace.set_steps(steps, expanded=last)  # later steps repeat the beam: folded

    def _trace_clicked(self, step: int, position: int) -> None:
        e = self.data.result.units[self.unit].trace[step][position]
        self.formula, self.formula_label = e.formula, e.label
        self._request_overlays()

    def _controls_changed(self) -> None:
        chosen = self.explanation()
        self.formula = chosen.formula if chosen else None
        self.formula_label = chosen.label if chosen else ""
        self._request_overlays()

    # -- overlays --------------------------------------------------------------------------------------------------
    def _overlay_key(self) -> tuple:
        c = self.controls
        return (self.data.key, self.unit, self.formula, c.options(), c.present(), c.k.value())

    def _request_overlays(self) -> None:
        d, unit, formula = self.data, self.unit, self.formula
        if d is None or unit not in d.result.units:
            return
        key = self._overlay_key()
        options: OverlayOptions = key[3]
        present, k = key[4], key[5]
        what = f"“{self.formula_label}”" if formula is not None else "no explanation"
        if key == self._pending and self.pool.is_running(self.task_key("overlays")):
            return  # on its way
        cached = self._cache.get(key)
        if cached is not None:
            self._cache.move_to_end(key)
            self.pool.cancel(self.task_key("overlays"))
            self._set_overlays(cached, what, present)
            return
        r = d.result.units[unit]
        scale = float(d.peaks[:, unit].max())
        dataset = d.dataset
        collected: list[ImageOverlay] = []
        self.images.thumbnails.set_items([])
        self.overlays = []
        self._pending = key
        self._overlays_ready = False

        def task(ctx):
            total = None
            if present and formula is not None:
                images, total = present_images(d.store, formula, d.peaks, unit, k)
            else:
                images = d.top_images(unit, k)
            yield from overlay_task(dataset, d.store, d.activations, unit, r.threshold, scale,
                                    [int(i) for i in images], formula, options, present and formula is not None, ctx)
            return total

        def partial(items: list[ImageOverlay]) -> None:
            collected.extend(items)
            self.overlays = list(collected)
            self.images.thumbnails.append_items([i.thumbnail for i in items])

        def finished(total: int | None) -> None:
            self._remember(key, collected)
            self._set_overlays(collected, what, present, total)

        self.pool.submit(task, name=f"overlays of unit {unit}", key=self.task_key("overlays"), executor=IO,
                         on_partial=partial, on_result=finished)

    def _remember(self, key: tuple, items: list[ImageOverlay]) -> None:
        self._cache[key] = list(items)
        self._cache.move_to_end(key)
        while len(self._cache) > OVERLAY_CACHE:
            self._cache.popitem(last=False)

    def _prefetch(self) -> None:
        """Overlays of the units next to the current one in the table (top images, the same explanation method and
        display settings), so arrow keys show them at once."""
        d, method = self.data, self.controls.method()
        if d is None or self.controls.present() or self.pool.is_shut_down:
            return
        shown = self.units.visible_units()
        if self.unit not in shown:
            return
        at = shown.index(self.unit)
        options, k = self.controls.options(), self.controls.k.value()
        wanted = []
        for u in (shown[at + 1] if at + 1 < len(shown) else None, shown[at - 1] if at > 0 else None):
            r = d.result.units.get(u) if u is not None else None
            if r is None:
                continue
            e = r.netdissect if method == "netdissect" else r.explanations.get(method)
            formula = e.formula if e else None
            key = (d.key, u, formula, options, False, k)
            if key not in self._cache:
                wanted.append((key, u, r.threshold, formula))
        if not wanted:
            return
        dataset = d.dataset

        def task(ctx):
            out = []
            for key, u, threshold, formula in wanted:
                items: list[ImageOverlay] = []
                for part in overlay_task(dataset, d.store, d.activations, u, threshold, float(d.peaks[:, u].max()),
                                         [int(i) for i in d.top_images(u, k)], formula, options, False, ctx):
                    if isinstance(part, Partial):
                        items.extend(part.value)
                out.append((key, items))
            return out

        def store(done: list) -> None:
            for key, items in done:
                self._remember(key, items)

        self.pool.submit(task, name="overlays of the neighbouring units", key=self.task_key("prefetch"),
                         executor=IO, on_result=store)

    def _set_overlays(self, items: list[ImageOverlay], what: str, present: bool, total: int | None = None) -> None:
        self._overlays_ready = True
        if self.overlays is not items:
            self.overlays = list(items)
            self.images.thumbnails.set_items([i.thumbnail for i in items])
        if present:
            fired = sum(i.fired and i.overlap_pixels > 0 for i in items)
            extra = f" of {total}" if total is not None else ""
            caption = (f"{len(items)}{extra} images where {what} is present; the unit detects it (mask meets "
                       f"concept) on {fired} of those shown")
        else:
            caption = f"top {len(items)} images of unit {self.unit}, overlay {what}"
        self.grid_caption.setText(caption + " (double-click an image for a large view)")
        self._caption = caption
        self._update_card()
        self._check_initial()
        self._prefetch_timer.start()

    def _update_card(self) -> None:
        d = self.data
        if d is None or self.unit not in d.result.units:
            return
        r = d.result.units[self.unit]
        lines = [CardLine(data.METHOD_NAMES[m], e.label, e.length, e.iou, e.da)
                 for m in data.METHODS if (e := self.explanation(m)) is not None]
        self.card.set_card(f"Unit {self.unit} · {d.layer}",
                           f"{d.model_label}; threshold {r.threshold:.3g} (top {d.settings.quantile:g}); "
                           f"fires on {r.fired_images} images; {self._caption}",
                           [i.thumbnail.image for i in self.overlays[:CARD_IMAGES]], lines,
                           "heat map: activation · yellow outline: unit mask at T · cyan: "
                           f"{self.formula_label or 'explanation'}")

    def _check_initial(self) -> None:
        if self._layer_done and self._overlays_ready:
            self.mark_initial_work_done()

    # -- a batch output folder ----------------------------------------------------------------------------------------
    def open_batch_dialog(self) -> None:
        folder = QFileDialog.getExistingDirectory(self, "Open a batch output folder (probescope batch --out)")
        if folder:
            self.open_batch(folder)

    def open_batch(self, folder: str | Path) -> None:
        """List the jobs of the batch in `folder` in the Batch tab and show its first merged layer."""
        self._batch_view, self._batch_known = None, {}
        self._batch_folder = Path(folder)
        self.tabs.setCurrentWidget(self.batch)
        self.batch.message.setText(f"reading {folder}…")
        self._read_batch(show_first=True)

    def _read_batch(self, show_first: bool = False) -> None:
        folder, known = self._batch_folder, self._batch_known

        def done(out: tuple) -> None:
            view, self._batch_known = out
            self._batch_view = view
            self.batch.show_batch(view)
            self.batch.message.setText("")
            if view.overview.state == "running":
                self._batch_timer.start()
            finished = [k for k, j in enumerate(view.overview.jobs) if j.finished and not view.problems[k]]
            results = [j.result for j in view.overview.jobs]
            if self._job is not None and self._job.result in results:
                self.batch.select_job(results.index(self._job.result))
            elif show_first and finished:
                self.show_job(finished[0])
            elif show_first:
                self.batch.message.setText("no layer of this batch is merged yet: the list follows the batch")
                self.mark_initial_work_done()

        def failed(error: TaskError) -> None:
            self.batch.message.setText(error.message)

        self.pool.submit(lambda ctx: overview_task(folder, known, ctx), name=f"read batch {folder.name}",
                         key=self.task_key("batch"), executor=IO, on_result=done, on_error=failed)

    def _poll_batch(self) -> None:
        """A running batch: read its status again (only newly merged layers are read in full)."""
        if self._batch_view is not None and not self.pool.is_shut_down and self.isVisible():
            self._read_batch()
        elif self._batch_view is not None and self._batch_view.overview.state == "running":
            self._batch_timer.start()

    def show_job(self, number: int) -> None:
        """Show the batch job `number` (its saved result, with overlays), unless it is not merged yet."""
        view = self._batch_view
        if view is None or not 0 <= number < len(view.overview.jobs):
            return
        job = view.overview.jobs[number]
        if view.problems[number]:
            self.batch.message.setText(view.problems[number])
            return
        if not job.finished:
            self.batch.message.setText(f"{job.model} / {job.layer} is not merged yet ({job_state(job)})")
            return
        if job == self._job and (self.pool.is_running(self.task_key("layer"))
                                 or (self.data is not None and self.data.origin)):
            return
        self._job = job
        self.batch.message.setText("")
        self.batch.select_job(number)
        origin = f"batch {view.overview.folder.name}"
        model = self.state.model if self.state is not None else None
        dataset = self.state.dataset if self.state is not None else None
        device = str(model.device) if model is not None else "cpu"
        store = self._store
        self._layer_done = False
        self.header.setText(f"<b>Units of {job.layer}</b> ({job.model}, opening from {origin}…)")
        self.runs.set_saved(f"opening {job.model} / {job.layer} from {origin}")

        def finished(d: data.LayerData) -> None:
            self._layer_done = True
            self._store = (d.dataset, d.store)
            self.runs.show_settings(d.settings)
            self.runs.set_runs([(d.key, f"{origin}: " + data.settings_label(d.settings))], d.key)
            self.runs.set_saved(f"a saved result of {origin} ({job.model} / {job.layer}); to dissect with other "
                                "settings, go back to the loaded model (Batch tab) or re-run the batch")
            self._show_layer(d)
            self._check_initial()

        def failed(error: TaskError) -> None:
            self._job = None
            self.batch.message.setText(error.message)
            self.runs.set_running(False, error.message)
            self.header.setText(f"<b>Units of {job.layer}</b> ({job.model}: could not be opened, see the Batch tab)")

        self.pool.submit(lambda ctx: saved_layer_task(job, origin, model, dataset, store, device, ctx),
                         name=f"open {job.model}/{job.layer}", key=self.task_key("layer"), on_result=finished,
                         on_error=failed)

    def show_loaded_model(self) -> None:
        """Back from a batch job to the loaded model's layer."""
        if not self.ready():
            self.batch.message.setText("no model and dataset loaded")
            return
        self.refresh()  # a batch job shown: the loaded model's layer again (from the cache when dissected before)

    # -- large view, exports ---------------------------------------------------------------------------------------
    def open_image(self, row: int) -> None:
        """The large view of the grid's image `row`, with the same overlays and its labels."""
        if not 0 <= row < len(self.overlays) or self.data is None:
            return
        d, unit, formula, item = self.data, self.unit, self.formula, self.overlays[row]
        r = d.result.units[unit]
        options = self.controls.options()
        dataset = d.dataset
        scale = float(d.peaks[:, unit].max())

        def task(ctx):
            ctx.check()
            overlay, rgb = image_overlay(dataset, d.store, d.activations, unit, r.threshold, scale, item.image,
                                         formula, options)
            return to_qimage(rgb), image_labels(dataset, item.image), overlay

        def show(result) -> None:
            image, labels, overlay = result
            notes = (f"unit {unit} · image {item.image} ({dataset.image_path(item.image).name})<br>"
                     f"peak activation {overlay.peak:.3f}; unit mask {overlay.unit_pixels} px; "
                     f"{self.formula_label or 'explanation'}: {overlay.concept_pixels} px, "
                     f"{overlay.overlap:.0%} inside the unit mask")
            self.detail.show_image(image, f"Unit {unit}, image {item.image}", notes, labels)

        self.pool.submit(task, name="large image", key=self.task_key("detail"), executor=IO, on_result=show)

    def export_unit_card(self, path: str | Path, width: int | None = None) -> Path:
        """Write the unit card (PNG at `width` pixels, SVG or PDF by suffix)."""
        return export_widget(self.card, path, width=width)

    def export_results(self, kind: str, path: str | Path) -> Path:
        """'tally' writes tally.csv, 'json' the dissection JSON, of the result shown."""
        if self.data is None:
            raise ValueError("nothing dissected yet")
        if kind == "tally":
            self.data.result.write_tally(path, self.data.settings.searches)
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
