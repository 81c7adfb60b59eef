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

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QVBoxLayout, QWidget

from probescope.app.export import ExportTarget
from probescope.app.panel_area import scrolled
from probescope.app.similarity import analysis as data
from probescope.app.similarity import jobs
from probescope.app.similarity.embedding_fits import EmbeddingFits
from probescope.app.similarity.panels import ActivePanel, EmbeddingPanel, ModelsPanel, QualityPanel
from probescope.app.similarity.stimuli import stimulus_images
from probescope.app.similarity.trial_view import CELL, TrialView
from probescope.app.similarity.trials_panel import TrialsPanel
from probescope.app.workspace import Workspace
from probescope.jobs.protocol import COMPUTE, IO, TaskContext
from probescope.widgets.command_palette import matches
from probescope.widgets.ink import InkLabel, inked
from probescope.widgets.similarity.sheet import SheetTrial, TrialSheet
from probescope.widgets.similarity.tables import TrialColumns

SHEET_CELL = 52


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
        self.trial = -1  # the file's row on show; -1 none
        self.query_filter = -1  # list only the trials with this query stimulus (-1: any)
        self._trial_shown = False
        self._wanted_view = ""  # model row to select once its scores arrive
        self.header = InkLabel()
        self.header.setWordWrap(True)
        self.header.setTextFormat(Qt.TextFormat.RichText)
        self.trials, self.view = TrialsPanel(), TrialView()
        self.models, self.embedding = ModelsPanel(), EmbeddingPanel()
        self.quality, self.active = QualityPanel(), ActivePanel()
        self.sheet = TrialSheet(SHEET_CELL, columns=2, rows=3)
        self.fits = EmbeddingFits(pool, self._key, self.embedding, self)
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
        self.view.model.currentIndexChanged.connect(self._view_changed)
        self.view.distance.currentIndexChanged.connect(self._view_changed)
        self.view.grid.reference_clicked.connect(self._reference_clicked)
        self.models.add_requested.connect(self.add_layer)
        self.quality.filters_changed.connect(self.set_filters)
        self.embedding.refit_requested.connect(self.refit)
        self.embedding.view.hovered.connect(self._hovered)
        self.fits.fitted.connect(self._fitted)
        self.active.propose_requested.connect(self.propose)
        self.active.cancel_button.clicked.connect(lambda: self.pool.cancel(self._key("propose")))
        self.active.candidates.currentRowChanged.connect(self._show_candidate)
        self.pool.finished.connect(self._task_finished)
        self.area.panels["sheet"].visibilityChanged.connect(lambda shown: shown and self.fill_sheet())

    def _key(self, view: str) -> str:
        """Every task works on the judgments on show: its key is in their group, cancelled when they change."""
        return self.task_key(f"judgments:{view}")

    # -- the Workspace interface ----------------------------------------------------------------------------------
    def export_targets(self) -> list[ExportTarget]:
        trial = f"trial {self.trial + 1}" if self.trial >= 0 else ""  # as the caption numbers it
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
        self.loaded = self.state.get("judgments")
        self.trialset = None
        self.features.clear()
        self.scores = []
        self.fits.reset()
        self.trial = -1
        self.query_filter = -1
        self._trial_shown = False
        listed = self.trials.trial_list.list_model
        if listed.columns is not None:  # the old file's trials leave the list until the new ones are read
            listed.show_rows(np.zeros(len(listed.columns.session), bool))
        judgments = self.loaded.value
        simulated = inked("warning", "SIMULATED judgments: not human data.", "b") + " " if judgments.simulated else ""
        notes = "; ".join(judgments.notes)
        self.header.setText(f"{simulated}{self.loaded.label}, {judgments.format}, {judgments.n_stimuli} stimuli"
                             + (f" ({notes})" if notes else ""))
        self.active.set_simulated(judgments.simulated)
        classes = sorted(set(data.stimulus_classes(judgments)) - {""})
        self.trials.set_classes(classes)
        self._run_analysis()

    def palette_items(self, query: str) -> list[tuple[str, object]]:
        """Trials by number (type it), query classes (filter the list to them), the model rows."""
        if self.trialset is None:
            return []
        items: list[tuple[str, object]] = []
        n = len(self.trialset.trials)
        for word in query.split():
            if word.isdigit() and 1 <= int(word) <= n:
                items.append((f"Trial {word}", lambda t=int(word) - 1: self._go_to_trial(t)))
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
            if self.trialset is not None:
                self.add_layer(self.state.layer)

    # -- quality control and the trial list ----------------------------------------------------------------------
    def set_filters(self, filters: data.Filters) -> None:
        self.filters = filters
        if self.loaded is not None:
            self._run_analysis()

    def _run_analysis(self) -> None:
        judgments, filters = self.loaded.value, self.filters

        def analyse(ctx):
            trialset = data.analyse(judgments, filters)
            return trialset, data.query_captions(judgments, trialset.trials.query)

        def done(result) -> None:
            trialset, (names, rank) = result
            first = self.trialset is None
            self.trialset = trialset
            self.quality.show_report(trialset, self.loaded.value.simulated)
            self.trials.trial_list.list_model.set_trials(TrialColumns(
                trialset.trials.session, trialset.session_grade, trialset.catch_grade, trialset.trials.query, names,
                trialset.kept_mask, rank))
            self.apply_list_filters()
            if first:
                self.fits.start(trialset, self.loaded)
                if self.state.model is not None and self.state.layer is not None:
                    self.add_layer(self.state.layer)
            self._run_scores()

        self.pool.submit(analyse, name="quality control",
                         key=self._key("analysis"), executor=COMPUTE, on_result=done)

    def list_mask(self) -> np.ndarray:
        """Trials the list shows under its filters."""
        agreement = self.current_agreement()
        rule = self.trials.rule(self.query_filter, agreement is not None)
        return data.list_mask(self.trialset, rule, None if agreement is None else agreement.per_trial_correct)

    def apply_list_filters(self) -> None:
        if self.trialset is None:
            return
        keep = self.trial
        mask = self.list_mask()
        self.trials.trial_list.list_model.show_rows(mask)
        self.trials.count.setText(f"{int(mask.sum())} of {len(mask)} trials listed")
        if not (keep >= 0 and self.trials.trial_list.select_trial(keep)):
            self.trials.trial_list.select_row(0)
        if not mask.any():
            self.trial = -1
            self.view.caption.setText("No trial passes the list's filters.")

    def set_query_filter(self, stimulus: int) -> None:
        self.query_filter = stimulus
        self.trials.show_query(data.stimulus_name(self.loaded.value, stimulus) if stimulus >= 0 else None)
        self.trial = -1
        self.apply_list_filters()

    def _reference_clicked(self, position: int) -> None:
        """A reference clicked in the grid: list its own trials as query."""
        if self.trial < 0 or self.trialset is None:
            return
        stimulus = data.trial_references(self.trialset.trials, self.trial)[position]
        self.set_query_filter(stimulus)
        if self.trial < 0:
            name = data.stimulus_name(self.loaded.value, stimulus)
            self.view.summary.setText(f"{name} is never a query in the listed trials.")

    def _list_moved(self) -> None:
        t = self.trials.trial_list.current_trial()
        if t >= 0 and t != self.trial and self.trialset is not None:
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
            self.view.grid.set_trial(images[0], images[1:], choices)
            self.view.describe(self.trialset, t, self.loaded.label, judgments.simulated)
            self._update_model_view()
            if self.ensemble is not None:
                self.embedding.view.highlight(stimuli[0], [refs[c] for c in choices], refs)
            self._trial_shown = True
            self._check_initial()
            if self.area.on_screen("sheet"):
                self.fill_sheet()

        self.pool.submit(lambda ctx: stimulus_images(judgments, stimuli, 2 * CELL, ctx), name=f"trial {t + 1}",
                         key=self._key("trial"), executor=IO, on_result=show)

    def fill_sheet(self) -> None:
        """The sheet: the trial on show and the next ones in the list, each with the selected model's agreement."""
        model = self.trials.trial_list.list_model
        start = max(self.trials.trial_list.currentIndex().row(), 0)
        rows = [int(t) for t in model.rows[start : start + self.sheet.capacity]]
        if not rows:
            return
        judgments, trials = self.loaded.value, self.trialset.trials
        scores, metric = self.selected_scores(), self.view.distance.currentText()
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

        self.pool.submit(task, name="trial sheet", key=self._key("sheet"), executor=IO,
                         on_result=show)

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
            index = self.view.model.findText(name)
            if index >= 0:
                self.view.model.setCurrentIndex(index)
            return

        def done(features: np.ndarray) -> None:
            self.features[name] = features
            self._run_scores()

        self.pool.submit(lambda ctx: jobs.features_task(model.value, layer, name, judgments, ctx),
                         name=f"features of {name}", key=self._key(f"features:{name}"), executor=COMPUTE,
                         on_result=done)

    def _run_scores(self) -> None:
        if self.trialset is None:
            return
        trialset, ensemble, judgments = self.trialset, self.ensemble, self.loaded.value
        features = dict(self.features)
        self.pool.submit(lambda ctx: jobs.scores_task(features, ensemble, trialset, judgments, ctx),
                         name="model table", key=self._key("scores"), executor=COMPUTE, on_result=self._show_scores)

    def _show_scores(self, rows: list[data.Scores]) -> None:
        self.scores = rows
        self.models.show_scores(rows)
        self.view.set_models([s.name for s in rows], self._wanted_view)
        self._wanted_view = ""
        self._view_changed()
        self._check_initial()

    def selected_scores(self) -> data.Scores | None:
        index = self.view.model.currentIndex()
        return self.scores[index] if 0 <= index < len(self.scores) else None

    def current_agreement(self):
        scores = self.selected_scores()
        return None if scores is None else scores.agreement[self.view.distance.currentText()]

    def _view_changed(self) -> None:
        agreement = self.current_agreement()
        self.trials.set_agreement_total(None if agreement is None else int(agreement.per_trial_total.max(initial=0)))
        model = self.trials.trial_list.list_model
        model.set_agreement(*(None, None) if agreement is None else (agreement.per_trial_correct,
                                                                     agreement.per_trial_total))
        self.apply_list_filters()
        self._update_model_view()

    def _update_model_view(self) -> None:
        self.view.show_model_view(self.selected_scores(), self.trialset, self.trial if self._trial_shown else -1)

    # -- the embedding ----------------------------------------------------------------------------------------------
    @property
    def ensemble(self):
        return self.fits.ensemble

    @property
    def history(self) -> list[data.Convergence]:
        return self.fits.history

    def _fitted(self, _ensemble) -> None:
        self.active.set_ready(True)
        if self.trial >= 0 and self._trial_shown:
            trials = self.trialset.trials
            refs = data.trial_references(trials, self.trial)
            self.embedding.view.highlight(int(trials.query[self.trial]),
                                          [refs[c] for c in data.trial_choices(trials, self.trial)], refs)
        self._run_scores()

    def refit(self, dims: list[int], n_members: int, warm: bool) -> None:
        if self.trialset is not None:
            self.fits.refit(self.trialset, self.loaded.value, dims, n_members, warm)

    def _hovered(self, index: int) -> None:
        if index >= 0 and self.loaded is not None:
            self.fits.hover(self.loaded.value, index)

    # -- active learning ------------------------------------------------------------------------------------------
    def propose(self, n_queries: int, n_candidates: int) -> None:
        if self.ensemble is None:
            return
        ensemble, judgments = self.ensemble, self.loaded.value

        def done(proposal) -> None:
            self.active.show_proposal(proposal, lambda q: data.stimulus_name(judgments, q))

        self.active.set_running(True)
        self.pool.submit(lambda ctx: jobs.propose_task(ensemble, judgments, n_queries, n_candidates, ctx),
                         name="propose trials", key=self._key("propose"), executor=COMPUTE, on_result=done)

    def _show_candidate(self, row: int) -> None:
        proposal = self.active.proposal
        if proposal is None or row < 0:
            return
        index = int(self.active.order[row])
        judgments, trials = self.loaded.value, proposal.trials
        refs = data.trial_references(trials, index)
        stimuli = [int(trials.query[index]), *refs]
        self.trial = -1  # a proposal is not one of the file's trials
        self.trials.trial_list.clearSelection()

        def show(images: list) -> None:
            self.view.grid.set_trial(images[0], images[1:], [])
            self.view.caption.setText(f"Proposed trial ({proposal.kind[index]}): expected information gain "
                                      f"{proposal.info_gain[index]:.4f} nats — not yet answered")
            self.view.summary.setText("")
            self.embedding.view.highlight(stimuli[0], [], refs)

        self.pool.submit(lambda ctx: stimulus_images(judgments, stimuli, 2 * CELL, ctx), name="proposed trial",
                         key=self._key("trial"), executor=IO, on_result=show)

    def _task_finished(self, _handle) -> None:
        """Long tasks end (done, failed or cancelled): their panels leave the running state."""
        self.embedding.set_running(self.pool.is_running(self._key("refit")))
        self.active.set_running(self.pool.is_running(self._key("propose")))

    # -- done -----------------------------------------------------------------------------------------------------
    def _check_initial(self) -> None:
        """The first screen is complete: a trial on show and the model table with the embedding's row."""
        if self._trial_shown and any(s.kind == "embedding" for s in self.scores):
            self.mark_initial_work_done()

