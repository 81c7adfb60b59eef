"""A searchable list of commands (Ctrl+Shift+P): type words, Enter runs the highlighted action."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtGui import QAction, QKeyEvent
from PySide6.QtWidgets import QDialog, QLineEdit, QListWidget, QListWidgetItem, QVBoxLayout, QWidget


def matches(query: str, text: str) -> bool:
    """Every word of the query appears in the text, in any order, ignoring case."""
    lowered = text.lower()
    return all(word in lowered for word in query.lower().split())


class CommandPalette(QDialog):
    def __init__(self, actions: list[QAction], parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Commands")
        self.setModal(False)
        self.resize(460, 340)
        self._actions = [a for a in actions if a.text() and not a.menu()]
        self.search = QLineEdit()
        self.search.setPlaceholderText("Type a command…")
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
                item = QListWidgetItem(self._title(action))
                item.setData(Qt.ItemDataRole.UserRole, action)
                self.list.addItem(item)
        if self.list.count():
            self.list.setCurrentRow(0)

    def visible_commands(self) -> list[str]:
        return [self.list.item(i).data(Qt.ItemDataRole.UserRole).text() for i in range(self.list.count())]

    def run_current(self) -> None:
        item = self.list.currentItem()
        if item is None:
            return
        action = item.data(Qt.ItemDataRole.UserRole)
        self.accept()
        action.trigger()

    def eventFilter(self, obj, event) -> bool:  # noqa: N802 - arrow keys move the list while typing
        if obj is self.search and isinstance(event, QKeyEvent) and event.type() == QKeyEvent.Type.KeyPress:
            if event.key() in (Qt.Key.Key_Down, Qt.Key.Key_Up):
                step = 1 if event.key() == Qt.Key.Key_Down else -1
                row = min(max(self.list.currentRow() + step, 0), self.list.count() - 1)
                self.list.setCurrentRow(row)
                return True
        return super().eventFilter(obj, event)
