"""Similarity workspace: human similarity judgments against models and the psychological embedding.

Left, the trial list (filters: session grade, catch trials, agreement with the selected model, query class; any
column sorts it). Centre, the trial as the participant saw it (the query in the middle of a 3x3 grid, the picks
marked) with the selected model's view laid over it: each reference's rank by the chosen distance, the trial's
triplet agreement (k of 13) and the references of the triplets the model gets wrong in red. Right, tabs: the model
table (triplet accuracy for L1, L2, cosine; Spearman with the embedding; the embedding's row as the reference), the
embedding (2-D view with thumbnails on hover, convergence plots, refit with progress and cancel), data quality
(grades, catch results, what each filter drops, the filters as switches) and active learning (propose, inspect,
save). Everything that computes runs in the worker pool as the similarity workflows' Jobs (`jobs.similarity`); the first
embedding is a quick fit cached on disk, so a second launch shows it at once. What is on show is the evented
`SimilarityState` (`state.py`), which the views follow.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from probescope.app.figures.export import ExportTarget
from probescope.app.similarity.embedding_fits import EmbeddingFits
from probescope.app.similarity.model_rows import ModelRows
from probescope.app.similarity.panels import ActivePanel, EmbeddingPanel, ModelsPanel, QualityPanel
from probescope.app.similarity.proposals import Proposals
from probescope.app.similarity.state import SimilarityState
from probescope.app.similarity.stimuli import stimulus_images
from probescope.app.similarity.trial_view import CELL, TrialView
from probescope.app.similarity.trials_panel import TrialsPanel
from probescope.app.window.panel_area import scrolled
from probescope.app.window.workspace import Workspace
from probescope.core.similarity.agreement import Agreement
from probescope.core.similarity.settings import Filters
from probescope.jobs.protocol import COMPUTE, IO, Job, TaskContext
from probescope.jobs.similarity.tasks import analyse_job
from probescope.jobs.similarity.trials import stimulus_name
from probescope.widgets.command_palette import matches
from probescope.widgets.ink import InkLabel, inked
from probescope.widgets.similarity.sheet import SheetTrial, TrialSheet
from probescope.widgets.similarity.tables import TrialColumns

SHEET_CELL = 52


class SimilarityWorkspace(Workspace):
    name = "similarity"
    title = "Similarity"
    needs = ("judgments",)
    reads = ("judgments", "model")  # (the model: its row beside the embeddings)

    def __init__(self, pool, parent: QWidget | None = None):
        super().__init__(pool, parent)
        self.shown = SimilarityState()  # what is on show; the views follow its events
        self.header = InkLabel()
        self.header.setWordWrap(True)
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.trials, self.view = TrialsPanel(), TrialView()
        self.focus_view = self.trials.trial_list
        self.models, self.embedding = ModelsPanel(), EmbeddingPanel()
        self.quality, self.active = QualityPanel(), ActivePanel()
        self.sheet = TrialSheet(SHEET_CELL, columns=2, rows=3)
        self.fits = EmbeddingFits(pool, self._key, self.embedding, self.shown)
        self.model_rows = ModelRows(pool, self._key, self.shown, self.models, self.view, self.trials,
                                    self.apply_list_filters, self._check_initial)
        self.proposals = Proposals(pool, self._key, self.shown, self.active, self.view, self.embedding, self.trials)
        self._build_layout()
        self._connect()

    def _build_layout(self) -> None:
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.addWidget(self.header)
        layout.addWidget(self.view, 1)
        area = self.area
        area.set_central(central)
        area.add("trials", "Trials", self.trials, "left", 0.30)
        area.add("models", "Model table", scrolled(self.models), "right", 0.36)  # short: it scrolls, never clips
        area.add("embedding", "Embedding", scrolled(self.embedding), "right")  # (a short panel scrolls)
        area.split("models", "embedding", Qt.Orientation.Vertical)
        for key, title, widget in (("quality", "Data quality", self.quality),
                                   ("active", "Active learning", self.active),
                                   ("sheet", "Trial sheet", scrolled(self.sheet))):
            area.add(key, title, widget, "right")
            area.tab(key, "embedding")
        area.raise_panel("embedding")
        area.proportions[("models", Qt.Orientation.Vertical)] = 0.32  # (its column keeps its width share)

    def _connect(self) -> None:
        self.trials.changed.connect(self.apply_list_filters)
        self.trials.query_cleared.connect(lambda: self.set_query_filter(-1))
        self.trials.trial_list.selectionModel().currentRowChanged.connect(lambda *_: self._list_moved())
        self.view.grid.reference_clicked.connect(self._reference_clicked)
        self.models.add_requested.connect(self.add_layer)
        self.quality.filters_changed.connect(self.set_filters)
        self.embedding.view.hovered.connect(self._hovered)
        self.shown.events.ensemble.connect(self._fitted)
        self.shown.events.filters.connect(lambda _filters: self.shown.loaded is not None and self._run_analysis())
        self.pool.finished.connect(self._task_finished)
        self.area.panels["sheet"].visibilityChanged.connect(lambda shown: shown and self.fill_sheet())

    def _key(self, view: str) -> str:
        """Every task works on the judgments on show: its key is in their group, cancelled when they change."""
        return self.task_key(f"judgments:{view}")

    # -- the Workspace interface ----------------------------------------------------------------------------------
    def export_targets(self) -> list[ExportTarget]:
        trial = f"trial {self.shown.trial + 1}" if self.shown.trial >= 0 else ""  # as the caption numbers it
        return [ExportTarget("Similarity", self), ExportTarget("Trial", self.view.trial, trial),
                ExportTarget("Trial sheet", self.sheet),
                ExportTarget("Model table", self.models.table), ExportTarget("Embedding", self.embedding.view),
                ExportTarget("Held-out loss by dimensionality", self.embedding.dims_plot),
                ExportTarget("Convergence", self.embedding.convergence_plot),
                ExportTarget("Session grades", self.quality.grades_plot),
                ExportTarget("Catch trials", self.quality.catch_plot)]

    def refresh(self) -> None:
        """New judgments: start over (quality control, then the embedding and every model row)."""
        self.pool.cancel_group(self.task_key("judgments"))  # nothing computed for other judgments is shown
        self.shown.start(self.state.get("judgments"))
        listed = self.trials.trial_list.list_model
        if listed.columns is not None:  # the old file's trials leave the list until the new ones are read
            listed.show_rows(np.zeros(len(listed.columns.session), bool))
        simulated, header = self.shown.header()
        warning = inked("warning", "SIMULATED judgments: not human data.", "b") + " " if simulated else ""
        self.header.setText(warning + header)
        self.active.set_simulated(simulated)
        self.trials.set_classes(self.shown.query_classes())
        self._run_analysis()

    def palette_items(self, query: str) -> list[tuple[str, object]]:
        """Trials by number (type it), query classes (filter the list to them), the model rows."""
        if self.shown.trialset is None:
            return []
        items: list[tuple[str, object]] = [(title, lambda t=t: self._go_to_trial(t))
                                           for title, t in self.shown.trial_items(query)]
        box = self.trials.class_filter
        items += [(f"Query class {box.itemText(k)}: list its trials", lambda k=k: box.setCurrentIndex(k))
                  for k in range(1, box.count())]
        items += [(f"Model view {self.view.model.itemText(k)}", lambda k=k: self.view.model.setCurrentIndex(k))
                  for k in range(self.view.model.count())]
        return [(title, run) for title, run in items if matches(query, title) or title.startswith("Trial ")]

    def _go_to_trial(self, t: int) -> None:
        if not self.trials.trial_list.select_trial(t):  # not listed under the filters: list every trial
            self.trials.clear()
            self.set_query_filter(-1)
            self.trials.trial_list.select_trial(t)

    def step(self, offset: int) -> None:
        row = self.trials.trial_list.currentIndex().row()
        self.trials.trial_list.select_row(max(row, 0) + offset if row >= 0 else 0)

    def load_state(self, state) -> None:
        super().load_state(state)
        self.models.set_layers(state.layers(), state.layer)

    def _on_state_changed(self, slot: str) -> None:
        super()._on_state_changed(slot)
        if slot in ("model", "layer"):
            self.models.set_layers(self.state.layers(), self.state.layer)
            if self.shown.trialset is not None:
                self.add_layer(self.state.layer)

    def add_layer(self, layer: str | None, pool: str = "avg") -> None:
        """The loaded model's `layer` as a model row (its features, pooled by `pool`, computed in the compute
        worker)."""
        self.model_rows.add_layer(self.state.get("model") if self.state is not None else None, layer, pool)

    # -- quality control and the trial list ----------------------------------------------------------------------
    def set_filters(self, filters: Filters) -> None:
        self.shown.filters = filters  # (its event runs the analysis again)

    def _run_analysis(self) -> None:
        shown = self.shown
        judgments = shown.judgments

        def done(result) -> None:
            trialset, (names, rank) = result
            first = shown.trialset is None
            shown.trialset = trialset
            self.quality.show_report(trialset, judgments.simulated)
            self.trials.trial_list.list_model.set_trials(TrialColumns(
                trialset.trials.session, trialset.session_grade, trialset.catch_grade, trialset.trials.query, names,
                trialset.kept_mask, rank))
            self.apply_list_filters()
            if first:
                self.fits.start(trialset, shown.loaded)
                if self.state.model is not None and self.state.layer is not None:
                    self.add_layer(self.state.layer)
            self.model_rows.run_scores()

        self.pool.submit(Job(analyse_job, dict(judgments=judgments, filters=shown.filters), compute=False),
                         name="quality control", key=self._key("analysis"), executor=COMPUTE, on_result=done)

    def current_agreement(self) -> Agreement | None:
        """The selected model row's per-trial agreement under the chosen distance (None: no row)."""
        return self.model_rows.agreement()

    def apply_list_filters(self) -> None:
        shown = self.shown
        if shown.trialset is None:
            return
        keep = shown.trial
        agreement = self.current_agreement()
        mask = shown.list_mask(self.trials.rule(shown.query_filter, agreement is not None), agreement)
        self.trials.trial_list.list_model.show_rows(mask)
        self.trials.count.setText(f"{int(mask.sum())} of {len(mask)} trials listed")
        if not (keep >= 0 and self.trials.trial_list.select_trial(keep)):
            self.trials.trial_list.select_row(0)
        if not mask.any():
            shown.trial = -1
            self.view.caption.setText("No trial passes the list's filters.")

    def set_query_filter(self, stimulus: int) -> None:
        self.shown.query_filter = stimulus
        self.trials.show_query(stimulus_name(self.shown.judgments, stimulus) if stimulus >= 0 else None)
        self.shown.trial = -1
        self.apply_list_filters()

    def _reference_clicked(self, position: int) -> None:
        """A reference clicked in the grid: list its own trials as query."""
        shown = self.shown
        if shown.trial < 0 or shown.trialset is None:
            return
        stimulus = shown.stimuli(shown.trialset.trials, shown.trial)[1][position]
        self.set_query_filter(stimulus)
        if shown.trial < 0:
            self.view.summary.setText(f"{stimulus_name(shown.judgments, stimulus)} is never a query in the listed "
                                      "trials.")

    def _list_moved(self) -> None:
        t = self.trials.trial_list.current_trial()
        if t >= 0 and t != self.shown.trial and self.shown.trialset is not None:
            self.show_trial(t)

    # -- one trial --------------------------------------------------------------------------------------------------
    def show_trial(self, t: int) -> None:
        """Trial `t` of the file in the grid, its images decoded in the I/O pool."""
        shown = self.shown
        judgments = shown.judgments
        shown.trial = t
        self.active.candidates.setCurrentRow(-1)
        stimuli, refs, choices = shown.stimuli(shown.trialset.trials, t)

        def show(images: list) -> None:
            if shown.trial != t:
                return
            self.view.grid.set_trial(images[0], images[1:], choices)
            self.view.describe(shown.trialset, t, shown.loaded.label, judgments.simulated)
            self.model_rows.update_model_view()
            if shown.ensemble is not None:
                self.embedding.view.highlight(stimuli[0], [refs[c] for c in choices], refs)
            shown.trial_shown = True
            self._check_initial()
            if self.area.on_screen("sheet"):
                self.fill_sheet()

        self.pool.submit(lambda ctx: stimulus_images(judgments, stimuli, 2 * CELL, ctx), name=f"trial {t + 1}",
                         key=self._key("trial"), executor=IO, on_result=show)

    def fill_sheet(self) -> None:
        """The sheet: the trial on show and the next ones in the list, each with the selected model's agreement."""
        shown = self.shown
        model = self.trials.trial_list.list_model
        start = max(self.trials.trial_list.currentIndex().row(), 0)
        rows = [int(t) for t in model.rows[start : start + self.sheet.capacity]]
        if not rows:
            return
        judgments, trials = shown.judgments, shown.trialset.trials
        titles = shown.sheet_titles(rows, self.view.model.currentIndex(), self.view.distance.currentText())
        heading = (("SIMULATED judgments — " if judgments.simulated else "") + f"{shown.loaded.label}: "
                   f"{len(rows)} trials from the list, picks marked 1 and 2")
        wanted = [shown.stimuli(trials, t) for t in rows]

        def task(ctx: TaskContext) -> list:
            return [stimulus_images(judgments, ids, 2 * SHEET_CELL, ctx) for ids, _, _ in wanted]

        def show(images: list) -> None:
            self.sheet.set_trials([SheetTrial(im[0], im[1:], choices, title)
                                   for im, (_, _, choices), title in zip(images, wanted, titles)], heading)

        self.pool.submit(task, name="trial sheet", key=self._key("sheet"), executor=IO, on_result=show)

    # -- the embedding ----------------------------------------------------------------------------------------------
    def _fitted(self, ensemble) -> None:
        if ensemble is None:  # (new judgments: no fit yet)
            return
        self.active.set_ready(True)
        highlight = self.shown.highlight()
        if highlight is not None:
            self.embedding.view.highlight(*highlight)
        self.model_rows.run_scores()

    def _hovered(self, index: int) -> None:
        if index >= 0 and self.shown.loaded is not None:
            self.fits.hover(self.shown.judgments, index)

    def _task_finished(self, _handle) -> None:
        """Long tasks end (done, failed or cancelled): their panels leave the running state."""
        self.embedding.set_running(self.pool.is_running(self._key("refit")))
        self.proposals.running()

    def _check_initial(self) -> None:
        if self.shown.initial_done():
            self.mark_initial_work_done()
