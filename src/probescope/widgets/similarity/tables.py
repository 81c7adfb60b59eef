"""Tables of the Similarity workspace: the list of trials (filtered and sorted in numpy, so 400,000 trials stay
responsive) and the model table (triplet accuracy per distance, Spearman with the psychological embedding)."""

from __future__ import annotations

import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from PySide6.QtCore import QAbstractTableModel, QModelIndex, QPersistentModelIndex, Qt
from PySide6.QtGui import QBrush
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QTableWidget, QTableWidgetItem, QWidget

from probescope.widgets.identifiers import declare_identifiers
from probescope.widgets.ink import ink_color

TRIAL_COLUMNS = ("#", "session", "grade", "catch", "agree", "QC", "query")
AGREE, QC, QUERY = 4, 5, 6
CATCH_TEXT = {1.0: "1st", 0.5: "2nd", 0.0: "missed"}


@dataclass(frozen=True)
class TrialColumns:
    """Per-trial values the list shows (all arrays of the file's length m)."""

    session: np.ndarray
    grade: np.ndarray  # nan: unknown
    catch_grade: np.ndarray  # nan: not a catch trial
    query: np.ndarray
    query_name: Sequence[str]
    kept: np.ndarray  # bool: kept by quality control
    query_rank: np.ndarray  # the query name's rank among all names (equal names, equal ranks): its sort key


class TrialListModel(QAbstractTableModel):
    """Rows are the trials in `rows` (indices into the file), in that order; `correct`/`total` fill 'agree'."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.columns: TrialColumns | None = None
        self.rows = np.empty(0, dtype=np.int64)
        self.correct: np.ndarray | None = None
        self.total: np.ndarray | None = None
        self._sort = (0, Qt.SortOrder.AscendingOrder)
        self._order: np.ndarray | None = None  # every trial in the sort order (None: to be sorted)

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(self.rows)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: N802
        return 0 if parent.isValid() else len(TRIAL_COLUMNS)

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = Qt.ItemDataRole.DisplayRole):
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal:
            return TRIAL_COLUMNS[section]
        return None

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole):
        if not index.isValid() or self.columns is None:
            return None
        t = int(self.rows[index.row()])
        c, col = self.columns, index.column()
        if role == Qt.ItemDataRole.DisplayRole:
            if col == 0:
                return str(t + 1)
            if col == 1:
                return str(int(c.session[t])) if c.session[t] >= 0 else "–"
            if col == 2:
                return "–" if np.isnan(c.grade[t]) else f"{c.grade[t]:.3f}"
            if col == 3:
                return "" if np.isnan(c.catch_grade[t]) else CATCH_TEXT.get(float(c.catch_grade[t]), "?")
            if col == AGREE:
                return "" if self.correct is None else f"{int(self.correct[t])}/{int(self.total[t])}"
            if col == QC:
                return "kept" if c.kept[t] else "dropped"
            return c.query_name[t]
        if role == Qt.ItemDataRole.ForegroundRole and col == QC and not c.kept[t]:
            return QBrush(ink_color("warning"))
        return None

    def set_trials(self, columns: TrialColumns) -> None:
        self.beginResetModel()
        self.columns = columns
        self.rows = np.arange(len(columns.session), dtype=np.int64)
        self.correct = self.total = None
        self._order = None
        self.endResetModel()

    def set_agreement(self, correct: np.ndarray | None, total: np.ndarray | None) -> None:
        self.correct, self.total = correct, total
        if self._sort[0] == AGREE:
            self._order = None
        if self.rows.size:
            self.dataChanged.emit(self.index(0, AGREE), self.index(len(self.rows) - 1, AGREE))

    def show_rows(self, mask: np.ndarray) -> None:
        """Show the trials where `mask` is true, in the current sort order."""
        self.beginResetModel()
        self.rows = self._ordered(mask)
        self.endResetModel()

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        if (column, order) != self._sort:
            self._sort, self._order = (column, order), None
        self.layoutAboutToBeChanged.emit()
        if self.columns is not None:
            shown = np.zeros(len(self.columns.session), dtype=bool)
            shown[self.rows] = True
            self.rows = self._ordered(shown)
        self.layoutChanged.emit()

    def sort_key(self, column: int) -> np.ndarray:
        c = self.columns
        m = len(c.session)
        if column == 0:
            return np.arange(m, dtype=np.float64)
        if column == 1:
            return c.session.astype(np.float64)
        if column in (2, 3):
            return np.nan_to_num(c.grade if column == 2 else c.catch_grade, nan=-1.0)
        if column == AGREE:
            return (self.correct / np.maximum(self.total, 1)) if self.correct is not None else np.zeros(m)
        if column == QC:
            return c.kept.astype(np.float64)
        return c.query_rank

    def _ordered(self, mask: np.ndarray) -> np.ndarray:
        """The trials where `mask` is true in the sort order: every trial's order is computed once per sort and
        data (a stable sort, so equal keys keep trial order) and filtered by the mask (at 312,500 trials each
        filter change or model score sorted them again: 40-60 ms of the GUI thread)."""
        if self.columns is None:
            return np.nonzero(mask)[0]
        if self._order is None:
            column, order = self._sort
            key = self.sort_key(column)
            self._order = np.arange(len(key)) if column == 0 and order == Qt.SortOrder.AscendingOrder else \
                np.argsort(-key if order == Qt.SortOrder.DescendingOrder else key, kind="stable")
        return self._order[mask[self._order]]

    def row_of(self, trial: int) -> int:
        """Row showing trial `trial`, -1 when it is filtered out."""
        hit = np.nonzero(self.rows == trial)[0]
        return int(hit[0]) if hit.size else -1


class TrialList(QTableView):
    """The trial list: one row selected at a time; the arrow keys move through it, headers sort it."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.list_model = TrialListModel(self)
        self.setModel(self.list_model)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setSortingEnabled(True)
        self.horizontalHeader().setSortIndicator(0, Qt.SortOrder.AscendingOrder)
        self.verticalHeader().hide()
        self.verticalHeader().setDefaultSectionSize(20)
        # columns fit the rows on screen: Qt's default also measures 1,000 more rows at every reset, sort and
        # change of the agreement column (7,000 calls into data(), a second at 312,500 trials); and only while the
        # list is on screen: hidden (another workspace shown), it has no rows on screen and Qt measured every row at
        # each selection (0.6 s at 3,000 trials, 9.7 s at 50,000)
        self.horizontalHeader().setResizeContentsPrecision(0)
        self._fit_columns(False)
        # the query's name takes its width, never what is left of a narrow pane (one letter at 1280x800): the list
        # scrolls sideways
        self.horizontalHeader().setStretchLastSection(False)
        self.horizontalHeader().moveSection(QUERY, 1)  # shown beside the number: in a narrow pane the figures scroll
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        declare_identifiers(self, [0, QUERY])  # the trial's number and its query's name
        self.setAlternatingRowColors(True)

    def _fit_columns(self, on: bool) -> None:
        mode = QHeaderView.ResizeMode.ResizeToContents if on else QHeaderView.ResizeMode.Interactive
        self.horizontalHeader().setSectionResizeMode(mode)

    def showEvent(self, event) -> None:  # noqa: N802  (Qt's name)
        self._fit_columns(True)
        super().showEvent(event)

    def hideEvent(self, event) -> None:  # noqa: N802  (Qt's name)
        self._fit_columns(False)
        super().hideEvent(event)

    def current_trial(self) -> int:
        row = self.currentIndex().row()
        return int(self.list_model.rows[row]) if 0 <= row < len(self.list_model.rows) else -1

    def select_trial(self, trial: int) -> bool:
        row = self.list_model.row_of(trial)
        if row < 0:
            return False
        self.setCurrentIndex(self.list_model.index(row, 0))
        self.scrollTo(self.list_model.index(row, 0))
        return True

    def select_row(self, row: int) -> None:
        if self.list_model.rowCount():
            row = min(max(row, 0), self.list_model.rowCount() - 1)
            self.setCurrentIndex(self.list_model.index(row, 0))
            self.scrollTo(self.list_model.index(row, 0))


MODEL_COLUMNS = ("model / layer", "L1", "L2", "cosine", "Spearman dot", "Spearman cosine")


@dataclass(frozen=True)
class ModelRow:
    """One row of the model table: accuracies by distance and Spearman by similarity (None: not computed)."""

    name: str
    l1: float
    l2: float
    cosine: float
    spearman_dot: float | None
    spearman_cosine: float | None
    reference: bool = False  # the psychological embedding's row


class ModelTable(QTableWidget):
    """Target models and layers against the judgments; the embedding's row (the reference) is shown in bold."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(0, len(MODEL_COLUMNS), parent)
        self.setHorizontalHeaderLabels(list(MODEL_COLUMNS))
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.verticalHeader().hide()
        # every column as wide as its contents, the model · layer name first of all (stretched, a narrow pane cut
        # "demo · layer4" and "demo · layer4.conv" to the same "demo…"): the table scrolls sideways
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        declare_identifiers(self, [0])
        self.rows: list[ModelRow] = []

    def set_rows(self, rows: list[ModelRow]) -> None:
        selected = self.currentRow()
        self.rows = list(rows)
        self.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, text in enumerate(self.cells(row)):
                item = QTableWidgetItem(text)
                if c:
                    item.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if row.reference:
                    font = item.font()
                    font.setBold(True)
                    item.setFont(font)
                    if 1 <= c <= 3:
                        item.setToolTip("the embedding ranks references by its expected similarity, the same "
                                        "under every distance")
                self.setItem(r, c, item)
        if 0 <= selected < len(rows):
            self.selectRow(selected)
        self.resizeRowsToContents()

    @staticmethod
    def cells(row: ModelRow) -> list[str]:
        def number(v: float | None, digits: int = 4) -> str:
            return "–" if v is None or not np.isfinite(v) else f"{v:.{digits}f}"

        return [row.name + ("  (reference)" if row.reference else ""), number(row.l1), number(row.l2),
                number(row.cosine), number(row.spearman_dot), number(row.spearman_cosine)]

    def csv_text(self) -> str:
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["model", "triplet_accuracy_l1", "triplet_accuracy_l2", "triplet_accuracy_cosine",
                         "spearman_dot", "spearman_cosine", "reference"])
        for row in self.rows:
            values = [row.l1, row.l2, row.cosine, row.spearman_dot, row.spearman_cosine]
            writer.writerow([row.name, *("" if v is None or not np.isfinite(v) else repr(float(v)) for v in values),
                             int(row.reference)])
        return out.getvalue()
