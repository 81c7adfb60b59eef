"""The large view of one image, scaled up, with notes and a list (the concepts labelled in it, the top classes)."""

from __future__ import annotations

from collections.abc import Sequence

from PySide6.QtCore import Qt
from PySide6.QtGui import QImage, QPixmap
from PySide6.QtWidgets import QDialog, QHBoxLayout, QLabel, QListWidget, QVBoxLayout, QWidget


class ImageDetail(QDialog):
    """`show_image(image, title, notes, labels)`: non-modal, reused for every image opened."""

    SIZE = 560

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Image")
        self.picture = QLabel()
        self.picture.setAlignment(Qt.AlignmentFlag.AlignCenter)
        self.picture.setMinimumSize(self.SIZE, self.SIZE)
        self.notes = QLabel()
        self.notes.setWordWrap(True)
        self.labels = QListWidget()
        self.labels.setMinimumWidth(220)
        side = QVBoxLayout()
        side.addWidget(self.notes)
        self.list_title = QLabel("<b>Labels in this image</b>")
        side.addWidget(self.list_title)
        side.addWidget(self.labels, 1)
        layout = QHBoxLayout(self)
        layout.addWidget(self.picture, 1)
        layout.addLayout(side)

    def show_image(self, image: QImage, title: str, notes: str, labels: Sequence[str],
                   list_title: str = "Labels in this image") -> None:
        self.setWindowTitle(title)
        self.list_title.setText(f"<b>{list_title}</b>")
        pixmap = QPixmap.fromImage(image).scaled(self.SIZE, self.SIZE, Qt.AspectRatioMode.KeepAspectRatio,
                                                 Qt.TransformationMode.FastTransformation)
        self.picture.setPixmap(pixmap)
        self.notes.setText(notes)
        self.labels.clear()
        self.labels.addItems(list(labels))
        self.show()
        self.raise_()
