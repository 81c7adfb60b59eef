"""The export dialog: which view, which size (a paper preset, the view's size on screen, or a custom PNG size), which
format, margins, colours, where. Remembers its choices; the format follows the file name's suffix and back."""

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

from probescope.app.figures.export import (
    FORMATS,
    PRESETS,
    ExportTarget,
    Preset,
    export_preset,
    export_widget,
    figure_colours,
)
from probescope.app.window.saved_settings import EXPORT_DEFAULTS, EXPORT_SCALE, EXPORT_WIDTH, ExportDefaults, Settings
from probescope.core.errors import InputError
from probescope.widgets.controls import spin_box

CUSTOM = "custom"
FILTERS = "PNG (*.png);;SVG (*.svg);;PDF (*.pdf)"


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
        defaults = settings.get(EXPORT_DEFAULTS)
        self.target = QComboBox()
        self.target.addItems([t.name for t in targets])
        self.size = QComboBox()
        for preset in PRESETS:
            self.size.addItem(preset.name, preset.key)
        self.size.addItem("Custom size (PNG pixels)", CUSTOM)
        self.size.setCurrentIndex(max(self.size.findData(defaults.preset), 0))
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
        self.follow_theme = QCheckBox("In the window's theme (otherwise light, for paper)")
        self.follow_theme.setChecked(defaults.follow_theme)
        self.path = QLineEdit()
        browse = QPushButton("Browse…")
        path_row = QHBoxLayout()
        path_row.addWidget(self.path, 1)
        path_row.addWidget(browse)
        self.target.setCurrentIndex(current)
        self.path.setText(str(default_folder(defaults) / file_name(targets[current], self.preset(), defaults.format)))
        buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Save | QDialogButtonBox.StandardButton.Cancel)
        form = QFormLayout(self)
        form.addRow("View", self.target)
        form.addRow("Size", self.size)
        form.addRow("PNG size", size_row)
        form.addRow("Format", self.format)
        form.addRow(self.margin_free)
        form.addRow(self.follow_theme)
        form.addRow("File", path_row)
        form.addRow(buttons)
        browse.clicked.connect(lambda: self._browse())
        self.format.currentTextChanged.connect(lambda _text: self._rename())
        self.size.currentIndexChanged.connect(lambda _index: self._rename())
        self.target.currentIndexChanged.connect(lambda _index: self._rename())
        self.path.textEdited.connect(lambda _text: self._suffix_changed())
        buttons.accepted.connect(lambda: self.save())
        buttons.rejected.connect(self.reject)
        self._rename()

    def preset(self) -> Preset | None:
        """The chosen preset; None for the custom PNG size."""
        key = self.size.currentData()
        return next((p for p in PRESETS if p.key == key), None)

    def _rename(self) -> None:
        """The file is named after the view, what it shows and the size, in the folder chosen."""
        path = Path(self.path.text())
        target = self.targets[self.target.currentIndex()]
        self.path.setText(str(path.with_name(file_name(target, self.preset(), self.format.currentText().lower()))))
        self._enable()

    def _enable(self) -> None:
        """The PNG size fields apply to the custom size of a PNG only."""
        custom = self.preset() is None and self.format.currentText() == "PNG"
        for w in (self.by_width, self.width_box, self.by_scale, self.scale):
            w.setEnabled(custom)

    def _suffix_changed(self) -> None:
        """A file name typed with another suffix (.svg) chooses that format (and keeps the name as typed)."""
        suffix = Path(self.path.text()).suffix.lower().lstrip(".")
        if suffix in FORMATS and suffix != self.format.currentText().lower():
            self.format.blockSignals(True)
            self.format.setCurrentText(suffix.upper())
            self.format.blockSignals(False)
            self._enable()

    def _browse(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export figure", self.path.text(), FILTERS)
        if path:
            self.path.setText(path)
            self._suffix_changed()

    def save(self) -> Path | None:
        """Export with the chosen options; the options (and the folder) become the new defaults."""
        path = Path(self.path.text()).expanduser()
        self._suffix_changed()
        preset = self.preset()
        target = self.targets[self.target.currentIndex()]
        width = self.width_box.value() if self.by_width.isChecked() else None
        options = {"margin_free": self.margin_free.isChecked()}
        try:
            if preset is not None:
                export_preset(target.widget, path, preset, follow_theme=self.follow_theme.isChecked(), **options)
            else:
                with figure_colours(self.follow_theme.isChecked()):
                    export_widget(target.widget, path, width=width, scale=None if width else self.scale.value(),
                                  **options)
        except (InputError, OSError) as exc:
            self.failed.emit(str(exc))
            return None
        self.settings.set(EXPORT_DEFAULTS, ExportDefaults(
            self.format.currentText().lower(), width, self.scale.value(), self.margin_free.isChecked(),
            str(path.parent), self.size.currentData(), self.follow_theme.isChecked(), target.name))
        self.exported.emit(str(path))
        self.accept()
        return path


def default_folder(defaults: ExportDefaults) -> Path:
    """Where figures go unless told otherwise: the folder of the last one written, else the working folder."""
    folder = Path(defaults.folder) if defaults.folder else Path.cwd()
    return folder if folder.is_dir() else Path.cwd()


def file_stem(view: str) -> str:
    """'IoU and DA of the explanations' -> 'iou_and_da_of_the_explanations'."""
    return "".join(c if c.isalnum() else "_" for c in view.lower()).strip("_")


def file_name(target: ExportTarget, preset: Preset | None, fmt: str) -> str:
    """'unit_card_unit_17_3.5in.png': the view, what it shows (one unit, one trial) and the preset's width."""
    parts = [file_stem(target.name), file_stem(target.subject)]
    if preset is not None and preset.width_in is not None:
        parts.append(f"{preset.width_in:g}in")
    return "_".join(p for p in parts if p) + f".{fmt}"
