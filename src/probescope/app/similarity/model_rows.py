"""The model table's rows and the selected row's view of the trial: a model's layer becomes a row (its features
made in the compute worker and kept in its session), every row is scored on the trials (the embedding's row first),
and the view's chooser and distance decide the agreement the trial list shows and filters by."""

from __future__ import annotations

from collections.abc import Callable

from probescope.app.compute.workers import WorkerPool
from probescope.app.similarity.panels import ModelsPanel
from probescope.app.similarity.state import SimilarityState
from probescope.app.similarity.trial_view import TrialView
from probescope.app.similarity.trials_panel import TrialsPanel
from probescope.core.similarity.agreement import Agreement
from probescope.jobs.protocol import COMPUTE, Job
from probescope.jobs.similarity.tasks import features_job, scores_job


class ModelRows:
    """`listed()` runs after the selected row's agreement changes (the workspace re-applies the list's filters);
    `shown()` after new scores are on screen."""

    def __init__(self, pool: WorkerPool, key: Callable[[str], str], state: SimilarityState, models: ModelsPanel,
                 view: TrialView, trials: TrialsPanel, listed: Callable[[], None], shown: Callable[[], None]):
        self.pool, self._key, self.state = pool, key, state
        self.models, self.view, self.trials = models, view, trials
        self._listed, self._shown = listed, shown
        state.events.scores.connect(self._show_scores)
        view.model.currentIndexChanged.connect(self.view_changed)
        view.distance.currentIndexChanged.connect(self.view_changed)

    def add_layer(self, model, layer: str | None, pool: str = "avg") -> None:
        """Compute the loaded model's features at `layer` (pooled by `pool`: 'avg', or 'cls' for a token layer's
        class token) in the compute worker and add (or show) its row."""
        state = self.state
        if model is None or layer is None or state.loaded is None:
            return
        name = f"{model.label} · {layer}" + (" · class token" if pool == "cls" else "")
        state.wanted_view = name
        if name in state.rows:  # already a row: show it
            index = self.view.model.findText(name)
            if index >= 0:
                self.view.model.setCurrentIndex(index)
            return
        row = (model.value, layer, pool)

        def done(_name: str) -> None:
            state.add_row(name, row)
            self.run_scores()

        self.pool.submit(Job(features_job, dict(row=row, name=name, judgments=state.judgments)),
                         name=f"features of {name}", key=self._key(f"features:{name}"), executor=COMPUTE,
                         on_result=done)

    def run_scores(self) -> None:
        """Score every row (and the embedding) on the trials under the current filters."""
        state = self.state
        if state.trialset is None:
            return
        job = Job(scores_job, dict(rows=dict(state.rows), ensemble=state.ensemble, trialset=state.trialset,
                                   judgments=state.judgments))
        self.pool.submit(job, name="model table", key=self._key("scores"), executor=COMPUTE,
                         on_result=lambda rows: setattr(state, "scores", rows))

    def _show_scores(self, rows: list) -> None:
        self.models.show_scores(rows)
        names = [s.name for s in rows]
        self.view.set_models(names, self.state.wanted_view)
        if self.state.wanted_view in names:  # (scores of the rows before it came first: it is still wanted)
            self.state.wanted_view = ""
        self.view_changed()
        self._shown()

    def agreement(self) -> Agreement | None:
        """The selected row's per-trial agreement under the chosen distance (None: no row)."""
        return self.state.agreement(self.view.model.currentIndex(), self.view.distance.currentText())

    def view_changed(self) -> None:
        agreement = self.agreement()
        self.trials.set_agreement_total(None if agreement is None else int(agreement.per_trial_total.max(initial=0)))
        self.trials.trial_list.list_model.set_agreement(
            *(None, None) if agreement is None else (agreement.per_trial_correct, agreement.per_trial_total))
        self._listed()
        self.update_model_view()

    def update_model_view(self) -> None:
        state = self.state
        self.view.show_model_view(state.selected(self.view.model.currentIndex()), state.trialset,
                                  state.trial if state.trial_shown else -1)
