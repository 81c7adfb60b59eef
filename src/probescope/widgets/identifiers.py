"""Identifiers shown whole (issue 45 §3): a model or layer name, a formula, a unit or trial id is never cut.

A combo box is as wide as its widest item, measured again whenever its items change: Qt's default measures them
once, when the box is first shown, so a box filled later ("all categories", then the dataset's categories; the
Image tab's methods) cut what it showed, and a box told to stay narrow in a tool bar cut "Samples: demo sampler (".
A long descriptive item gets a short text with the whole one as its tooltip instead.

A table or tree names the columns that hold identifiers (`declare_identifiers`), so the window's test checks those:
such a column takes the width its texts need and the view scrolls sideways, or a name longer than the whole view is
elided in the middle, keeping its distinguishing end. A view that names none is checked in every column. A view of a
few columns may also ask that its figures show every one (`declare_whole_columns`): a figure cannot scroll sideways.
"""

from __future__ import annotations

from collections.abc import Iterable

from PySide6.QtWidgets import QAbstractItemView, QComboBox, QSizePolicy, QWidget

IDENTIFIER_COLUMNS = "identifier_columns"  # the dynamic property a view declares them in (a list of columns)
WHOLE_COLUMNS = "whole_columns_in_figures"  # the dynamic property of `declare_whole_columns`


def whole_items(box: QComboBox) -> QComboBox:
    """`box`, as wide as its widest item whenever its items change (its list is then at least as wide too), and
    never narrower in a layout: Qt keeps the minimum it measured first (an empty box's) and a tight row squeezed
    "compositional" to "compositio"; the row scrolls, or a tool bar tucks it behind », instead."""
    box.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToContents)
    box.setSizePolicy(QSizePolicy.Policy.Minimum, box.sizePolicy().verticalPolicy())
    return box


def whole_items_everywhere(root: QWidget) -> None:
    """`whole_items` for every combo box under `root` still measured once (Qt's default policy); a box made
    narrow on purpose (its items long descriptions, its layout stretching it) keeps its policy."""
    for box in root.findChildren(QComboBox):
        if box.sizeAdjustPolicy() == QComboBox.SizeAdjustPolicy.AdjustToContentsOnFirstShow:
            whole_items(box)


def declare_identifiers(view: QAbstractItemView, columns: Iterable[int]) -> None:
    """Name the columns of `view` that hold identifiers (the others hold numbers or prose)."""
    view.setProperty(IDENTIFIER_COLUMNS, sorted(set(columns)))


def declare_whole_columns(view: QAbstractItemView) -> None:
    """Ask that a figure of `view` at a preset's width show all its columns (laid out wider, then scaled down), not
    the part the screen scrolls to."""
    view.setProperty(WHOLE_COLUMNS, True)
