"""Similarity workspace: human similarity judgments against models and the psychological embedding.

Left, the trial list (filters: session grade, catch trials, agreement with the selected model, query class; any
column sorts it). Centre, the trial as the participant saw it (the query in the middle of a 3x3 grid, the picks
marked) with the selected model's view laid over it: each reference's rank by the chosen distance, the trial's
triplet agreement (k of 13) and the references of the triplets the model gets wrong in red. Right, tabs: the model
table (triplet accuracy for L1, L2, cosine; Spearman with the embedding; the embedding's row as the reference), the
embedding (2-D view with thumbnails on hover, convergence plots, refit with progress and cancel), data quality
(grades, catch results, what each filter drops, the filters as switches) and active learning (propose, inspect,
save). Everything that computes runs in the worker pool (`analysis`); the first embedding is a quick fit
cached on disk, so a second launch shows it at once.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QScrollArea,
    QSplitter,
    QTabWidget,
    QVBoxLayout,
    QWidget,
)

from probescope.app.export import ExportTarget
from probescope.app.similarity import analysis as data
from probescope.app.similarity.panels import ActivePanel, EmbeddingPanel, ModelsPanel, QualityPanel
from probescope.app.tasks import COMPUTE, IO, Progress, TaskContext
from probescope.app.workspace import Workspace
from probescope.widgets.controls import spin_box
from probescope.widgets.images import to_qimage
from probescope.widgets.similarity.sheet import SheetTrial, TrialSheet
from probescope.widgets.similarity.tables import TrialColumns, TrialList
from probescope.widgets.similarity.trial_grid import ModelView, TrialGrid

CELL = 124
SHEET_CELL = 52
ALL = "all"


def stimulus_images(judgments, stimuli: list[int], size: int, ctx: TaskContext) -> list[tuple]:
    """(QImage, caption) of each stimulus, decoded and shrunk to `size` in the I/O pool."""
    from PIL import Image

    from probescope.core.errors import InputError

    out = []
    for stimulus in stimuli:
        ctx.check()
        name = data.stimulus_name(judgments, stimulus)
        if judgments.catalog is None:
            out.append((to_qimage(np.full((size, size, 3), 128, np.uint8)), name))
            continue
        path = judgments.catalog.image_path(stimulus)
        try:
            with Image.open(path) as im:
                im = im.convert("RGB")
                im.thumbnail((size, size))
                out.append((to_qimage(np.asarray(im)), name))
        except OSError as exc:
            raise InputError(f"cannot read stimulus {stimulus}'s image ({exc})", path) from None
    return out


class SimilarityWorkspace(Workspace):
    name = "similarity"
    title = "Similarity"
    needs = ("judgments",)

    def __init__(self, pool, parent: QWidget | None = None):
        super().__init__(pool, parent)
        self.loaded = None  # the Loaded judgments on show
        self.trialset: data.TrialSet | None = None
        self.filters = data.Filters()
        self.features: dict[str, np.ndarray] = {}  # model rows' features, by row name
        self.scores: list[data.Scores] = []  # the embedding's row first, then the models in the order added
        self.ensemble = None
        self.coarse = None
        self.history: list[data.Convergence] = []
        self.trial = -1  # the file's row on show; -1 none
        self.query_filter = -1  # list only the trials with this query stimulus (-1: any)
        self._trial_shown = False
        self._wanted_view = ""  # model row to select once its scores arrive

        self.header = QLabel()
        self.header.setWordWrap(True)
        self.header.setTextFormat(Qt.TextFormat.RichText)

        # trial list and its filters
        self.grade_filter = QComboBox()
        self.grade_filter.addItems([ALL, *data.GRADE_CLASSES])
        self.catch_filter = QComboBox()
        self.catch_filter.addItems([ALL, *data.CATCH_CLASSES])
        self.class_filter = QComboBox()
        self.class_filter.addItem(ALL)
        self.agree_min = spin_box(0, 99, 0)
        self.agree_max = spin_box(0, 99, 99)
        self.kept_only = QCheckBox("kept by quality control only")
        self.query_button = QPushButton()
        self.query_button.setToolTip("listing only the trials of one query stimulus: click to list all")
        self.query_button.hide()
        self.list_count = QLabel()
        self.trial_list = TrialList()
        filters = QFormLayout()
        filters.addRow("grade", self.grade_filter)
        filters.addRow("catch", self.catch_filter)
        filters.addRow("query class", self.class_filter)
        agree = QHBoxLayout()
        agree.addWidget(self.agree_min)
        agree.addWidget(QLabel("to"))
        agree.addWidget(self.agree_max)
        filters.addRow("agreement", agree)
        filters.addRow(self.kept_only)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addLayout(filters)
        left_layout.addWidget(self.query_button)
        left_layout.addWidget(self.list_count)
        left_layout.addWidget(self.trial_list, 1)

        # the trial with the model's view
        self.view_model = QComboBox()
        self.view_model.setMinimumContentsLength(24)
        self.view_metric = QComboBox()
        self.view_metric.addItems(["cosine", "l2", "l1"])
        view_bar = QHBoxLayout()
        view_bar.addWidget(QLabel("model view"))
        view_bar.addWidget(self.view_model, 1)
        view_bar.addWidget(QLabel("distance"))
        view_bar.addWidget(self.view_metric)
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.grid = TrialGrid(CELL)
        self.summary = QLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.summary.setMaximumWidth(self.grid.sizeHint().width())
        self.caption.setMaximumWidth(self.grid.sizeHint().width())
        self.trial_view = QWidget()  # what 'Trial' exports: caption, grid and the model's summary
        trial_layout = QVBoxLayout(self.trial_view)
        trial_layout.addWidget(self.caption)
        trial_layout.addWidget(self.grid)
        trial_layout.addWidget(self.summary)
        trial_layout.addStretch(1)
        scroll = QScrollArea()
        scroll.setWidget(self.trial_view)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        middle = QWidget()
        middle_layout = QVBoxLayout(middle)
        middle_layout.setContentsMargins(0, 0, 0, 0)
        middle_layout.addLayout(view_bar)
        middle_layout.addWidget(scroll, 1)

        # the panels: the model table above, the rest in tabs below
        self.models = ModelsPanel()
        self.embedding = EmbeddingPanel()
        self.quality = QualityPanel()
        self.active = ActivePanel()
        self.sheet = TrialSheet(SHEET_CELL, columns=2, rows=3)
        sheet_scroll = QScrollArea()
        sheet_scroll.setWidget(self.sheet)
        sheet_scroll.setWidgetResizable(True)
        self.tabs = QTabWidget()
        self.tabs.addTab(self.embedding, "Embedding")
        self.tabs.addTab(self.quality, "Data quality")
        self.tabs.addTab(self.active, "Active learning")
        self.tabs.addTab(sheet_scroll, "Trial sheet")
        self._sheet_tab = sheet_scroll
        right = QSplitter(Qt.Orientation.Vertical)
        right.addWidget(self.models)
        right.addWidget(self.tabs)
        right.setSizes([230, 700])

        splitter = QSplitter()
        splitter.addWidget(left)
        splitter.addWidget(middle)
        splitter.addWidget(right)
        for pane in (left, middle, right):  # a small window squeezes the panes (they scroll) instead of growing
            pane.setMinimumSize(160, 160)
        splitter.setSizes([480, 545, 575])
        layout = QVBoxLayout(self)
        layout.addWidget(self.header)
        layout.addWidget(splitter, 1)

        for combo in (self.grade_filter, self.catch_filter, self.class_filter):
            combo.currentIndexChanged.connect(self.apply_list_filters)
        for spin in (self.agree_min, self.agree_max):
            spin.valueChanged.connect(self.apply_list_filters)
        self.kept_only.toggled.connect(self.apply_list_filters)
        self.query_button.clicked.connect(lambda: self.set_query_filter(-1))
        self.trial_list.selectionModel().currentRowChanged.connect(lambda *_: self._list_moved())
        self.view_model.currentIndexChanged.connect(self._view_changed)
        self.view_metric.currentIndexChanged.connect(self._view_changed)
        self.grid.reference_clicked.connect(self._reference_clicked)
        self.models.add_requested.connect(self.add_layer)
        self.models.save_csv.clicked.connect(self._save_model_csv)
        self.quality.filters_changed.connect(self.set_filters)
        self.embedding.refit_requested.connect(self.refit)
        self.embedding.cancel_button.clicked.connect(lambda: self.pool.cancel(self.task_key("refit")))
        self.embedding.view.hovered.connect(self._hovered)
        self.active.propose_requested.connect(self.propose)
        self.active.cancel_button.clicked.connect(lambda: self.pool.cancel(self.task_key("propose")))
        self.active.candidates.currentRowChanged.connect(self._show_candidate)
        self.active.save_button.clicked.connect(self._save_proposal)
        pool.finished.connect(self._task_finished)
        self.tabs.currentChanged.connect(lambda _i: self._sheet_tab.isVisible() and self.fill_sheet())

    # -- the Workspace interface ----------------------------------------------------------------------------------
    def export_targets(self) -> list[ExportTarget]:
        return [ExportTarget("Similarity", self), ExportTarget("Trial", self.trial_view),
                ExportTarget("Trial sheet", self.sheet),
                ExportTarget("Model table", self.models.table), ExportTarget("Embedding", self.embedding.view),
                ExportTarget("Held-out loss by dimensionality", self.embedding.dims_plot),
                ExportTarget("Convergence", self.embedding.convergence_plot),
                ExportTarget("Session grades", self.quality.grades_plot),
                ExportTarget("Catch trials", self.quality.catch_plot)]

    def refresh(self) -> None:
        """New judgments: start over (quality control, then the embedding and every model row)."""
        self.loaded = self.state.get("judgments")
        self.trialset = None
        self.features.clear()
        self.scores = []
        self.ensemble = self.coarse = None
        self.history = []
        self.trial = -1
        self.query_filter = -1
        self._trial_shown = False
        judgments = self.loaded.value
        simulated = ("<b style='color:#c0392b'>SIMULATED judgments: not human data.</b> " if judgments.simulated
                     else "")
        notes = "; ".join(judgments.notes)
        self.header.setText(f"{simulated}{self.loaded.label}, {judgments.format}, {judgments.n_stimuli} stimuli"
                             + (f" ({notes})" if notes else ""))
        self.active.set_simulated(judgments.simulated)
        classes = sorted(set(data.stimulus_classes(judgments)) - {""})
        self.class_filter.blockSignals(True)
        self.class_filter.clear()
        self.class_filter.addItems([ALL, *classes])
        self.class_filter.blockSignals(False)
        self._run_analysis()

    def step(self, offset: int) -> None:
        row = self.trial_list.currentIndex().row()
        self.trial_list.select_row(max(row, 0) + offset if row >= 0 else 0)

    def load_state(self, state) -> None:
        super().load_state(state)
        self.models.set_layers(state.layers(), state.layer)

    def _on_state_changed(self, slot: str) -> None:
        super()._on_state_changed(slot)
        if slot in ("model", "layer"):
            self.models.set_layers(self.state.layers(), self.state.layer)
            if self.trialset is not None:
                self.add_layer(self.state.layer)

    # -- quality control and the trial list ----------------------------------------------------------------------
    def set_filters(self, filters: data.Filters) -> None:
        self.filters = filters
        if self.loaded is not None:
            self._run_analysis()

    def _run_analysis(self) -> None:
        judgments, filters = self.loaded.value, self.filters

        def done(trialset: data.TrialSet) -> None:
            first = self.trialset is None
            self.trialset = trialset
            self.quality.show_report(trialset, self.loaded.value.simulated)
            names = [data.stimulus_name(judgments, int(q)) for q in trialset.trials.query]
            self.trial_list.list_model.set_trials(TrialColumns(
                trialset.trials.session, trialset.session_grade, trialset.catch_grade, trialset.trials.query, names,
                trialset.kept_mask))
            self.apply_list_filters()
            if first:
                self._start_embedding()
                if self.state.model is not None and self.state.layer is not None:
                    self.add_layer(self.state.layer)
            self._run_scores()

        self.pool.submit(lambda ctx: data.analyse(judgments, filters), name="quality control",
                         key=self.task_key("analysis"), executor=COMPUTE, on_result=self._guard(done))

    def list_mask(self) -> np.ndarray:
        """Trials the list shows under its filters."""
        agreement = self.current_agreement()
        cls = self.class_filter.currentText()
        rule = data.ListFilter(
            grade=self.grade_filter.currentText(), catch=self.catch_filter.currentText(),
            query_class="" if cls == ALL else cls, kept_only=self.kept_only.isChecked(), query=self.query_filter,
            agreement=None if agreement is None else (self.agree_min.value(), self.agree_max.value()))
        return data.list_mask(self.trialset, rule, None if agreement is None else agreement.per_trial_correct)

    def apply_list_filters(self) -> None:
        if self.trialset is None:
            return
        keep = self.trial
        mask = self.list_mask()
        self.trial_list.list_model.show_rows(mask)
        self.list_count.setText(f"{int(mask.sum())} of {len(mask)} trials listed")
        if not (keep >= 0 and self.trial_list.select_trial(keep)):
            self.trial_list.select_row(0)
        if not mask.any():
            self.trial = -1
            self.caption.setText("No trial passes the list's filters.")

    def set_query_filter(self, stimulus: int) -> None:
        self.query_filter = stimulus
        if stimulus >= 0:
            self.query_button.setText(f"query = {data.stimulus_name(self.loaded.value, stimulus)}   ✕")
        self.query_button.setVisible(stimulus >= 0)
        self.trial = -1
        self.apply_list_filters()

    def _reference_clicked(self, position: int) -> None:
        """A reference clicked in the grid: list its own trials as query."""
        if self.trial < 0 or self.trialset is None:
            return
        stimulus = data.trial_references(self.trialset.trials, self.trial)[position]
        self.set_query_filter(stimulus)
        if self.trial < 0:
            self.summary.setText(f"{data.stimulus_name(self.loaded.value, stimulus)} is never a query in the listed "
                                 "trials.")

    def _list_moved(self) -> None:
        t = self.trial_list.current_trial()
        if t >= 0 and t != self.trial:
            self.show_trial(t)

    # -- one trial --------------------------------------------------------------------------------------------------
    def show_trial(self, t: int) -> None:
        """Trial `t` of the file in the grid, its images decoded in the I/O pool."""
        judgments, trials = self.loaded.value, self.trialset.trials
        self.trial = t
        self.active.candidates.setCurrentRow(-1)
        refs = data.trial_references(trials, t)
        choices = data.trial_choices(trials, t)
        stimuli = [int(trials.query[t]), *refs]

        def show(images: list) -> None:
            if self.trial != t:
                return
            self.grid.set_trial(images[0], images[1:], choices)
            self._describe_trial(t)
            self._update_model_view()
            if self.ensemble is not None:
                self.embedding.view.highlight(stimuli[0], [refs[c] for c in choices], refs)
            self._trial_shown = True
            self._check_initial()
            if self._sheet_tab.isVisible():
                self.fill_sheet()

        self.pool.submit(lambda ctx: stimulus_images(judgments, stimuli, 2 * CELL, ctx), name=f"trial {t + 1}",
                         key=self.task_key("trial"), executor=IO, on_result=self._guard(show))

    def fill_sheet(self) -> None:
        """The sheet: the trial on show and the next ones in the list, each with the selected model's agreement."""
        model = self.trial_list.list_model
        start = max(self.trial_list.currentIndex().row(), 0)
        rows = [int(t) for t in model.rows[start : start + self.sheet.capacity]]
        if not rows:
            return
        judgments, trials = self.loaded.value, self.trialset.trials
        scores, metric = self.selected_scores(), self.view_metric.currentText()
        titles = []
        for t in rows:
            title = f"trial {t + 1}"
            if scores is not None:
                a = scores.agreement[metric]
                title += f" · {a.per_trial_correct[t]}/{a.per_trial_total[t]} ({scores.name}, {metric})"
            titles.append(title)
        heading = (("SIMULATED judgments — " if judgments.simulated else "") + f"{self.loaded.label}: "
                   f"{len(rows)} trials from the list, picks marked 1 and 2")
        wanted = [[int(trials.query[t]), *data.trial_references(trials, t)] for t in rows]

        def task(ctx: TaskContext) -> list:
            return [stimulus_images(judgments, ids, 2 * SHEET_CELL, ctx) for ids in wanted]

        def show(images: list) -> None:
            self.sheet.set_trials([SheetTrial(im[0], im[1:], data.trial_choices(trials, t), title)
                                   for im, t, title in zip(images, rows, titles)], heading)

        self.pool.submit(task, name="trial sheet", key=self.task_key("sheet"), executor=IO,
                         on_result=self._guard(show))

    def _describe_trial(self, t: int) -> None:
        ts = self.trialset
        grade = ts.session_grade[t]
        parts = [f"{self.loaded.label}: trial {t + 1} of {len(ts.trials)}", f"session {ts.trials.session[t]}"
                 + ("" if np.isnan(grade) else f" (grade {grade:.3f})")]
        if ts.catch_position[t] >= 0:
            result = {1.0: "picked first", 0.5: "picked second", 0.0: "missed"}[float(ts.catch_grade[t])]
            parts.append(f"catch trial: the mirrored query is reference {ts.catch_position[t] + 1}, {result}")
        rt = ts.trials.rt_ms[t]
        if np.isfinite(rt):
            parts.append(f"{rt / 1000:.1f} s")
        parts.append("kept" if ts.kept_mask[t] else "dropped by quality control")
        simulated = " — SIMULATED" if self.loaded.value.simulated else ""
        self.caption.setText(", ".join(parts) + simulated)

    # -- model rows and the model's view of the trial ---------------------------------------------------------------
    def add_layer(self, layer: str | None) -> None:
        """Compute the loaded model's features at `layer` in the compute worker and add (or refresh) its row."""
        model = self.state.get("model") if self.state is not None else None
        if model is None or layer is None or self.loaded is None:
            return
        name = f"{model.label} · {layer}"
        judgments = self.loaded.value
        self._wanted_view = name
        if name in self.features:  # already a row: show it
            index = self.view_model.findText(name)
            if index >= 0:
                self.view_model.setCurrentIndex(index)
            return

        def task(ctx: TaskContext) -> Iterator[Progress]:
            yield Progress(0.0, f"features of {name}")
            return data.layer_features(model.value, layer, judgments, progress=ctx.progress, cancel=ctx.cancelled)

        def done(features: np.ndarray) -> None:
            self.features[name] = features
            self._run_scores()

        self.pool.submit(task, name=f"features of {name}", key=self.task_key(f"features:{name}"), executor=COMPUTE,
                         on_result=self._guard(done))

    def _run_scores(self) -> None:
        if self.trialset is None:
            return
        trialset, ensemble, judgments = self.trialset, self.ensemble, self.loaded.value
        features = dict(self.features)

        def task(ctx: TaskContext) -> Iterator[Progress]:
            rows = []
            steps = len(features) + (ensemble is not None)
            if ensemble is not None:
                yield Progress(0.0, "triplet accuracy of the embedding")
                rows.append(data.score_embedding(ensemble, trialset))
            for k, (name, f) in enumerate(features.items()):
                yield Progress((k + (ensemble is not None)) / steps, f"triplet accuracy of {name}")
                rows.append(data.score_features(name, f, trialset, judgments, ensemble, cancel=ctx.cancelled))
            return rows

        self.pool.submit(task, name="model table", key=self.task_key("scores"), executor=COMPUTE,
                         on_result=self._guard(self._show_scores))

    def _show_scores(self, rows: list[data.Scores]) -> None:
        self.scores = rows
        self.models.show_scores(rows)
        current = self._wanted_view or self.view_model.currentText()
        self.view_model.blockSignals(True)
        self.view_model.clear()
        self.view_model.addItems([s.name for s in rows])
        index = self.view_model.findText(current)
        self.view_model.setCurrentIndex(index if index >= 0 else len(rows) - 1)
        self.view_model.blockSignals(False)
        self._wanted_view = ""
        self._view_changed()
        self._check_initial()

    def selected_scores(self) -> data.Scores | None:
        index = self.view_model.currentIndex()
        return self.scores[index] if 0 <= index < len(self.scores) else None

    def current_agreement(self):
        scores = self.selected_scores()
        return None if scores is None else scores.agreement[self.view_metric.currentText()]

    def _view_changed(self) -> None:
        agreement = self.current_agreement()
        total = int(agreement.per_trial_total.max(initial=0)) if agreement is not None else 99
        self.agree_max.setMaximum(max(total, 1))
        self.agree_min.setMaximum(max(total, 1))
        if agreement is not None and self.agree_max.value() > total:
            self.agree_max.setValue(total)
        model = self.trial_list.list_model
        model.set_agreement(*(None, None) if agreement is None else (agreement.per_trial_correct,
                                                                     agreement.per_trial_total))
        self.apply_list_filters()
        self._update_model_view()

    def _update_model_view(self) -> None:
        scores, t = self.selected_scores(), self.trial
        if scores is None or t < 0 or self.trialset is None or not self._trial_shown:
            self.grid.set_model_view(None)
            self.summary.setText("")
            return
        metric = self.view_metric.currentText()
        trials = self.trialset.trials
        distance = scores.distances[metric][t]
        n_ref = int(trials.n_reference[t])
        agreement = scores.agreement[metric]
        wrong = data.wrong_triplets(trials, t, distance)
        view = ModelView(scores.name, tuple(data.model_ranks(distance, n_ref)), tuple(distance[:n_ref].tolist()),
                         tuple(wrong), int(agreement.per_trial_correct[t]), int(agreement.per_trial_total[t]))
        self.grid.set_model_view(view)
        how = "expected similarity" if scores.kind == "embedding" else f"{metric} distance"
        text = (f"<b>{scores.name}</b> ({how}): <b>{view.correct} of {view.total}</b> triplets agree with the "
                "participant")
        if wrong:
            names = self.grid.captions()
            items = [f"ref {a + 1} ({_short(names[a])}) closer than ref {b + 1} ({_short(names[b])})"
                     for a, b in wrong]
            text += ("<br><span style='color:#c0392b'>Disagreeing triplets (participant's order): "
                     + "; ".join(items) + "</span>")
        self.summary.setText(text)

    # -- the embedding ----------------------------------------------------------------------------------------------
    def _start_embedding(self) -> None:
        from probescope.core.cache import cache_dir

        trialset, judgments, spec = self.trialset, self.loaded.value, self.loaded.spec

        def task(ctx: TaskContext) -> Iterator[Progress]:
            yield Progress(None, "quick embedding (cached after the first launch)")
            ensemble, cached = data.quick_embedding(trialset, judgments, cache_dir(), progress=ctx.progress,
                                                    cancel=ctx.cancelled)
            coarse, coarse_name = data.coarse_trials(spec, judgments)
            yield Progress(0.95, "convergence measures")
            measures = data.convergence(ensemble, data.dims_loss_of(ensemble), judgments, coarse, None,
                                        len(trialset.filtered))
            return ensemble, cached, coarse, coarse_name, measures

        def done(result) -> None:
            ensemble, cached, self.coarse, coarse_name, measures = result
            how = "quick fit, read from the cache" if cached else "quick fit"
            self._set_embedding(ensemble, measures, f"{how}: {ensemble.dims}-D, {ensemble.n_members} members",
                                coarse_name)

        self.pool.submit(task, name="quick embedding", key=self.task_key("embedding"), executor=COMPUTE,
                         on_result=self._guard(done))

    def _set_embedding(self, ensemble, measures: data.Convergence, how: str, coarse_name: str) -> None:
        self.ensemble = ensemble
        self.history.append(measures)
        xy, projection = data.projection_2d(ensemble)
        simulated = " — SIMULATED judgments" if self.loaded.value.simulated else ""
        self.embedding.show_embedding(xy, f"{how}; {projection}{simulated}", self.history, coarse_name)
        self.active.set_ready(True)
        if self.trial >= 0 and self._trial_shown:
            trials = self.trialset.trials
            refs = data.trial_references(trials, self.trial)
            self.embedding.view.highlight(int(trials.query[self.trial]),
                                          [refs[c] for c in data.trial_choices(trials, self.trial)], refs)
        self._run_scores()

    def refit(self, dims: list[int], n_members: int, warm: bool) -> None:
        if self.trialset is None:
            return
        trialset, judgments, coarse = self.trialset, self.loaded.value, self.coarse
        previous = self.ensemble
        resume = previous if warm else None

        def task(ctx: TaskContext) -> Iterator[Progress]:
            yield Progress(0.0, "fitting the embedding")
            result = data.refit(trialset, judgments, dims, n_members, resume, progress=ctx.progress,
                                cancel=ctx.cancelled)
            yield Progress(1.0, "convergence measures")
            measures = data.convergence(result.ensemble, result.dims_loss, judgments, coarse, previous,
                                        len(trialset.filtered))
            return result, measures

        def done(result) -> None:
            fit, measures = result
            chosen = f"refit: {fit.ensemble.dims}-D chosen of {sorted(fit.dims_loss)}, {fit.ensemble.n_members} members"
            self._set_embedding(fit.ensemble, measures, chosen, self.embedding.coarse_name)

        self.embedding.set_running(True)
        self.pool.submit(task, name="refit embedding", key=self.task_key("refit"), executor=COMPUTE,
                         on_result=self._guard(done))

    def _hovered(self, index: int) -> None:
        if index < 0 or self.loaded is None:
            return
        judgments = self.loaded.value
        self.pool.submit(lambda ctx: stimulus_images(judgments, [index], 96, ctx)[0], name="thumbnail",
                         key=self.task_key("hover"), executor=IO,
                         on_result=self._guard(lambda item: self.embedding.view.set_thumbnail(index, *item)))

    # -- active learning ------------------------------------------------------------------------------------------
    def propose(self, n_queries: int, n_candidates: int) -> None:
        if self.ensemble is None:
            return
        ensemble, judgments = self.ensemble, self.loaded.value

        def task(ctx: TaskContext) -> Iterator[Progress]:
            yield Progress(0.0, "proposing trials")
            return data.propose(ensemble, judgments, n_queries, n_candidates, progress=ctx.progress,
                                cancel=ctx.cancelled)

        def done(proposal) -> None:
            self.active.show_proposal(proposal, lambda q: data.stimulus_name(judgments, q))

        self.active.set_running(True)
        self.pool.submit(task, name="propose trials", key=self.task_key("propose"), executor=COMPUTE,
                         on_result=self._guard(done))

    def _show_candidate(self, row: int) -> None:
        proposal = self.active.proposal
        if proposal is None or row < 0:
            return
        index = int(self.active.order[row])
        judgments, trials = self.loaded.value, proposal.trials
        refs = data.trial_references(trials, index)
        stimuli = [int(trials.query[index]), *refs]
        self.trial = -1  # a proposal is not one of the file's trials
        self.trial_list.clearSelection()

        def show(images: list) -> None:
            self.grid.set_trial(images[0], images[1:], [])
            self.caption.setText(f"Proposed trial ({proposal.kind[index]}): expected information gain "
                                       f"{proposal.info_gain[index]:.4f} nats — not yet answered")
            self.summary.setText("")
            self.embedding.view.highlight(stimuli[0], [], refs)

        self.pool.submit(lambda ctx: stimulus_images(judgments, stimuli, 2 * CELL, ctx), name="proposed trial",
                         key=self.task_key("trial"), executor=IO, on_result=self._guard(show))

    def _save_proposal(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save proposed trials", "proposal.csv", "Trials CSV (*.csv)")
        if path:
            self.save_proposal(path)

    def save_proposal(self, path: str | Path) -> Path:
        data.save_proposal(path, self.active.proposal)
        self.active.status.setText(f"Saved {len(self.active.proposal.trials)} trials to {path}")
        return Path(path)

    def _save_model_csv(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Save the model table", "models.csv", "CSV (*.csv)")
        if path:
            self.save_model_csv(path)

    def save_model_csv(self, path: str | Path) -> Path:
        from probescope.core.atomic import write_text

        write_text(path, self.models.table.csv_text())
        return Path(path)

    def _guard(self, callback):
        """`callback` for a task's result, dropped if other judgments were opened while the task ran."""
        loaded = self.loaded

        def guarded(result) -> None:
            if self.loaded is loaded:
                callback(result)

        return guarded

    def _task_finished(self, _handle) -> None:
        """Long tasks end (done, failed or cancelled): their panels leave the running state."""
        self.embedding.set_running(self.pool.is_running(self.task_key("refit")))
        self.active.set_running(self.pool.is_running(self.task_key("propose")))

    # -- done -----------------------------------------------------------------------------------------------------
    def _check_initial(self) -> None:
        """The first screen is complete: a trial on show and the model table with the embedding's row."""
        if self._trial_shown and any(s.kind == "embedding" for s in self.scores):
            self.mark_initial_work_done()


def _short(caption: str) -> str:
    return caption.split(" · ", 1)[-1]

