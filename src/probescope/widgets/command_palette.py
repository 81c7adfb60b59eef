"""A searchable list of commands (Ctrl+Shift+P): type words, Enter runs the highlighted one. Besides the menu
actions, the current workspace offers its own items (units, concepts, trials, sort orders) for what was typed."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeyEvent
from PySide6.QtWidgets import QDialog, QLineEdit, QListWidget, QListWidgetItem, QVBoxLayout, QWidget


def matches(query: str, text: str) -> bool:
    """Every word of the query appears in the text, in any order, ignoring case."""
    lowered = text.lower()
    return all(word in lowered for word in query.lower().split())


Entry = tuple[str, Callable[[], None]]  # (what the list says, what choosing it does)
MAX_ITEMS = 200  # workspace items listed at most (a layer has up to thousands of units)


class CommandPalette(QDialog):
    """`items(query)` gives the workspace's entries matching `query` (beyond the menu actions)."""

    def __init__(self, actions: list[QAction], parent: QWidget | None = None,
                 items: Callable[[str], list[Entry]] | None = None):
        super().__init__(parent)
        self._items = items
        self.setWindowTitle("Commands")
        self.setModal(False)
        self.resize(460, 340)
        self._actions = [a for a in actions if a.text() and not a.menu()]
        self.search = QLineEdit()
        self.search.setPlaceholderText("Type a command, a unit, a concept, a trial…")
        self.list = QListWidget()
        layout = QVBoxLayout(self)
        layout.addWidget(self.search)
        layout.addWidget(self.list)
        self.search.textChanged.connect(self._refilter)
        self.search.returnPressed.connect(self.run_current)
        self.list.itemActivated.connect(lambda _item: self.run_current())
        self.search.installEventFilter(self)
        self._refilter("")

    @staticmethod
    def _title(action: QAction) -> str:
        text = action.text().replace("&", "").rstrip("…").rstrip(".")
        shortcut = action.shortcut().toString()
        return f"{text}    {shortcut}" if shortcut else text

    def _refilter(self, query: str) -> None:
        self.list.clear()
        for action in self._actions:
            if action.isEnabled() and matches(query, action.text().replace("&", "")):
                self._add(self._title(action), action.trigger, action.text())
        if self._items is not None and query.strip():
            for title, run in self._items(query)[:MAX_ITEMS]:
                self._add(title, run)
        if self.list.count():
            self.list.setCurrentRow(0)

    def _add(self, title: str, run: Callable[[], None], name: str = "") -> None:
        item = QListWidgetItem(title)
        item.setData(Qt.ItemDataRole.UserRole, run)
        item.setData(Qt.ItemDataRole.UserRole + 1, name or title)
        self.list.addItem(item)

    def visible_commands(self) -> list[str]:
        """The entries listed: a menu action's text, a workspace item's title."""
        return [self.list.item(i).data(Qt.ItemDataRole.UserRole + 1) for i in range(self.list.count())]

    def run_current(self) -> None:
        item = self.list.currentItem()
        if item is None:
            return
        run = item.data(Qt.ItemDataRole.UserRole)
        self.accept()
        run()

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - arrow keys move the list while typing
        if obj is self.search and isinstance(event, QKeyEvent) and event.type() == QKeyEvent.Type.KeyPress:
            if event.key() in (Qt.Key.Key_Down, Qt.Key.Key_Up):
                step = 1 if event.key() == Qt.Key.Key_Down else -1
                row = min(max(self.list.currentRow() + step, 0), self.list.count() - 1)
                self.list.setCurrentRow(row)
                return True
        return super().eventFilter(obj, event)
