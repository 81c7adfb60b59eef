"""The right-hand panels of the Similarity workspace: model table, embedding, data quality, active learning.

Each panel lays out widgets and turns the user's choices into signals; the workspace runs the work and hands the
results back (`show_*`).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QFileDialog,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QLabel,
    QListWidget,
    QPushButton,
    QSplitter,
    QVBoxLayout,
    QWidget,
)

from probescope.core.atomic import write_text
from probescope.core.similarity.quality import PREMIUM, SATISFACTORY
from probescope.core.similarity.settings import (
    WINDOW_COUNTS,
    WINDOW_DIMS,
    WINDOW_MEMBERS,
    WINDOW_PROPOSAL,
    EmbeddingSettings,
    Filters,
    dims_span,
)
from probescope.jobs.similarity.embedding import Convergence
from probescope.jobs.similarity.propose import save_proposal
from probescope.jobs.similarity.scores import Scores
from probescope.jobs.similarity.trials import TrialSet
from probescope.widgets.controls import spin_box
from probescope.widgets.plots_line import LinePlot
from probescope.widgets.similarity.plots import BarChart, EmbeddingView
from probescope.widgets.similarity.tables import ModelRow, ModelTable

GRADE_BINS = np.linspace(0.0, 1.0, 9)  # catch grades come in eighths for sessions of 4 catch trials (1, .5, 0)
PLOT_HEIGHT = 150  # pixels at least for the embedding panel's loss and convergence plots (ticks clear of labels)


class ModelsPanel(QWidget):
    """The model table, and a layer of the loaded model to add as a row (`add_requested(layer, pool)`): its
    features are the mean over the layer's positions (a ViT layer's patch tokens) or, for a token layer, its class
    token."""

    add_requested = Signal(str, str)
    FEATURES = (("mean", "avg"), ("class token", "cls"))

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.table = ModelTable()
        self.layer = QComboBox()
        self.layer.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.layer.setMinimumContentsLength(12)  # a ViT's layer names are long: the box grows with the panel
        self.feature = QComboBox()
        for label, pool in self.FEATURES:
            self.feature.addItem(label, pool)
        self.feature.setToolTip("a layer's feature per stimulus: the mean over its positions (a ViT's patch tokens), "
                                "or a ViT layer's class token")
        self.add_button = QPushButton("Add layer")
        self.add_button.setToolTip("compute this layer's features for every stimulus and add a row")
        self.save_csv = QPushButton("Save CSV…")
        self.note = QLabel("Triplet accuracy on the trials quality control keeps (ties count as wrong); Spearman "
                           "between the model's similarity and the embedding's expected similarity over all "
                           "stimulus pairs, mirrored catch images left out. Open another model (File > Open Model) "
                           "to add its default layer.")
        self.note.setWordWrap(True)
        self.save_csv.clicked.connect(lambda: ask_path(self, "Save the model table", "models.csv", self.save))
        bar = QHBoxLayout()
        bar.addWidget(QLabel("layer"))
        bar.addWidget(self.layer, 1)
        bar.addWidget(self.feature)
        buttons = QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.add_button)
        buttons.addWidget(self.save_csv)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table, 1)
        layout.addLayout(bar)
        layout.addLayout(buttons)
        layout.addWidget(self.note)
        self.add_button.clicked.connect(lambda: self.layer.currentText() and self.add_requested.emit(
            self.layer.currentText(), self.feature.currentData()))

    def set_layers(self, layers: list[str], current: str | None) -> None:
        self.layer.clear()
        self.layer.addItems(layers)
        if current in layers:
            self.layer.setCurrentText(current)

    def save(self, path: str | Path) -> Path:
        """The model table as CSV, written atomically."""
        write_text(path, self.table.csv_text())
        return Path(path)

    def show_scores(self, scores: list[Scores]) -> None:
        rows = []
        for s in scores:
            rows.append(ModelRow(s.name, s.accuracy["l1"], s.accuracy["l2"], s.accuracy["cosine"],
                                 s.spearman.get("dot"), s.spearman.get("cosine"), s.kind == "embedding"))
        self.table.set_rows(rows)


class EmbeddingPanel(QWidget):
    """The embedding's 2-D view, its convergence plots, and the refit controls (`refit_requested(dims, members,
    warm)`)."""

    refit_requested = Signal(list, int, bool)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.view = EmbeddingView()
        self.info = QLabel("Fitting a quick embedding…")
        self.info.setWordWrap(True)
        self.dims_plot = BarChart("Held-out loss by dimensions", "nats per trial", "dimensions")
        self.convergence_plot = LinePlot("Convergence across fits", "value", "fit")
        refit = EmbeddingSettings()  # the command line's defaults, in the window's ranges
        low, high = dims_span(refit.dims)
        self.dims_min = spin_box(int(WINDOW_DIMS.low), int(WINDOW_DIMS.high), low)
        self.dims_max = spin_box(int(WINDOW_DIMS.low), int(WINDOW_DIMS.high), high)
        self.members = spin_box(int(WINDOW_MEMBERS.low), int(WINDOW_MEMBERS.high), refit.ensemble)
        self.warm = QCheckBox("resume current fit")
        self.warm.setToolTip("warm-start from the current embedding: its two best members resume, the worst restarts; "
                             "only its dimensionality is fitted")
        self.refit_button = QPushButton("Refit")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.coarse_name = ""
        controls = QHBoxLayout()
        controls.addWidget(QLabel("refit: dims"))
        controls.addWidget(self.dims_min)
        controls.addWidget(QLabel("to"))
        controls.addWidget(self.dims_max)
        controls.addWidget(QLabel("members"))
        controls.addWidget(self.members)
        controls.addStretch(1)
        buttons = QHBoxLayout()
        buttons.addWidget(self.warm)
        buttons.addStretch(1)
        buttons.addWidget(self.refit_button)
        buttons.addWidget(self.cancel_button)
        self.view.setMinimumHeight(PLOT_HEIGHT * 4 // 5)
        for plot in (self.dims_plot, self.convergence_plot):  # (below this their ticks ran into their labels; a
            plot.setMinimumHeight(PLOT_HEIGHT)  # short panel scrolls instead)
        plots = QSplitter(Qt.Orientation.Horizontal)
        plots.addWidget(self.dims_plot)
        plots.addWidget(self.convergence_plot)
        split = QSplitter(Qt.Orientation.Vertical)
        split.addWidget(self.view)
        split.addWidget(plots)
        split.setSizes([420, 200])
        layout = QVBoxLayout(self)
        layout.addWidget(self.info)
        layout.addWidget(split, 1)
        layout.addLayout(controls)
        layout.addLayout(buttons)
        self.refit_button.clicked.connect(self._refit)

    def _refit(self) -> None:
        low, high = sorted((self.dims_min.value(), self.dims_max.value()))
        self.refit_requested.emit(list(range(low, high + 1)), self.members.value(), self.warm.isChecked())

    def set_running(self, running: bool) -> None:
        self.refit_button.setEnabled(not running)
        self.cancel_button.setEnabled(running)
        if running:
            self.info.setText("Refitting the embedding (progress in the status bar)…")

    def show_embedding(self, xy: np.ndarray, how: str, history: list[Convergence], coarse_name: str,
                       name_of: Callable[[int], str] | None = None) -> None:
        self.coarse_name = coarse_name
        self.view.set_points(xy, "Psychological embedding (hover a point for its image)", name_of=name_of)
        last = history[-1]
        parts = [how, f"fitted on {last.n_trials} trials", f"within-ensemble correlation {last.within:.3f}"]
        if last.coarse_loss is not None:
            parts.append(f"coarse-grained loss {last.coarse_loss:.3f} nats ({coarse_name})")
        if last.consecutive is not None:
            parts.append(f"correlation with the previous fit {last.consecutive:.3f}")
        self.info.setText("; ".join(parts))
        dims = sorted(last.dims_loss)
        self.dims_plot.set_bars([str(d) for d in dims], [last.dims_loss[d] for d in dims],
                                ["#27ae60" if d == last.dims else "#95a5a6" for d in dims])
        x = list(range(1, len(history) + 1))
        self.convergence_plot.set_series({
            "within-ensemble r": (x, [h.within for h in history]),
            "coarse-grained loss": (x, [h.coarse_loss for h in history]),
            "consecutive-fit r": (x, [h.consecutive for h in history]),
        })


class QualityPanel(QWidget):
    """Session grades, catch-trial results, what each filter drops; the filters as switches (`filters_changed`)."""

    filters_changed = Signal(object)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.catch = QCheckBox("drop catch trials")
        self.grade = QCheckBox(f"drop sessions graded < {SATISFACTORY}, weight trials by grade")
        self.grade.setToolTip(f"drop unsatisfactory sessions (grade < {SATISFACTORY}) and weight the other trials "
                              "by their session's grade")
        self.rt = QCheckBox("drop trials answered in under 1 s")
        switches = QGroupBox("Filters, applied in this order")
        switches.setToolTip("each trial is counted under the first filter that drops it")
        box = QVBoxLayout(switches)
        for check in (self.catch, self.grade, self.rt):
            check.setChecked(True)
            box.addWidget(check)
            check.toggled.connect(self._changed)
        self.counts = QLabel()
        self.counts.setWordWrap(True)
        self.grades_plot = BarChart("Session grades", "sessions", "mean catch grade")
        self.catch_plot = BarChart("Catch trials: the mirrored query was…", "trials")
        plots = QHBoxLayout()
        plots.addWidget(self.grades_plot)
        plots.addWidget(self.catch_plot)
        layout = QVBoxLayout(self)
        layout.addWidget(switches)
        layout.addWidget(self.counts)
        layout.addLayout(plots, 1)

    def filters(self) -> Filters:
        return Filters(self.catch.isChecked(), self.grade.isChecked(), self.rt.isChecked())

    def _changed(self) -> None:
        self.filters_changed.emit(self.filters())

    def show_report(self, trialset: TrialSet, simulated: bool) -> None:
        report = trialset.report
        dropped = report.dropped
        self.counts.setText(
            ("SIMULATED judgments. " if simulated else "")
            + f"{report.kept} of {len(trialset.trials)} trials kept. Dropped: catch trials {dropped['catch']}, "
            f"unsatisfactory sessions {dropped['grade']}, under 1 s {dropped['rt']}. Sessions: "
            + ", ".join(f"{k} {v}" for k, v in report.sessions.items()) + f". Catch trials: {report.catch_trials}.")
        grades = np.array(list(report.grades.values()), dtype=np.float64)
        labels = [f"{g:.2g}" if g * 4 == round(g * 4) else "" for g in GRADE_BINS]  # eighths: label every other
        counts = [int(np.isclose(grades, g).sum()) for g in GRADE_BINS]
        colors = ["#27ae60" if g > PREMIUM else "#f39c12" if g >= SATISFACTORY else "#c0392b" for g in GRADE_BINS]
        other = len(grades) - sum(counts)  # grades off the eighths (files that give their own)
        if other:
            labels.append("other")
            counts.append(other)
            colors.append("#7f8c8d")
        self.grades_plot.set_bars(labels, counts, colors)
        catch = trialset.catch_grade[~np.isnan(trialset.catch_grade)]
        self.catch_plot.set_bars(["picked 1st", "picked 2nd", "missed"],
                                 [int((catch == 1).sum()), int((catch == 0.5).sum()), int((catch == 0).sum())],
                                 ["#27ae60", "#f39c12", "#c0392b"])


class ActivePanel(QWidget):
    """Propose the next batch (`propose_requested(queries, candidates)`), list the top candidates, save them."""

    propose_requested = Signal(int, int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        counts = int(WINDOW_COUNTS.low), int(WINDOW_COUNTS.high)
        self.queries = spin_box(*counts, WINDOW_PROPOSAL.queries)
        self.n_candidates = spin_box(*counts, WINDOW_PROPOSAL.candidates)
        self.propose_button = QPushButton("Propose")
        self.propose_button.setEnabled(False)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setEnabled(False)
        self.save_button = QPushButton("Save CSV…")
        self.save_button.setEnabled(False)
        self.save_button.clicked.connect(lambda: ask_path(self, "Save proposed trials", "proposal.csv", self.save))
        self.status = QLabel("Needs the embedding.")
        self.status.setWordWrap(True)
        self.candidates = QListWidget()
        form = QFormLayout()
        form.addRow("queries", self.queries)
        form.addRow("candidates per query", self.n_candidates)
        buttons = QHBoxLayout()
        buttons.addWidget(self.propose_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.save_button)
        buttons.addStretch(1)
        layout = QVBoxLayout(self)
        layout.addLayout(form)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        top = QLabel("Top candidates by expected information gain (select one to see it in the grid):")
        top.setWordWrap(True)
        layout.addWidget(top)
        layout.addWidget(self.candidates, 1)
        self.proposal = None
        self.order = np.empty(0, dtype=np.int64)
        self._simulated = False
        self.propose_button.clicked.connect(lambda: self.propose_requested.emit(self.queries.value(),
                                                                                self.n_candidates.value()))

    def set_simulated(self, simulated: bool) -> None:
        self._simulated = simulated

    def set_ready(self, ready: bool) -> None:
        self.propose_button.setEnabled(ready)
        if ready and self.proposal is None:
            self.status.setText("Ready: proposes trials from the current embedding.")

    def set_running(self, running: bool) -> None:
        self.propose_button.setEnabled(not running and self.status.text() != "Needs the embedding.")
        self.cancel_button.setEnabled(running)

    def save(self, path: str | Path) -> Path:
        """The proposed trials as a trials CSV (probescope's judgments format, unanswered)."""
        save_proposal(path, self.proposal)
        self.status.setText(f"Saved {len(self.proposal.trials)} trials to {path}")
        return Path(path)

    def show_proposal(self, proposal, name: Callable[[int], str]) -> None:
        self.proposal = proposal
        self.order = np.argsort(-proposal.info_gain, kind="stable")
        self.candidates.clear()
        for i in self.order:
            self.candidates.addItem(f"{proposal.info_gain[i]:.4f} nats · {proposal.kind[i]} · query "
                                    f"{name(int(proposal.trials.query[i]))}")
        active = proposal.kind == "active"
        self.status.setText(f"{len(proposal.trials)} trials proposed ({int(active.sum())} active, "
                            f"{int((~active).sum())} confirmation); mean information gain "
                            f"{proposal.info_gain[active].mean():.4f} nats (active)"
                            + (" — from an embedding of SIMULATED judgments" if self._simulated else ""))
        self.save_button.setEnabled(True)


def ask_path(parent: QWidget, title: str, name: str, save: Callable[[str], object]) -> None:
    """Ask where to save a CSV (suggesting `name`) and `save` there."""
    path, _ = QFileDialog.getSaveFileName(parent, title, name, "CSV (*.csv)")
    if path:
        save(path)
