"""The beam-search trace as a tree: one branch per step (the beam after growing to k atoms), one leaf per formula
with its IoU and DA and the methods that picked it; the step where da-stop stopped is marked."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from PySide6.QtCore import QEvent, Qt, Signal
from PySide6.QtGui import QBrush, QFont
from PySide6.QtWidgets import QAbstractItemView, QHeaderView, QStyle, QTreeWidget, QTreeWidgetItem, QWidget

from probescope.widgets.identifiers import declare_identifiers, declare_whole_columns
from probescope.widgets.ink import ink_color

COLUMNS = ("formula", "IoU", "DA", "picked by")


@dataclass(frozen=True)
class TraceEntry:
    label: str
    iou: float
    da: float
    picked_by: tuple[str, ...] = ()


@dataclass(frozen=True)
class TraceStep:
    title: str  # e.g. "length ≤ 2"
    entries: tuple[TraceEntry, ...]
    note: str = ""  # e.g. "da-stop stopped here"


class TraceTree(QTreeWidget):
    """`set_steps(steps)`; `formula_clicked(step, position)` when a formula is clicked or chosen by keyboard."""

    formula_clicked = Signal(int, int)

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setColumnCount(len(COLUMNS))
        self.setHeaderLabels(list(COLUMNS))
        self.setRootIsDecorated(True)
        self.setUniformRowHeights(True)
        self.setSelectionMode(QAbstractItemView.SelectionMode.SingleSelection)
        # a formula is what the tree shows: its column takes the formulas' width and the tree scrolls sideways
        # rather than cut them (issue 45: "((lake-s AND NOT blue-c) AND NO…" at 1280x800)
        self.header().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.header().setStretchLastSection(False)
        self.setTextElideMode(Qt.TextElideMode.ElideMiddle)
        declare_identifiers(self, [0])
        declare_whole_columns(self)  # (a figure of it shows the IoU and DA beside the formulas)
        self._picked_width = 0  # the last column's own width; it takes more when a step's title needs it
        self.header().sectionResized.connect(lambda column, _old, _new: column == 0 and self._fit_titles())
        self.itemClicked.connect(self._clicked)
        self.itemActivated.connect(self._clicked)

    def set_steps(self, steps: Sequence[TraceStep], expanded: int | None = None) -> None:
        """`expanded`: how many leading steps to open (default all); later ones stay folded."""
        self.clear()
        bold = QFont(self.font())
        bold.setBold(True)
        pick = QBrush(ink_color("pick", self.palette()))
        tops = []  # (built whole, then added at once: an item added to the tree one by one costs a model update each)
        for s, step in enumerate(steps):
            top = QTreeWidgetItem([step.title + (f"   ({step.note})" if step.note else ""), "", "", ""])
            top.setData(0, Qt.ItemDataRole.UserRole, None)
            tops.append(top)
            for p, e in enumerate(step.entries):
                leaf = QTreeWidgetItem([e.label, f"{e.iou:.4f}", f"{e.da:.3f}", ", ".join(e.picked_by)])
                leaf.setData(0, Qt.ItemDataRole.UserRole, (s, p))
                leaf.setToolTip(0, e.label)
                for c in (1, 2):
                    leaf.setTextAlignment(c, Qt.AlignmentFlag.AlignRight | Qt.AlignmentFlag.AlignVCenter)
                if e.picked_by:  # (styled before the tree holds it: each change there is a model update)
                    for c in range(len(COLUMNS)):
                        leaf.setFont(c, bold)
                        leaf.setForeground(c, pick)
                top.addChild(leaf)
        self.addTopLevelItems(tops)
        for s, top in enumerate(tops):
            top.setFirstColumnSpanned(True)
            top.setExpanded(expanded is None or s < expanded)
        for c in (1, 2, 3):
            self.resizeColumnToContents(c)
        self._picked_width = self.columnWidth(3)
        self._fit_titles()

    def _fit_titles(self) -> None:
        """A step's title spans its row: the last column widens when the others leave it too little (ResizeToContents
        skips spanning rows, and "(da-select stopped here)" lost its middle)."""
        margin = 2 * (self.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, self) + 1)
        titles = [self.topLevelItem(s).text(0) for s in range(self.topLevelItemCount())]
        need = max(map(self.fontMetrics().horizontalAdvance, titles), default=0) + margin + self.indentation()
        others = sum(self.columnWidth(c) for c in range(len(COLUMNS) - 1))
        self.setColumnWidth(len(COLUMNS) - 1, max(self._picked_width, need - others))

    def _ink_picks(self) -> None:
        """The picked formulas in the theme's pick colour (again at each palette change: a theme switch)."""
        brush = QBrush(ink_color("pick", self.palette()))
        for s in range(self.topLevelItemCount()):
            top = self.topLevelItem(s)
            for p in range(top.childCount()):
                leaf = top.child(p)
                if leaf.text(3):
                    for c in range(len(COLUMNS)):
                        leaf.setForeground(c, brush)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange:
            self._ink_picks()

    def leaves(self) -> list[tuple[int, int, list[str]]]:
        """(step, position, cell texts) of every formula shown, in order."""
        out = []
        for s in range(self.topLevelItemCount()):
            top = self.topLevelItem(s)
            for p in range(top.childCount()):
                leaf = top.child(p)
                out.append((s, p, [leaf.text(c) for c in range(len(COLUMNS))]))
        return out

    def click(self, step: int, position: int) -> None:
        """Select a formula as a click would."""
        leaf = self.topLevelItem(step).child(position)
        self.setCurrentItem(leaf)
        self._clicked(leaf, 0)

    def _clicked(self, item: QTreeWidgetItem, _column: int) -> None:
        where = item.data(0, Qt.ItemDataRole.UserRole)
        if where is not None:
            self.formula_clicked.emit(int(where[0]), int(where[1]))
