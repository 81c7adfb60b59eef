"""The Tasks panel: every running task with its stage, progress, items done, rate, time left and a cancel button,
then the recent finished ones (done, cancelled or failed, their bars greyed), so a task that just ended can still
be read."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QSize, Signal
from PySide6.QtWidgets import (
    QHeaderView,
    QProgressBar,
    QTableWidget,
    QTableWidgetItem,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

COLUMNS = ("task", "stage", "progress", "done", "rate", "left", "")
MAX_ROWS = 40  # tasks listed; more are counted in the last row (hundreds of image tasks can be queued at once)


class TaskPanel(QWidget):
    """`show_rows(rows, recent)` with rows of (key, name, stage, fraction or None, done, rate, left): the running
    tasks, then `recent` finished ones (their stage says how they ended); `cancel_requested(key)`."""

    cancel_requested = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self._table = QTableWidget(0, len(COLUMNS))
        self._table.setHorizontalHeaderLabels(list(COLUMNS))
        self._table.verticalHeader().setVisible(False)
        self._table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        header = self._table.horizontalHeader()
        header.setSectionResizeMode(QHeaderView.ResizeMode.Interactive)  # sized after each redraw, not per cell
        header.setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self._table)
        self._keys: list[int] = []
        self._recent: list[int] = []
        self._more = 0
        self._wanted: tuple[list, list] | None = None  # rows to show, not yet in the table (hidden)

    def sizeHint(self) -> QSize:  # noqa: N802
        """A few rows tall when it opens: the workspace above keeps its room (it took the Settings' height)."""
        return QSize(640, 150)

    def show_rows(self, rows: Sequence[Sequence], recent: Sequence[Sequence] = ()) -> None:
        """Rows and recent rows as the class says; a hidden panel keeps them and builds its table when shown (its
        buttons and bars, rebuilt as the tasks of unit switches come and go, took 0.33 s of the GUI thread over 20
        switches on the demo)."""
        self._wanted = (list(rows), list(recent))
        if self.isVisible():
            self._build()

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        self._build()

    def _build(self) -> None:
        if self._wanted is None:
            return
        rows, recent = self._wanted
        self._wanted = None
        more = max(0, len(rows) - MAX_ROWS)
        rows = rows[:MAX_ROWS]
        keys = [int(row[0]) for row in rows]
        ended = [int(row[0]) for row in recent]
        if keys != self._keys or more != self._more or ended != self._recent:  # other tasks: rebuild the rows
            self._keys, self._more, self._recent = keys, more, ended
            self._table.setRowCount(len(rows) + (1 if more else 0) + len(recent))
            for k in range(self._table.rowCount()):
                self._table.removeCellWidget(k, 2)
                self._table.removeCellWidget(k, 6)
            for k, key in enumerate(keys):
                cancel = QToolButton()
                cancel.setText("Cancel")
                cancel.clicked.connect(lambda _=False, key=key: self.cancel_requested.emit(key))
                self._table.setCellWidget(k, 6, cancel)
            for k in [*range(len(keys)), *range(len(keys) + bool(more), self._table.rowCount())]:
                bar = QProgressBar()
                bar.setMaximumHeight(16)
                self._table.setCellWidget(k, 2, bar)
            if more:
                self._table.setItem(len(rows), 0, QTableWidgetItem(f"… and {more:,} more"))
                for column in range(1, len(COLUMNS)):
                    self._table.setItem(len(rows), column, QTableWidgetItem(""))
        first_recent = len(rows) + bool(more)
        listed = [(k, row, False) for k, row in enumerate(rows)]
        listed += [(first_recent + k, row, True) for k, row in enumerate(recent)]
        for k, (_key, name, stage, fraction, done, rate, left), finished in listed:
            for column, text in ((0, name), (1, stage), (3, done), (4, rate), (5, left), (6, "")):
                self._table.setItem(k, column, QTableWidgetItem(text))
            bar = self._table.cellWidget(k, 2)
            if fraction is None:
                bar.setRange(0, 1000 if finished else 0)  # (a finished task's bar does not spin)
                bar.setValue(0)
            else:
                bar.setRange(0, 1000)
                bar.setValue(round(1000 * min(max(fraction, 0.0), 1.0)))
            bar.setEnabled(not finished)
        for column in (0, 2, 3, 4, 5, 6):
            self._table.resizeColumnToContents(column)

    @property
    def table(self) -> QTableWidget:
        """The table, with the rows shown last in it."""
        self._build()
        return self._table

    def stages(self) -> list[str]:
        """The running tasks' stages."""
        table = self.table
        return [table.item(k, 1).text() for k in range(len(self._keys))]

    def recent(self) -> list[tuple[str, str]]:
        """(name, how it ended) of each recent finished task listed."""
        table = self.table
        first = len(self._keys) + bool(self._more)
        return [(table.item(k, 0).text(), table.item(k, 1).text())
                for k in range(first, first + len(self._recent))]
