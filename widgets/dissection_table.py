"""The table of a layer's units: one row per unit with each explanation's label, length, IoU and DA.

Rows are plain tuples of cells; numbers sort as numbers. Filtering hides rows (the owner decides which), so sorting,
selection and the keyboard keep working on what is visible.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableWidget, QTableWidgetItem, QWidget


class _Cell(QTableWidgetItem):
    """A cell that sorts by its value (numbers as numbers, missing values last)."""

    def __init__(self, value: object, text: str):
        super().__init__(text)
        self.value = value
        if isinstance(value, (int, float)):
            self.setTextAlignment(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)

    def __lt__(self, other: QTableWidgetItem) -> bool:
        a, b = self.value, getattr(other, "value", None)
        if isinstance(a, (int, float)) and isinstance(b, (int, float)):
            return a < b
        if a is None or b is None:
            return b is None and a is not None
        return str(a).lower() < str(b).lower()


def cell_text(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


class UnitTable(QTableWidget):
    """`set_rows(columns, rows)`: rows[k][0] is the unit number. `unit_changed(unit)` follows keyboard and mouse."""

    unit_changed = Signal(int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(0, 0, parent)
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        self.setAlternatingRowColors(True)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.setSortingEnabled(True)
        self._current = -1
        self.currentCellChanged.connect(self._moved)

    def set_rows(self, columns: Sequence[str], rows: Sequence[Sequence[object]]) -> None:
        """Replace the content, keeping the sort column, its order and the selected unit."""
        keep = self._current
        header = self.horizontalHeader()
        sort_col, order = header.sortIndicatorSection(), header.sortIndicatorOrder()
        self.blockSignals(True)
        self.setSortingEnabled(False)
        self.clearContents()
        if self.columnCount() != len(columns):
            self.setColumnCount(len(columns))
        self.setHorizontalHeaderLabels(list(columns))
        self.setRowCount(len(rows))
        for r, row in enumerate(rows):
            for c, value in enumerate(row):
                self.setItem(r, c, _Cell(value, cell_text(value)))
        self.setSortingEnabled(True)
        if 0 <= sort_col < len(columns):
            self.sortItems(sort_col, order)
        self.resizeColumnsToContents()
        for c in range(len(columns)):
            self.setColumnWidth(c, min(self.columnWidth(c), 220))
        self.blockSignals(False)
        if keep >= 0:
            self.select_unit(keep, emit=False)

    def units(self) -> list[int]:
        """Units in the order shown (hidden rows included)."""
        return [int(self.item(r, 0).value) for r in range(self.rowCount())]

    def visible_units(self) -> list[int]:
        return [int(self.item(r, 0).value) for r in range(self.rowCount()) if not self.isRowHidden(r)]

    def show_only(self, units: set[int]) -> None:
        for r in range(self.rowCount()):
            self.setRowHidden(r, int(self.item(r, 0).value) not in units)

    def current_unit(self) -> int:
        return self._current

    def select_unit(self, unit: int, emit: bool = True) -> bool:
        for r in range(self.rowCount()):
            if int(self.item(r, 0).value) == unit:
                if not emit:
                    self.blockSignals(True)
                self.setCurrentCell(r, 0)
                self.scrollToItem(self.item(r, 0))
                self.blockSignals(False)
                self._current = unit
                return True
        return False

    def step(self, offset: int) -> None:
        """Move through the visible rows (next/previous unit)."""
        rows = [r for r in range(self.rowCount()) if not self.isRowHidden(r)]
        if not rows:
            return
        here = self.currentRow()
        pos = rows.index(here) + offset if here in rows else 0
        self.setCurrentCell(rows[min(max(pos, 0), len(rows) - 1)], 0)

    def _moved(self, row: int, _col: int, _prev_row: int, _prev_col: int) -> None:
        if 0 <= row < self.rowCount() and self.item(row, 0) is not None:
            unit = int(self.item(row, 0).value)
            if unit != self._current:
                self._current = unit
                self.unit_changed.emit(unit)
