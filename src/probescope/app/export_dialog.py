"""The export dialog: which view, which format, how large, margins or not, where. Remembers its choices."""

from __future__ import annotations

from pathlib import Path

from PySide6.QtCore import Signal
from PySide6.QtWidgets import (
    QCheckBox,
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QDoubleSpinBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLineEdit,
    QPushButton,
    QRadioButton,
    QWidget,
)

from probescope.app.export import FORMATS, ExportTarget, export_widget
from probescope.app.settings import EXPORT_SCALE, EXPORT_WIDTH, ExportDefaults, Settings
from probescope.core.errors import InputError
from probescope.widgets.controls import spin_box


class ExportDialog(QDialog):
    """Non-modal; `exported(path)` on success, `failed(message)` when the file cannot be written."""

    exported = Signal(str)
    failed = Signal(str)

    def __init__(self, targets: list[ExportTarget], settings: Settings, parent: QWidget | None = None,
                 current: int = 0):
        super().__init__(parent)
        self.setWindowTitle("Export figure")
        self.targets = targets
        self.settings = settings
        defaults = settings.export_defaults()
        self.target = QComboBox()
        self.target.addItems([t.name for t in targets])
        self.format = QComboBox()
        self.format.addItems([f.upper() for f in FORMATS])
        self.format.setCurrentText(defaults.format.upper())
        self.by_width = QRadioButton("Width (px)")
        self.width_box = spin_box(int(EXPORT_WIDTH.low), int(EXPORT_WIDTH.high), defaults.width or 2400)
        self.by_scale = QRadioButton("Scale")
        self.scale = QDoubleSpinBox()
        self.scale.setRange(EXPORT_SCALE.low, EXPORT_SCALE.high)
        self.scale.setSingleStep(0.5)
        self.scale.setValue(defaults.scale)
        (self.by_width if defaults.width else self.by_scale).setChecked(True)
        size_row = QHBoxLayout()
        for w in (self.by_width, self.width_box, self.by_scale, self.scale):
            size_row.addWidget(w)
        self.margin_free = QCheckBox("Margin-free (trim the plain background around the content)")
        self.margin_free.setChecked(defaults.margin_free)
        self.path = QLineEdit()
        browse = QPushButton("Browse…")
        path_row = QHBoxLayout()
        path_row.addWidget(self.path, 1)
        path_row.addWidget(browse)
        folder = Path(defaults.folder) if defaults.folder else Path.home()
        self.path.setText(str(folder / f"{file_stem(targets[current].name)}.{defaults.format}"))
        self.target.setCurrentIndex(current)
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        form = QFormLayout(self)
        form.addRow("View", self.target)
        form.addRow("Format", self.format)
        form.addRow("PNG size", size_row)
        form.addRow(self.margin_free)
        form.addRow("File", path_row)
        form.addRow(buttons)
        browse.clicked.connect(self._browse)
        self.format.currentTextChanged.connect(self._format_changed)
        self.target.currentIndexChanged.connect(self._target_changed)
        buttons.accepted.connect(self.save)
        buttons.rejected.connect(self.reject)
        self._format_changed(self.format.currentText())

    def _format_changed(self, text: str) -> None:
        fmt = text.lower()
        for w in (self.by_width, self.width_box, self.by_scale, self.scale):
            w.setEnabled(fmt == "png")
        path = Path(self.path.text())
        self.path.setText(str(path.with_suffix(f".{fmt}")))

    def _target_changed(self, index: int) -> None:
        """The file is named after the view (in the folder chosen)."""
        path = Path(self.path.text())
        self.path.setText(str(path.with_name(f"{file_stem(self.targets[index].name)}{path.suffix}")))

    def _browse(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export figure", self.path.text(),
                                              "PNG (*.png);;SVG (*.svg);;PDF (*.pdf)")
        if path:
            self.path.setText(path)
            suffix = Path(path).suffix.lower().lstrip(".")
            if suffix in FORMATS:
                self.format.setCurrentText(suffix.upper())

    def save(self) -> Path | None:
        """Export with the chosen options; the options become the new defaults."""
        path = Path(self.path.text()).expanduser()
        width = self.width_box.value() if self.by_width.isChecked() else None
        scale = None if width else self.scale.value()
        target = self.targets[self.target.currentIndex()]
        try:
            export_widget(target.widget, path, width=width, scale=scale, margin_free=self.margin_free.isChecked())
        except (InputError, OSError) as exc:
            self.failed.emit(str(exc))
            return None
        self.settings.set_export_defaults(ExportDefaults(self.format.currentText().lower(), width,
                                                         self.scale.value(), self.margin_free.isChecked(),
                                                         str(path.parent)))
        self.exported.emit(str(path))
        self.accept()
        return path


def file_stem(view: str) -> str:
    """'IoU and DA of the explanations' -> 'iou_and_da_of_the_explanations'."""
    return "".join(c if c.isalnum() else "_" for c in view.lower()).strip("_")
