"""The table of a layer's units: one row per unit with each explanation's label, length, IoU and DA.

Rows are plain tuples of cells (the first is the row's key: the unit number); numbers sort as numbers and missing
values sort last either way. A table model serves the cells the view paints, so replacing the rows of a layer with
thousands of units costs a model reset, not an item per cell. Filtering keeps only the rows the owner names, so
sorting, selection and the keyboard keep working on what is shown.
"""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import QAbstractTableModel, QItemSelectionModel, QModelIndex, QPersistentModelIndex, Qt, Signal
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QTableView, QWidget

from probescope.widgets.identifiers import declare_identifiers

MAX_COLUMN_WIDTH = 220  # a column of numbers
MAX_TEXT_WIDTH = 900  # a column of names and formulas: as wide as they are (the table scrolls)
CELL_PADDING = 14


def cell_text(value: object) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class _Rows(QAbstractTableModel):
    """All rows; `shown` holds the indices of the rows on screen, in the sort order."""

    def __init__(self) -> None:
        super().__init__()
        self.columns: tuple[str, ...] = ()
        self.rows: list[tuple] = []
        self.ordered: list[int] = []  # every row, sorted
        self.shown: list[int] = []  # the rows kept by the filter, sorted
        self.keep: set | None = None
        self.sort_column, self.sort_order = -1, Qt.SortOrder.AscendingOrder

    def rowCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(self.shown)

    def columnCount(self, parent: QModelIndex | QPersistentModelIndex = QModelIndex()) -> int:  # noqa: N802, B008
        return 0 if parent.isValid() else len(self.columns)

    def value(self, row: int, column: int) -> object:
        return self.rows[self.shown[row]][column]

    def data(self, index: QModelIndex | QPersistentModelIndex, role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if not index.isValid():
            return None
        if role == Qt.ItemDataRole.DisplayRole:
            return cell_text(self.value(index.row(), index.column()))
        if role == Qt.ItemDataRole.TextAlignmentRole and _is_number(self.value(index.row(), index.column())):
            return int(Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
        return None

    def headerData(self, section: int, orientation: Qt.Orientation,  # noqa: N802
                   role: int = Qt.ItemDataRole.DisplayRole) -> object:
        if role == Qt.ItemDataRole.DisplayRole and orientation == Qt.Orientation.Horizontal \
                and 0 <= section < len(self.columns):
            return self.columns[section]
        return None

    def sort(self, column: int, order: Qt.SortOrder = Qt.SortOrder.AscendingOrder) -> None:
        self.layoutAboutToBeChanged.emit()
        self.sort_column, self.sort_order = column, order
        self._arrange()
        self.layoutChanged.emit()

    def replace(self, columns: Sequence[str], rows: Sequence[Sequence[object]], resort: bool = True) -> None:
        """New content; with `resort` False the rows already listed keep their order among themselves and new ones
        are inserted where the sort puts them (rows that arrive are in the sort at once; a listed row whose value
        changed does not jump under the pointer until the final content is sorted)."""
        rows = [tuple(r) for r in rows]
        if not resort and tuple(columns) == self.columns and self._insert(rows):
            return
        self.beginResetModel()
        if tuple(columns) != self.columns:
            self.columns = tuple(columns)
            self.sort_column = min(self.sort_column, len(self.columns) - 1)
            resort = True
        before = [self.rows[i][0] for i in self.ordered]
        self.rows = rows
        self._arrange()
        if not resort:
            self.ordered = self._kept_merged(before)
            self._filter()
        self.endResetModel()

    def _kept_merged(self, before: list) -> list[int]:
        """The rows of the keys `before` in their old order, with every other row merged in at its place in the
        sort (by its rank there)."""
        at = {row[0]: i for i, row in enumerate(self.rows)}
        kept = [at[key] for key in before if key in at]
        old = set(kept)
        rank = {i: r for r, i in enumerate(self.ordered)}
        new = [i for i in self.ordered if i not in old]
        merged, k, n = [], 0, 0
        while k < len(kept) or n < len(new):
            if n < len(new) and (k == len(kept) or rank[new[n]] < rank[kept[k]]):
                merged.append(new[n])
                n += 1
            else:
                merged.append(kept[k])
                k += 1
        return merged

    def _insert(self, rows: list[tuple]) -> bool:
        """`rows` are the rows listed plus new ones, each listed row unchanged: the new ones are inserted at their
        places, run by run (no reset: the view repaints only what moved, and keeps its selection). False when it
        is not so."""
        listed = {row[0]: row for row in self.rows}
        if len(rows) < len(self.rows) or any(listed.get(row[0], row) != row for row in rows) or \
                len({row[0] for row in rows} & listed.keys()) != len(listed):
            return False
        shown_keys = [self.rows[i][0] for i in self.shown]
        before = [self.rows[i][0] for i in self.ordered]
        self.rows = rows
        self._arrange()
        self.ordered = self._kept_merged(before)
        self._filter()
        final = self.shown
        at = {row[0]: i for i, row in enumerate(self.rows)}
        old = {at[key] for key in shown_keys}
        if [i for i in final if i in old] != [at[key] for key in shown_keys]:  # (a filter showed an old row)
            self.beginResetModel()
            self.endResetModel()
            return True
        p = 0
        while p < len(final):
            if final[p] in old:
                p += 1
                continue
            end = p
            while end < len(final) and final[end] not in old:
                end += 1
            # the view has the rows above and the rest of the listed ones; then this run goes in before them
            self.shown = final[:p] + [i for i in final[p:] if i in old]
            self.beginInsertRows(QModelIndex(), p, end - 1)
            self.shown = final[:end] + [i for i in final[end:] if i in old]
            self.endInsertRows()
            p = end
        self.shown = final
        return True

    def filter(self, keep: set | None) -> None:
        """Show only the rows whose keys are in `keep` (None: every row); nothing is redrawn when that is what is
        shown already (the workspace filters again at every partial result)."""
        shown_before = self.shown
        self.keep = keep
        self._filter()
        if self.shown == shown_before:
            return
        self.shown = shown_before
        self.layoutAboutToBeChanged.emit()
        self._filter()
        self.layoutChanged.emit()

    def _arrange(self) -> None:
        c = self.sort_column
        order = list(range(len(self.rows)))
        if 0 <= c < len(self.columns):
            present = [i for i in order if self.rows[i][c] is not None]

            def key(i: int) -> tuple:
                v = self.rows[i][c]
                return (0, v, "") if _is_number(v) else (1, 0, str(v).lower())

            present.sort(key=key, reverse=self.sort_order == Qt.SortOrder.DescendingOrder)
            order = present + [i for i in order if self.rows[i][c] is None]
        self.ordered = order
        self._filter()

    def _filter(self) -> None:
        self.shown = self.ordered if self.keep is None else [i for i in self.ordered if self.rows[i][0] in self.keep]


class UnitTable(QTableView):
    """`set_rows(columns, rows)`: rows[k][0] is the row's key (the unit). `unit_changed(unit)` follows keyboard and
    mouse; `value(row, column)` is a shown cell's value. `header_room`: pixels kept beside each header's text for
    the sort indicator (0 for a compact table, whose indicator may then cover the end of the text)."""

    unit_changed = Signal(int)

    def __init__(self, parent: QWidget | None = None, header_room: int = 10):
        super().__init__(parent)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)  # (past MAX_TEXT_WIDTH: both ends of a name stay)
        self.header_room = header_room
        self._rows = _Rows()
        self.setModel(self._rows)
        self.verticalHeader().setVisible(False)
        self.setEditTriggers(QAbstractItemView.EditTrigger.NoEditTriggers)
        self.setSelectionBehavior(QAbstractItemView.SelectionBehavior.SelectRows)
        self.setSelectionMode(QAbstractItemView.SelectionMode.ExtendedSelection)  # Shift/Ctrl: several units
        self.setAlternatingRowColors(True)
        self.verticalHeader().setDefaultSectionSize(self.fontMetrics().height() + 6)
        self.horizontalHeader().setSectionResizeMode(QHeaderView.ResizeMode.Interactive)
        self.setSortingEnabled(True)
        self._current = -1
        self.selectionModel().currentRowChanged.connect(self._moved)
        self._rows.layoutChanged.connect(self._reselect)

    def set_rows(self, columns: Sequence[str], rows: Sequence[Sequence[object]], resort: bool = True) -> None:
        """Replace the content, keeping the sort column, its order, the filter and the selected unit. While rows
        still arrive (`resort` False) the listed rows stay where they are and the column widths as the user set
        them; the final content is sorted and fitted."""
        first = self._rows.rowCount() == 0
        if not rows:  # a clear: no unit is current, so the same unit highlighted among the next rows signals again
            self._current = -1
        self._rows.replace(columns, rows, resort)
        if resort or first:
            self.fit_columns()
        self._reselect()

    def fit_columns(self) -> None:
        """Each column as wide as its header and its longest text: numbers up to MAX_COLUMN_WIDTH, names and
        formulas (an identifier is never cut: issue 45) up to MAX_TEXT_WIDTH, the table scrolling sideways. Measured
        on the few longest texts only, which is what a table of thousands of rows can afford on every update."""
        header = self.horizontalHeader().fontMetrics()
        cells = self.fontMetrics()
        rows = self._rows.rows
        identifiers = [0]  # the row's key (a unit, a class, a job) and every column of names
        for c, name in enumerate(self._rows.columns):
            texts = sorted({cell_text(r[c]) for r in rows}, key=len)[-3:]
            width = max([header.horizontalAdvance(name) + CELL_PADDING + self.header_room,
                         *(cells.horizontalAdvance(t) + CELL_PADDING for t in texts)])
            names = any(r[c] is not None and not _is_number(r[c]) for r in rows[:50])
            self.setColumnWidth(c, min(width, MAX_TEXT_WIDTH if names else MAX_COLUMN_WIDTH))
            identifiers += [c] if names else []
        declare_identifiers(self, identifiers)

    def rowCount(self) -> int:  # noqa: N802  (the QTableWidget name, for callers and tests)
        return self._rows.rowCount()

    def columnCount(self) -> int:  # noqa: N802
        return self._rows.columnCount()

    def value(self, row: int, column: int) -> object:
        return self._rows.value(row, column)

    def units(self) -> list[int]:
        """Units in the sort order, filtered out ones included."""
        return [int(self._rows.rows[i][0]) for i in self._rows.ordered]

    def selected_units(self) -> list[int]:
        """The units of the selected rows (the current one at least), in table order."""
        rows = sorted({index.row() for index in self.selectionModel().selectedRows()})
        units = [int(self._rows.rows[self._rows.shown[r]][0]) for r in rows if r < len(self._rows.shown)]
        current = self.current_unit()
        return units or ([current] if current >= 0 else [])

    def visible_units(self) -> list[int]:
        return [int(self._rows.rows[i][0]) for i in self._rows.shown]

    def show_only(self, units: set[int]) -> None:
        self._rows.filter(set(units))

    def current_unit(self) -> int:
        return self._current

    def select_unit(self, unit: int, emit: bool = True) -> bool:
        """Select `unit`'s row (False when it is not shown); `unit_changed` only with `emit`."""
        try:
            row = self.visible_units().index(unit)
        except ValueError:
            return False
        index = self._rows.index(row, 0)
        if not emit:
            self.selectionModel().blockSignals(True)
        self._go(index)
        self.selectionModel().blockSignals(False)
        self.scrollTo(index)
        self._current = unit
        return True

    def step(self, offset: int) -> None:
        """Move through the shown rows (next/previous unit)."""
        n = self._rows.rowCount()
        if n == 0:
            return
        here = self.currentIndex().row()
        pos = here + offset if 0 <= here < n else 0
        self._go(self._rows.index(min(max(pos, 0), n - 1), 0))

    def _go(self, index: QModelIndex) -> None:
        """Make `index`'s row the current and only selected one. (`setCurrentIndex` asks the keyboard: with Ctrl
        held, as it is for Ctrl+] and Ctrl+[, the extended selection added the row instead.)"""
        flags = QItemSelectionModel.SelectionFlag.ClearAndSelect | QItemSelectionModel.SelectionFlag.Rows
        self.selectionModel().setCurrentIndex(index, flags)

    def _reselect(self) -> None:
        """After a reset, sort or filter: the selected unit's row again, wherever it went (no signal)."""
        if self._current >= 0 and not self.select_unit(self._current, emit=False):
            self.selectionModel().blockSignals(True)
            self.clearSelection()
            self.setCurrentIndex(QModelIndex())
            self.selectionModel().blockSignals(False)

    def _moved(self, current: QModelIndex, _previous: QModelIndex) -> None:
        if current.isValid():
            unit = int(self._rows.value(current.row(), 0))
            if unit != self._current:
                self._current = unit
                self.unit_changed.emit(unit)
