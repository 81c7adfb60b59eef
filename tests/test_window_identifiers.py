"""Identifiers readable at the usual sizes (issue 45 §3): in the real window at its default size (1440x900 on a
1600x1000 screen) and at 1280x800, with each workspace's first results shown and each panel brought up in turn, no
combo box cuts the item it shows or, in its open list, any item ("Samples: demo sampler (" in the gallery's tool
bar, "top-activating imag" over the unit's images), and no table or tree cuts a cell of a column that holds
identifiers (the columns a view declares, or all of them). A cell counts as cut when its text is wider than the text
room the style leaves in its column, measured with the cell's font; a view that elides in the middle may do so only
when the column is wider than the view itself (the name is longer than all the view can show)."""

from __future__ import annotations

import pytest
from PySide6.QtCore import QModelIndex, Qt
from PySide6.QtGui import QFontMetrics
from PySide6.QtWidgets import (
    QAbstractItemView,
    QApplication,
    QComboBox,
    QStyle,
    QStyleOptionComboBox,
    QStyleOptionViewItem,
    QTableView,
    QTreeView,
)
from pytestqt.exceptions import TimeoutError as WaitTimeout
from windows import WAIT_MS, on_screen, open_all, widget_path, world_requests

from probescope.widgets.identifiers import IDENTIFIER_COLUMNS

pytestmark = pytest.mark.usefixtures("isolated_cache")

SIZES = ((1440, 900), (1280, 800))


def combo_cut(box: QComboBox) -> str | None:
    """The item `box` shows, when wider than the room its style leaves for it."""
    option = QStyleOptionComboBox()
    box.initStyleOption(option)
    room = box.style().subControlRect(QStyle.ComplexControl.CC_ComboBox, option,
                                      QStyle.SubControl.SC_ComboBoxEditField, box).width()
    need = QFontMetrics(box.font()).horizontalAdvance(box.currentText())
    return f"{widget_path(box, 4)}: {box.currentText()!r} needs {need} px, has {room}" if need > room else None


def popup_cut(box: QComboBox) -> str | None:
    """The widest item of `box`'s open list, when wider than the room the list leaves for its text."""
    box.showPopup()
    try:
        view = box.view()
        margin = 2 * (view.style().pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, view) + 1)
        room = view.viewport().width() - margin
        metrics = QFontMetrics(view.font())
        need, text = max(((metrics.horizontalAdvance(box.itemText(k)), box.itemText(k)) for k in range(box.count())),
                         default=(0, ""))
    finally:
        box.hidePopup()
    return f"{widget_path(box, 4)} list: {text!r} needs {need} px, has {room}" if need > room else None


def _rows(view: QAbstractItemView, parent: QModelIndex = QModelIndex()):  # noqa: B008
    """The indices of column 0 of the rows on screen (a tree's open branches included)."""
    model, height = view.model(), view.viewport().height()
    for row in range(model.rowCount(parent)):
        index = model.index(row, 0, parent)
        rect = view.visualRect(index)
        if rect.isValid() and rect.bottom() >= 0 and rect.top() <= height:
            yield index
        if isinstance(view, QTreeView) and view.isExpanded(index):
            yield from _rows(view, index)


def cells_cut(view: QAbstractItemView) -> list[str]:
    """Identifier cells on screen in `view` whose text the view cuts."""
    model, style = view.model(), view.style()
    declared = view.property(IDENTIFIER_COLUMNS)
    columns = list(range(model.columnCount())) if declared is None else list(declared)
    margin = 2 * (style.pixelMetric(QStyle.PixelMetric.PM_FocusFrameHMargin, None, view) + 1)
    middle = view.textElideMode() == Qt.TextElideMode.ElideMiddle
    found = []
    for first in _rows(view):
        for column in columns:
            index = first.siblingAtColumn(column)
            option = QStyleOptionViewItem()
            view.initViewItemOption(option)
            view.itemDelegateForIndex(index).initStyleOption(option, index)
            option.rect = view.visualRect(index)
            if not option.text or option.rect.isEmpty():
                continue
            room = style.subElementRect(QStyle.SubElement.SE_ItemViewItemText, option, view).width() - margin
            need = QFontMetrics(option.font).horizontalAdvance(option.text)
            if need > room and not (middle and option.rect.width() >= view.viewport().width()):
                header = model.headerData(column, Qt.Orientation.Horizontal)
                found.append(f"{widget_path(view, 4)} [{header}]: {option.text!r} needs {need} px, has {room}")
    return found


def texts_cut(window) -> list[str]:
    """What the combo boxes and item views on screen cut."""
    boxes = [combo_cut(box) for box in window.findChildren(QComboBox) if on_screen(box)]
    cells = [cut for view in window.findChildren(QAbstractItemView)
             if isinstance(view, (QTableView, QTreeView)) and on_screen(view) and view.model() is not None
             for cut in cells_cut(view)]
    return [cut for cut in boxes if cut] + cells


def settled_cuts(qtbot, window) -> list[str]:
    """`texts_cut` once the panel's work is done and its layouts and columns have followed (waited for on the event
    loop: the cuts, if any, that are still there then)."""
    qtbot.waitUntil(lambda: not window.pool.active(), timeout=WAIT_MS)
    found: list[str] = []

    def whole() -> bool:
        found[:] = texts_cut(window)
        return not found

    try:
        qtbot.waitUntil(whole, timeout=1500)
    except WaitTimeout:
        pass
    return found


def cuts_in_every_workspace(qtbot, window) -> list[str]:
    """Each workspace shown, each of its panels brought up in turn: every cut seen (each once), the open lists of
    the combo boxes on screen included."""
    found: dict[str, None] = {}
    listed: set[int] = set()
    for name, ws in window.workspaces.items():
        window.set_workspace(name)
        for key in ws.area.panels:
            ws.area.raise_panel(key)
            found.update(dict.fromkeys(f"{name}/{key}: {cut}" for cut in settled_cuts(qtbot, window)))
            for box in window.findChildren(QComboBox):
                if on_screen(box) and id(box) not in listed:
                    listed.add(id(box))
                    cut = popup_cut(box)
                    if cut:
                        found[f"{name}/{key}: {cut}"] = None
    return list(found)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_no_identifier_is_cut_in_any_workspace(qtbot, window, small_world, size):
    open_all(qtbot, window, world_requests(small_world))
    window.resize(*size)
    QApplication.processEvents()
    for ws in window.workspaces.values():
        ws.area.reset()
    cuts = cuts_in_every_workspace(qtbot, window)
    assert not cuts, "\n".join(cuts)
