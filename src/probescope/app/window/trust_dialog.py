"""The question asked before a file that runs code is loaded: what the file is, its SHA-256, and what trusting means.

The answer is remembered per content (the hash), so the same file is not asked about again, and a changed file
(same path, other hash) is, with a line saying it changed.
"""

from __future__ import annotations

from html import escape

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QDialog, QDialogButtonBox, QLabel, QVBoxLayout, QWidget

from probescope.core.trust import UntrustedFile

MEANING = ("Loading it runs code that is stored in the file, with your permissions: it can read, change or delete "
           "your files and send data elsewhere. probescope cannot check what that code does. Trust it only if you "
           "know where it comes from (you made it, or a source you trust published it and the SHA-256 matches "
           "theirs). Your answer is remembered for this exact content: if the file changes, you are asked again.")


class TrustDialog(QDialog):
    """Trust (accept) or not (reject) the refused file; `changed_from` is the hash trusted earlier at its path."""

    def __init__(self, refused: UntrustedFile, changed_from: str | None = None, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Trust this file to run code?")
        path = str(refused.path)
        lines = [f"<b>{escape(path)}</b> is a {escape(refused.kind)}.",
                 f"SHA-256: <tt>{refused.sha256}</tt>"]
        if changed_from:
            lines.append(f"<b>This file changed</b> since you trusted it (then SHA-256 <tt>{changed_from}</tt>).")
        self.summary = QLabel("<br>".join(lines))
        self.summary.setTextFormat(Qt.TextFormat.RichText)
        self.summary.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.summary.setWordWrap(True)
        meaning = QLabel(MEANING)
        meaning.setWordWrap(True)
        buttons = QDialogButtonBox()
        self.trust_button = buttons.addButton("Trust and Open", QDialogButtonBox.ButtonRole.AcceptRole)
        cancel = buttons.addButton(QDialogButtonBox.StandardButton.Cancel)
        cancel.setDefault(True)  # Enter never trusts by accident
        buttons.accepted.connect(self.accept)
        buttons.rejected.connect(self.reject)
        layout = QVBoxLayout(self)
        layout.addWidget(self.summary)
        layout.addWidget(meaning)
        layout.addWidget(buttons)
        self.setMinimumWidth(560)
