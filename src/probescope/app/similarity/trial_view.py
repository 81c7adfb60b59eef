"""One trial as the participant saw it (the query in the middle of a 3x3 grid, the picks marked), with the selected
model's view laid over it: each reference's rank by the chosen distance, the trial's triplet agreement (k of 13) and
the references of the triplets the model gets wrong, in red."""

from __future__ import annotations

import numpy as np
from PySide6.QtCore import QEvent, Qt
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QScrollArea, QVBoxLayout, QWidget

from probescope.jobs.similarity.scores import Scores
from probescope.jobs.similarity.trials import TrialSet, model_ranks, n_references, wrong_triplets
from probescope.widgets.ink import InkLabel, inked
from probescope.widgets.similarity.trial_grid import ModelView, TrialGrid

CELL = 124


class TrialView(QWidget):
    """The model chooser and distance over the trial; `trial` (what 'Trial' exports) holds caption, grid, summary."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._shown: tuple[Scores | None, TrialSet | None, int] | None = None  # what the model view shows
        self.model = QComboBox()
        self.model.setMinimumContentsLength(16)
        self.distance = QComboBox()
        self.distance.addItems(["cosine", "l2", "l1"])
        bar = QHBoxLayout()
        bar.addWidget(QLabel("model view"))
        bar.addWidget(self.model, 1)
        bar.addWidget(QLabel("distance"))
        bar.addWidget(self.distance)
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.grid = TrialGrid(CELL)
        self.summary = InkLabel()
        self.summary.setWordWrap(True)
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.trial = QWidget()
        trial_layout = QVBoxLayout(self.trial)
        trial_layout.addWidget(self.caption)
        trial_layout.addWidget(self.grid)
        trial_layout.addWidget(self.summary)
        trial_layout.addStretch(1)
        self.scroll = QScrollArea()
        self.scroll.setWidget(self.trial)
        self.scroll.setWidgetResizable(True)
        self.scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(bar)
        layout.addWidget(self.scroll, 1)

    def set_models(self, names: list[str], wanted: str) -> None:
        """The model rows to choose from, `wanted` (or the last) selected, without signalling a change."""
        current = wanted or self.model.currentText()
        self.model.blockSignals(True)
        self.model.clear()
        self.model.addItems(names)
        index = self.model.findText(current)
        self.model.setCurrentIndex(index if index >= 0 else len(names) - 1)
        self.model.blockSignals(False)

    def describe(self, ts: TrialSet, t: int, label: str, simulated: bool) -> None:
        """The caption: which trial, its session and grade, catch result, response time, kept or dropped."""
        grade = ts.session_grade[t]
        parts = [f"{label}: trial {t + 1} of {len(ts.trials)}", f"session {ts.trials.session[t]}"
                 + ("" if np.isnan(grade) else f" (grade {grade:.3f})")]
        if ts.catch_position[t] >= 0:
            result = {1.0: "picked first", 0.5: "picked second", 0.0: "missed"}[float(ts.catch_grade[t])]
            parts.append(f"catch trial: the mirrored query is reference {ts.catch_position[t] + 1}, {result}")
        rt = ts.trials.rt_ms[t]
        if np.isfinite(rt):
            parts.append(f"{rt / 1000:.1f} s")
        parts.append("kept" if ts.kept_mask[t] else "dropped by quality control")
        self.caption.setText(", ".join(parts) + (" — SIMULATED" if simulated else ""))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802  (Qt override)
        """A new palette (a theme, or a figure's paper colours): the disagreements in its shade of red."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self._shown is not None:
            self.show_model_view(*self._shown)

    def show_model_view(self, scores: Scores | None, ts: TrialSet | None, t: int) -> None:
        """The selected model's ranks and disagreements over trial `t` (nothing when there is no model or trial)."""
        self._shown = (scores, ts, t)
        if scores is None or t < 0 or ts is None:
            self.grid.set_model_view(None)
            self.summary.setText("")
            return
        metric = self.distance.currentText()
        trials = ts.trials
        distance = scores.distances[metric][t]
        n_ref = n_references(trials, t)
        agreement = scores.agreement[metric]
        wrong = wrong_triplets(trials, t, distance)
        view = ModelView(scores.name, tuple(model_ranks(distance, n_ref)), tuple(distance[:n_ref].tolist()),
                         tuple(wrong), int(agreement.per_trial_correct[t]), int(agreement.per_trial_total[t]))
        self.grid.set_model_view(view)
        how = "expected similarity" if scores.kind == "embedding" else f"{metric} distance"
        text = (f"<b>{scores.name}</b> ({how}): <b>{view.correct} of {view.total}</b> triplets agree with the "
                "participant")
        if wrong:
            names = self.grid.captions()
            items = [f"ref {a + 1} ({_short(names[a])}) closer than ref {b + 1} ({_short(names[b])})"
                     for a, b in wrong]
            text += "<br>" + inked("warning", "Disagreeing triplets (participant's order): " + "; ".join(items))
        self.summary.setText(text)


def _short(caption: str) -> str:
    return caption.split(" · ", 1)[-1]
