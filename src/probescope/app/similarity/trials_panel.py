"""The Similarity workspace's trial list with its filters: session grade, catch trials, query class, agreement with
the selected model, kept by quality control, and one query stimulus (set by clicking a reference)."""

from __future__ import annotations

from PySide6.QtCore import Signal
from PySide6.QtWidgets import QCheckBox, QComboBox, QFormLayout, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from probescope.jobs.similarity.trials import CATCH_CLASSES, GRADE_CLASSES, ListFilter
from probescope.widgets.controls import spin_box
from probescope.widgets.similarity.tables import TrialList

ALL = "all"


class TrialsPanel(QWidget):
    """`changed()` when a filter changes; `query_cleared()` when the one-query filter is switched off."""

    changed = Signal()
    query_cleared = Signal()

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.grade_filter = QComboBox()
        self.grade_filter.addItems([ALL, *GRADE_CLASSES])
        self.catch_filter = QComboBox()
        self.catch_filter.addItems([ALL, *CATCH_CLASSES])
        self.class_filter = QComboBox()
        self.class_filter.addItem(ALL)
        self.agree_min = spin_box(0, 99, 0)
        self.agree_max = spin_box(0, 99, 99)
        self.kept_only = QCheckBox("kept by quality control only")
        self.query_button = QPushButton()
        self.query_button.setToolTip("listing only the trials of one query stimulus: click to list all")
        self.query_button.hide()
        self.count = QLabel()
        self.trial_list = TrialList()
        form = QFormLayout()
        form.addRow("grade", self.grade_filter)
        form.addRow("catch", self.catch_filter)
        form.addRow("query class", self.class_filter)
        agree = QHBoxLayout()
        agree.addWidget(self.agree_min)
        agree.addWidget(QLabel("to"))
        agree.addWidget(self.agree_max)
        form.addRow("agreement", agree)
        form.addRow(self.kept_only)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addLayout(form)
        layout.addWidget(self.query_button)
        layout.addWidget(self.count)
        layout.addWidget(self.trial_list, 1)
        for combo in (self.grade_filter, self.catch_filter, self.class_filter):
            combo.currentIndexChanged.connect(self.changed)
        for spin in (self.agree_min, self.agree_max):
            spin.valueChanged.connect(self.changed)
        self.kept_only.toggled.connect(self.changed)
        self.query_button.clicked.connect(self.query_cleared)

    def clear(self) -> None:
        """Every trial listed again (the one-query filter is the workspace's)."""
        for box in (self.grade_filter, self.catch_filter, self.class_filter):
            box.setCurrentIndex(0)
        self.agree_min.setValue(0)
        self.agree_max.setValue(self.agree_max.maximum())
        self.kept_only.setChecked(False)

    def set_classes(self, classes: list[str]) -> None:
        self.class_filter.blockSignals(True)
        self.class_filter.clear()
        self.class_filter.addItems([ALL, *classes])
        self.class_filter.blockSignals(False)

    def rule(self, query: int, with_agreement: bool) -> ListFilter:
        """The list's filters; `query` the one query stimulus listed (-1: any)."""
        cls = self.class_filter.currentText()
        return ListFilter(
            grade=self.grade_filter.currentText(), catch=self.catch_filter.currentText(),
            query_class="" if cls == ALL else cls, kept_only=self.kept_only.isChecked(), query=query,
            agreement=(self.agree_min.value(), self.agree_max.value()) if with_agreement else None)

    def show_query(self, name: str | None) -> None:
        """The one-query filter's button: `name` of the query listed, None when every query is."""
        if name is not None:
            self.query_button.setText(f"query = {name}   ✕")
        self.query_button.setVisible(name is not None)

    def set_agreement_total(self, total: int | None) -> None:
        """The agreement filter's range: 0..total triplets per trial (None: no model selected)."""
        top = max(total if total is not None else 99, 1)
        self.agree_max.setMaximum(top)
        self.agree_min.setMaximum(top)
        if total is not None and self.agree_max.value() > total:
            self.agree_max.setValue(total)
