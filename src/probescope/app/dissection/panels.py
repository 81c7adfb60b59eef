"""Control panels of the Dissection workspace: the unit filters, the unit view's display controls, the runs panel
(settings to re-run with, progress and cancel, the kept results to switch between, result export) and the batch
panel (the jobs of a batch output folder, to browse)."""

from __future__ import annotations

import time

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDoubleSpinBox,
    QGridLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QSlider,
    QVBoxLayout,
    QWidget,
)

from probescope.app.dissection.overlays import OverlayOptions
from probescope.app.dissection.settings_form import SettingsForm
from probescope.core.dissection.settings import DissectionSettings
from probescope.jobs.dissection.rows import INTERPRETABLE_IOU, METHOD_NAMES, METHODS
from probescope.jobs.dissection.saved_layers import JOB_COLUMNS, JOB_LEGEND, BatchView, job_cells
from probescope.widgets.controls import spin_box
from probescope.widgets.dissection.table import UnitTable
from probescope.widgets.identifiers import whole_items
from probescope.widgets.ink import InkLabel, inked
from probescope.widgets.plots_bars import ClassBars

ALL = "all categories"
MAX_JOB_ROWS = 16  # the batch table's height grows with its jobs up to this many rows, then scrolls
TOP, PRESENT = "top-activating images", "explanation present"  # (short: the box shows them whole; see MODE_TIPS)
MODE_TIPS = ("the images the unit fires most on", "images where the explanation is present, whether or not the unit "
             "fires there")


class FilterBar(QWidget):
    """Search by concept name, category, interpretable (IoU above a threshold), specialised; `changed` on edits."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.search = QLineEdit()
        self.search.setPlaceholderText("search concepts…")
        self.search.setClearButtonEnabled(True)
        self.category = whole_items(QComboBox())  # (the dataset's categories come later)
        self.category.addItem(ALL)
        self.interpretable = QCheckBox("interpretable, IoU >")
        self.iou_min = QDoubleSpinBox()
        self.iou_min.setRange(0.0, 1.0)
        self.iou_min.setDecimals(3)
        self.iou_min.setSingleStep(0.01)
        self.iou_min.setValue(INTERPRETABLE_IOU)
        self.specialised = QCheckBox("specialised")
        self.specialised.setToolTip("da-stop keeps one concept while the IoU search's explanation is longer")
        self.hide_ties = QCheckBox("hide dead")
        self.hide_ties.setToolTip("hide units whose threshold T sits at a tie (a dead unit, almost always 0: its mask "
                                  "A >= T holds far more than the top quantile, often every pixel)")
        top = QHBoxLayout()
        top.setContentsMargins(0, 0, 0, 0)
        top.addWidget(self.search, 2)
        top.addWidget(self.category, 1)
        bottom = QHBoxLayout()
        bottom.setContentsMargins(0, 0, 0, 0)
        bottom.addWidget(self.interpretable)
        bottom.addWidget(self.iou_min)
        bottom.addWidget(self.specialised)
        bottom.addWidget(self.hide_ties)
        bottom.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(top)
        layout.addLayout(bottom)
        self.search.textChanged.connect(self.changed)
        self.category.currentTextChanged.connect(self.changed)
        for box in (self.interpretable, self.specialised, self.hide_ties):
            box.toggled.connect(self.changed)
        self.iou_min.valueChanged.connect(self.changed)

    def clear(self) -> None:
        """Every unit listed again."""
        self.search.clear()
        self.category.setCurrentText(ALL)
        self.interpretable.setChecked(False)
        self.specialised.setChecked(False)
        self.hide_ties.setChecked(False)

    def set_categories(self, categories: list[str]) -> None:
        current = self.category.currentText()
        self.category.blockSignals(True)
        self.category.clear()
        self.category.addItems([ALL, *categories])
        self.category.setCurrentText(current if current in categories else ALL)
        self.category.blockSignals(False)


class UnitControls(QWidget):
    """Which explanation to overlay, how many images, opacity, display threshold and which images to show."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.explanation = QComboBox()
        for m in METHODS:
            self.explanation.addItem(METHOD_NAMES[m], m)
        self.explanation.setCurrentIndex(METHODS.index("iou"))
        self.k = spin_box(1, 64, 12)
        self.k.setPrefix("top ")
        self.opacity = QSlider(Qt.Orientation.Horizontal)
        self.opacity.setRange(0, 100)
        self.opacity.setValue(55)
        self.threshold = QSlider(Qt.Orientation.Horizontal)
        self.threshold.setRange(25, 200)
        self.threshold.setValue(100)
        self.threshold.setToolTip("display threshold, in % of the unit's threshold T (100% = the dissection's mask)")
        self.mode = whole_items(QComboBox())
        for k, (text, tip) in enumerate(zip((TOP, PRESENT), MODE_TIPS, strict=True)):
            self.mode.addItem(text)
            self.mode.setItemData(k, tip, Qt.ItemDataRole.ToolTipRole)
        whole_items(self.explanation)  # (a trace formula is named by its place: the caption shows it whole)
        for s in (self.opacity, self.threshold):
            s.setMinimumWidth(70)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        for widgets in ((("overlay", self.explanation), ("show", self.mode)),
                        (("", self.k), ("opacity", self.opacity), ("display threshold", self.threshold))):
            row = QHBoxLayout()
            for text, widget in widgets:
                if text:
                    row.addWidget(QLabel(text))
                row.addWidget(widget, 1)
            layout.addLayout(row)
        self.explanation.currentIndexChanged.connect(self.changed)
        self.mode.currentIndexChanged.connect(self.changed)
        self.k.valueChanged.connect(self.changed)
        for s in (self.opacity, self.threshold):
            s.sliderReleased.connect(self.changed)
            s.valueChanged.connect(lambda _v, s=s: None if s.isSliderDown() else self.changed.emit())

    def method(self) -> str:
        """One of METHODS, or 'trace' while a formula clicked in the beam trace is shown."""
        return str(self.explanation.currentData())

    def show_trace_formula(self, label: str, step: int, position: int) -> None:
        """Name a formula clicked in the beam trace as what the overlays show (without signalling a change): by its
        place in the trace, short, since a formula is never cut; the formula itself is the item's tooltip and the
        caption over the images shows it whole."""
        index = self.explanation.findData("trace")
        if index < 0:
            self.explanation.addItem("", "trace")
            index = self.explanation.count() - 1
        self.explanation.setItemText(index, f"trace: step {step + 1}, #{position + 1}")
        self.explanation.setItemData(index, label, Qt.ItemDataRole.ToolTipRole)
        self.explanation.blockSignals(True)
        self.explanation.setCurrentIndex(index)
        self.explanation.blockSignals(False)

    def forget_trace_formula(self) -> None:
        """Back to the methods only (a new unit, or a method chosen)."""
        index = self.explanation.findData("trace")
        if index >= 0:
            self.explanation.blockSignals(True)
            if self.explanation.currentIndex() == index:
                self.explanation.setCurrentIndex(METHODS.index("iou"))
            self.explanation.removeItem(index)
            self.explanation.blockSignals(False)

    def present(self) -> bool:
        return self.mode.currentText() == PRESENT

    def options(self) -> OverlayOptions:
        return OverlayOptions(opacity=self.opacity.value() / 100, display_threshold=self.threshold.value() / 100)


class RunsPanel(QWidget):
    """Settings to dissect with, starting at `settings`; `run_requested(settings)`, `cancel_requested()`,
    `run_chosen(key)`, `export_requested(kind)` with kind 'tally' or 'json'."""

    run_requested = Signal(object)
    cancel_requested = Signal()
    run_chosen = Signal(str)
    export_requested = Signal(str)

    def __init__(self, settings: DissectionSettings, parent: QWidget | None = None):
        super().__init__(parent)
        self.form = SettingsForm(settings)
        self.fields, self.search_boxes = self.form.fields, self.form.search_boxes
        self.run = QPushButton("Dissect with these settings")
        self.cancel = QPushButton("Cancel")
        self.cancel.setEnabled(False)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.runs = QComboBox()  # (its items are whole settings labels: elided in a narrow panel, whole in the list)
        self.runs.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.runs.setMinimumContentsLength(20)
        self.tally = QPushButton("Export tally.csv…")
        self.json = QPushButton("Export results (JSON)…")
        buttons = QHBoxLayout()
        buttons.addWidget(self.run)
        buttons.addWidget(self.cancel)
        exports = QHBoxLayout()
        exports.addWidget(self.tally)
        exports.addWidget(self.json)
        layout = QVBoxLayout(self)
        layout.addWidget(QLabel("<b>Dissection settings</b>"))
        layout.addWidget(self.form)
        layout.addLayout(buttons)
        layout.addWidget(self.status)
        layout.addWidget(QLabel("<b>Results kept</b> (switch between settings)"))
        layout.addWidget(self.runs)
        layout.addLayout(exports)
        layout.addStretch(1)
        self.run.clicked.connect(self.form.request_run)
        self.form.run_requested.connect(self.run_requested)  # (signal to signal: the form's settings, as they are)
        self.cancel.clicked.connect(self.cancel_requested)
        self.runs.activated.connect(lambda i: self.run_chosen.emit(str(self.runs.itemData(i))))
        self.tally.clicked.connect(lambda: self.export_requested.emit("tally"))
        self.json.clicked.connect(lambda: self.export_requested.emit("json"))

    def settings(self) -> DissectionSettings:
        """The settings shown last, with the fields' values (the settings this panel has no field for stay)."""
        return self.form.settings()

    def restore(self, s: DissectionSettings) -> None:
        """The form takes back `s`, the settings of a result the user returned to: a kept result chosen in this
        panel's list, or the result a cancelled run gives back (Cancel undoes the run, its settings included). The
        one way settings reach the form other than the user's own edits; a run's settings are never written back."""
        self.form.show_settings(s)

    def set_runs(self, runs: list[tuple[str, str]], current: str) -> None:
        """(key, label) of every kept result; `current` is shown selected."""
        self.runs.blockSignals(True)
        self.runs.clear()
        for key, label in runs:
            self.runs.addItem(label, key)
        self.runs.setCurrentIndex(max(0, [k for k, _ in runs].index(current) if current in dict(runs) else 0))
        self.runs.blockSignals(False)

    def set_running(self, running: bool, message: str = "") -> None:
        self.cancel.setEnabled(running)
        self.run.setEnabled(True)
        self.status.setText(message)

    def set_saved(self, message: str) -> None:
        """A saved result is shown (a batch job): it is not re-dissected from here; `message` says why and how."""
        self.cancel.setEnabled(False)
        self.run.setEnabled(False)
        self.status.setText(message)


class BatchPanel(QWidget):
    """The jobs of a batch output folder: state and summary per (model, layer), and the distinct concepts of each
    merged layer as bars. `open_requested()`, `reload_requested()`, `live_requested()`, `job_chosen(number)`."""

    open_requested = Signal()
    reload_requested = Signal()
    live_requested = Signal()
    job_chosen = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.caption = InkLabel("<b>Batch</b>: open the output folder of <code>probescope batch</code> to browse every "
                              "model and layer it dissected.")
        self.caption.setWordWrap(True)
        self.caption.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.open = QPushButton("Open Batch Folder…")
        self.reload = QPushButton("Reload")
        self.live = QPushButton("Show the Loaded Model")
        self.live.setToolTip("back to the dissection of the loaded model's layer")
        self.message = QLabel()
        self.message.setWordWrap(True)
        self.jobs = UnitTable(header_room=0)  # compact: a whole row fits the pane
        self.jobs.setToolTip("click a merged layer to browse its units")
        legend = QLabel(f"<small>{JOB_LEGEND}</small>")
        legend.setWordWrap(True)
        self.concepts = ClassBars(f"Distinct concepts of the interpretable units (IoU > {INTERPRETABLE_IOU:g})")
        buttons = QGridLayout()  # two columns: a narrow panel squeezed three in a row
        for k, b in enumerate((self.open, self.reload, self.live)):
            buttons.addWidget(b, k // 2, k % 2)
        buttons.setColumnStretch(2, 1)
        layout = QVBoxLayout(self)
        layout.addWidget(self.caption)
        layout.addLayout(buttons)
        layout.addWidget(self.message)
        layout.addWidget(self.jobs)
        layout.addWidget(legend)
        layout.addWidget(self.concepts)
        layout.addStretch(1)
        self.reload.setEnabled(False)
        self.open.clicked.connect(self.open_requested)
        self.reload.clicked.connect(self.reload_requested)
        self.live.clicked.connect(self.live_requested)
        self.jobs.unit_changed.connect(self.job_chosen)
        self.jobs.clicked.connect(lambda index: self.job_chosen.emit(int(self.jobs.value(index.row(), 0))))

    def show_batch(self, view: BatchView) -> None:
        o = view.overview
        age = max(0.0, time.time() - o.updated)
        when = f"{age:.0f} s" if age < 120 else f"{age / 60:.0f} min" if age < 7200 else f"{age / 3600:.0f} h"
        merged = sum(c is not None for c in view.counts)
        error = "<br>" + inked("warning", o.error) if o.error else ""
        self.caption.setText(f"<b>Batch {o.folder.name}</b>: {o.state}, {o.chunks_done}/{o.chunks_total} chunks, "
                             f"{merged} of {len(o.jobs)} layers merged; status written {when} ago<br>"
                             f"<small>{o.folder.resolve()}</small>{error}")
        self.reload.setEnabled(True)
        first = self.jobs.rowCount() == 0
        self.jobs.set_rows(JOB_COLUMNS, [job_cells(view, k) for k in range(len(o.jobs))])
        if first:
            self.jobs.sortByColumn(0, Qt.SortOrder.AscendingOrder)  # manifest order
        self.jobs.setColumnHidden(0, True)  # the job number: the rows' key, and their order until sorted otherwise
        rows = min(len(o.jobs), MAX_JOB_ROWS)
        self.jobs.setFixedHeight(self.jobs.horizontalHeader().height() + rows * self.jobs.verticalHeader()
                                 .defaultSectionSize() + self.jobs.horizontalScrollBar().sizeHint().height() + 4)
        shown = [(f"{j.model} / {j.layer}", len(c.concepts)) for j, c in zip(o.jobs, view.counts) if c is not None]
        self.concepts.set_bars([n for n, _ in shown], [v for _, v in shown], value_format=".0f")

    def select_job(self, number: int) -> None:
        self.jobs.select_unit(number, emit=False)
