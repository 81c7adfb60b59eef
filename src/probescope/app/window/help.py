"""Help inside the app: the user guide's pages (docs/*.md, with their links and screenshots) in a browser window, and
every keyboard shortcut in one table.

The guide is read from the source tree's docs/ folder, or from assets/guide in a bundle (packaging/stage.py copies
it there); a copy installed without it says where the guide lives.
"""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import QUrl
from PySide6.QtGui import QAction
from PySide6.QtWidgets import QDialog, QHeaderView, QTableWidget, QTableWidgetItem, QTextBrowser, QVBoxLayout, QWidget

from probescope.assets import ASSETS_DIR

# Keys the views answer besides the menu shortcuts (which the table lists from the actions themselves).
VIEW_KEYS = (
    ("Up / Down", "the previous / next unit, sample or trial in the focused list"),
    ("Enter, double-click", "the large view of an image (Dissection, Gallery)"),
    ("Right click on a plot or the unit card", "export it, for a paper column or a full page, or copy it"),
    ("Type in the command palette", "menu commands, and the workspace's units, concepts, trials and sort orders"),
)


def guide_folder() -> Path | None:
    """Where the user guide's pages are: the source tree's docs/, else the bundle's copy; None when neither."""
    for folder in (ASSETS_DIR.parents[2] / "docs", ASSETS_DIR / "guide"):  # src/probescope/assets -> docs/
        if (folder / "README.md").is_file():
            return folder
    return None


class GuideWindow(QDialog):
    """The guide, page by page (Markdown, links followed inside the window)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("probescope user guide")
        self.setModal(False)
        self.resize(900, 760)
        self.browser = QTextBrowser()
        self.browser.setOpenExternalLinks(True)
        layout = QVBoxLayout(self)
        layout.addWidget(self.browser)

    def show_page(self, page: str = "README.md") -> None:
        folder = guide_folder()
        if folder is None:
            self.browser.setMarkdown("# The user guide is not installed with this copy\n\nIt is the `docs/` folder "
                                     "of probescope's source.")
        else:
            self.browser.setSearchPaths([str(folder)])
            self.browser.setSource(QUrl.fromLocalFile(str(folder / page)))
        self.show()
        self.raise_()


class ShortcutsDialog(QDialog):
    """Every menu command with its shortcut, then the keys the views answer."""

    def __init__(self, actions: list[QAction], parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Keyboard shortcuts")
        rows = [(a.shortcut().toString(), a.text().replace("&", "").rstrip("…")) for a in actions
                if not a.shortcut().isEmpty()]
        rows += list(VIEW_KEYS)
        self.table = QTableWidget(len(rows), 2)
        self.table.setHorizontalHeaderLabels(["keys", "what they do"])
        self.table.verticalHeader().setVisible(False)
        self.table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        for k, (keys, what) in enumerate(rows):
            self.table.setItem(k, 0, QTableWidgetItem(keys))
            self.table.setItem(k, 1, QTableWidgetItem(what))
        self.table.resizeColumnToContents(0)
        self.table.horizontalHeader().setSectionResizeMode(1, QHeaderView.ResizeMode.Stretch)
        layout = QVBoxLayout(self)
        layout.addWidget(self.table)
        self.resize(620, 520)
