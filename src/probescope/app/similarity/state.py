"""What the Similarity workspace shows, as an evented, Qt-free model: the judgments on show, their trials under
quality control, the model rows and their scores, the trial on show, the list's query filter and the embedding's
fits. The workspace's widgets bind to its events (`state.events.scores.connect(...)`, one signal per field, psygnal)
and the view logic that decides what they show lives here, so it is tested without a window.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

import numpy as np
from psygnal import evented

from probescope.core.similarity.agreement import Agreement
from probescope.core.similarity.ensemble import Ensemble
from probescope.core.similarity.settings import Filters
from probescope.core.similarity.trials import Trials
from probescope.jobs.inputs import Loaded
from probescope.jobs.similarity.embedding import Convergence
from probescope.jobs.similarity.scores import Scores
from probescope.jobs.similarity.tasks import FeatureRow
from probescope.jobs.similarity.trials import (
    ListFilter,
    TrialSet,
    list_mask,
    stimulus_classes,
    trial_choices,
    trial_references,
)

_SAME = operator.is_  # results hold arrays: a field changes when it holds another object


@evented(equality_operators={"loaded": _SAME, "trialset": _SAME, "scores": _SAME, "ensemble": _SAME,
                             "coarse": _SAME, "history": _SAME})
@dataclass
class SimilarityState:
    """`trial` is the file's row on show (-1: none, or a proposed trial); `query_filter` lists only the trials with
    that query stimulus (-1: any); `trial_shown` turns true once a trial's images are on screen; `wanted_view` is
    the model row to select once its scores arrive. `history` holds every fit's convergence measures, oldest
    first; `coarse` the coarse-grained trials the fits' loss is measured on."""

    loaded: Loaded | None = None
    trialset: TrialSet | None = None
    filters: Filters = field(default_factory=Filters)
    rows: dict[str, FeatureRow] = field(default_factory=dict)  # model rows' (model, layer, pool), by row name
    scores: list[Scores] = field(default_factory=list)  # the embedding's row first, then the models in order added
    trial: int = -1
    query_filter: int = -1
    trial_shown: bool = False
    wanted_view: str = ""
    ensemble: Ensemble | None = None
    coarse: Trials | None = None
    history: list[Convergence] = field(default_factory=list)

    def start(self, loaded: Loaded) -> None:
        """New judgments: everything computed for the previous ones goes (the filters stay), without an event: the
        workspace starts over itself, and no view is told of a reset it would redraw for nothing."""
        with self.events.blocked():
            self.loaded, self.trialset, self.rows, self.scores = loaded, None, {}, []
            self.trial, self.query_filter, self.trial_shown, self.wanted_view = -1, -1, False, ""
            self.reset_fits()

    def reset_fits(self) -> None:
        self.ensemble, self.coarse, self.history = None, None, []

    @property
    def judgments(self):
        return None if self.loaded is None else self.loaded.value

    def header(self) -> tuple[bool, str]:
        """(simulated?, the line above the trial: the file, its format, its stimuli and its notes)."""
        judgments = self.judgments
        notes = "; ".join(judgments.notes)
        return judgments.simulated, (f"{self.loaded.label}, {judgments.format}, {judgments.n_stimuli} stimuli"
                                     + (f" ({notes})" if notes else ""))

    def query_classes(self) -> list[str]:
        """The classes the list's query filter offers."""
        return sorted(set(stimulus_classes(self.judgments)) - {""})

    def fitted(self, ensemble: Ensemble, measures: Convergence) -> None:
        """A fit arrived: its measures join the history before the ensemble's event fires."""
        self.history = [*self.history, measures]
        self.ensemble = ensemble

    def add_row(self, name: str, row: FeatureRow) -> None:
        self.rows = {**self.rows, name: row}

    # -- the model table's rows and the model view ---------------------------------------------------------------
    def selected(self, index: int) -> Scores | None:
        """The scores of model row `index` of the view's chooser (None: no such row)."""
        return self.scores[index] if 0 <= index < len(self.scores) else None

    def agreement(self, index: int, metric: str) -> Agreement | None:
        """The per-trial agreement of row `index` under `metric` (None: no row selected)."""
        scores = self.selected(index)
        return None if scores is None else scores.agreement[metric]

    def list_mask(self, rule: ListFilter, agreement: Agreement | None) -> np.ndarray:
        """(m,) the trials the list shows under `rule`, with the selected row's agreement."""
        return list_mask(self.trialset, rule, None if agreement is None else agreement.per_trial_correct)

    def initial_done(self) -> bool:
        """The first screen is complete: a trial on show and the model table with the embedding's row."""
        return self.trial_shown and any(s.kind == "embedding" for s in self.scores)

    # -- one trial ------------------------------------------------------------------------------------------------
    def stimuli(self, trials: Trials, row: int) -> tuple[list[int], list[int], list[int]]:
        """([query, *references], references, choices as reference positions) of trial `row` of `trials`."""
        refs = trial_references(trials, row)
        return [int(trials.query[row]), *refs], refs, trial_choices(trials, row)

    def highlight(self) -> tuple[int, list[int], list[int]] | None:
        """(query, picked references, references) of the trial on show, for the embedding's view (None: none)."""
        if self.trial < 0 or not self.trial_shown or self.trialset is None:
            return None
        stimuli, refs, choices = self.stimuli(self.trialset.trials, self.trial)
        return stimuli[0], [refs[c] for c in choices], refs

    def sheet_titles(self, rows: list[int], index: int, metric: str) -> list[str]:
        """Each sheet trial's title: its number and, with a model row selected, its agreement k/13."""
        scores = self.selected(index)
        titles = []
        for t in rows:
            title = f"trial {t + 1}"
            if scores is not None:
                a = scores.agreement[metric]
                title += f" · {a.per_trial_correct[t]}/{a.per_trial_total[t]} ({scores.name}, {metric})"
            titles.append(title)
        return titles

    def trial_items(self, query: str) -> list[tuple[str, int]]:
        """('Trial N', row) for each number in `query` that names a trial (the command palette's)."""
        n = 0 if self.trialset is None else len(self.trialset.trials)
        return [(f"Trial {w}", int(w) - 1) for w in query.split() if w.isdigit() and 1 <= int(w) <= n]
