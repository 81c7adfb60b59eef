"""Dialogs that turn the user's choice into an `OpenRequest`: a model (file + how to read it), generator samples
(file or folder, generator settings) and judgments (file + catalog + image root + id base). Datasets need only a
folder. No dialog grants trust: a file that runs code when loaded is asked about when it is loaded (TrustDialog)."""

from __future__ import annotations

from PySide6.QtWidgets import (
    QComboBox,
    QDialog,
    QDialogButtonBox,
    QFileDialog,
    QFormLayout,
    QHBoxLayout,
    QLabel,
    QLineEdit,
    QPushButton,
    QWidget,
)

from probescope.app.window.saved_settings import DIALOG_CHOICES, Settings
from probescope.jobs.inputs import OpenRequest
from probescope.widgets.controls import spin_box

MODEL_KINDS = (
    ("auto", "Detect from the file"),
    ("torchscript", "TorchScript archive"),
    ("export", "torch.export program (.pt2)"),
    ("torchvision", "torchvision architecture + weights (state dict)"),
    ("places365", "Places365 checkpoint (.pth.tar)"),
    ("timm", "timm architecture + weights (.safetensors or state dict)"),
    ("openclip", "OpenCLIP visual tower + weights"),
    ("dinov2", "DINOv2 backbone, Meta's checkpoint (dinov2_vits14_pretrain.pth …)"),
    ("pickle", "Whole pickled model (runs code from the file)"),
)
NAMED_KINDS = ("torchvision", "places365", "timm", "openclip", "dinov2")  # kinds whose spec names an architecture
CODE_NOTE = ("TorchScript archives, torch.export programs and whole pickled models run code from the file when "
             "loaded: you are asked to trust the file (by its SHA-256) before it loads.")
ID_BASES = (("Detect (or ask)", None), ("0-based (psiz 0.4)", 0), ("1-based (later psiz)", 1))


class PathField(QWidget):
    """A line edit with a Browse button (file or folder)."""

    def __init__(self, caption: str, file_filter: str = "", folder: bool = False, parent: QWidget | None = None):
        super().__init__(parent)
        self.edit = QLineEdit()
        browse = QPushButton("Browse…")
        layout = QHBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.addWidget(self.edit, 1)
        layout.addWidget(browse)
        self._caption, self._filter, self._folder = caption, file_filter, folder
        browse.clicked.connect(self._browse)

    def _browse(self) -> None:
        if self._folder:
            path = QFileDialog.getExistingDirectory(self, self._caption, self.edit.text())
        else:
            path, _ = QFileDialog.getOpenFileName(self, self._caption, self.edit.text(), self._filter)
        if path:
            self.edit.setText(path)

    def text(self) -> str:
        return self.edit.text().strip()


def open_form(dialog: QDialog, rows: list[tuple[str, QWidget] | QWidget]) -> None:
    """The dialog's layout: its rows (labelled, or a widget alone), then Open and Cancel."""
    form = QFormLayout(dialog)
    for row in rows:
        if isinstance(row, tuple):
            form.addRow(*row)
        else:
            form.addRow(row)
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Open | QDialogButtonBox.StandardButton.Cancel)
    form.addRow(buttons)
    buttons.accepted.connect(dialog.accept)
    buttons.rejected.connect(dialog.reject)


class OpenModelDialog(QDialog):
    """A model file and how to read it. `archs` lists each named kind's architectures (`model_architectures`); the
    architecture box is editable, so a timm name that is not listed can be typed."""

    def __init__(self, archs: dict[str, tuple[str, ...]], parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Open model")
        self.archs = archs
        self.kind = QComboBox()
        for key, text in MODEL_KINDS:
            self.kind.addItem(text, key)
        self.arch = QComboBox()
        self.arch.setEditable(True)
        self.file = PathField("Model file", "Models (*.pt *.pth *.tar *.ckpt *.jit *.ts *.pt2 *.safetensors *.bin);;"
                              "All files (*)")
        note = QLabel(CODE_NOTE)
        note.setWordWrap(True)
        open_form(self, [("Kind", self.kind), ("Architecture", self.arch), ("File", self.file), note])
        self.kind.currentIndexChanged.connect(self._update)
        self._update()

    def _update(self) -> None:
        kind = self.kind.currentData()
        self.arch.setEnabled(kind in NAMED_KINDS)
        names = self.archs.get("torchvision" if kind == "places365" else kind, ())
        current = self.arch.currentText()
        self.arch.blockSignals(True)
        self.arch.clear()
        self.arch.addItems(names)
        if current in names:
            self.arch.setCurrentText(current)
        self.arch.blockSignals(False)

    def choices(self) -> dict[str, str]:
        """What the dialog was set to, to offer again next time."""
        return {"kind": str(self.kind.currentData()), "arch": self.arch.currentText(), "file": self.file.text()}

    def restore(self, choices: dict) -> None:
        index = self.kind.findData(choices.get("kind"))
        if index >= 0:
            self.kind.setCurrentIndex(index)
        if choices.get("arch"):
            self.arch.setCurrentText(str(choices["arch"]))
        self.file.edit.setText(str(choices.get("file", "")))

    def request(self) -> OpenRequest:
        kind, path = self.kind.currentData(), self.file.text()
        arch = self.arch.currentText().strip()
        spec = {"auto": path, "torchscript": f"torchscript:{path}", "export": f"export:{path}",
                "torchvision": f"{arch}:{path}", "places365": f"places365:{arch}:{path}", "timm": f"timm:{arch}:{path}",
                "openclip": f"openclip:{arch}:{path}", "dinov2": f"dinov2:{arch}:{path}",
                "pickle": f"pickle:{path}"}[kind]
        return OpenRequest("model", spec)


class OpenJudgmentsDialog(QDialog):
    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Open similarity judgments")
        self.file = PathField("Judgments", "Judgments (*.hdf5 *.h5 *.zip *.csv);;All files (*)")
        self.catalog = PathField("Catalog", "Catalogs (*.hdf5 *.h5 *.csv *.txt);;All files (*)")
        self.image_root = PathField("Image root", folder=True)
        self.catalog.edit.setPlaceholderText("optional: catalog.hdf5 beside the file is used when present")
        self.image_root.edit.setPlaceholderText("optional: the folder the catalog's image paths start from")
        self.index_base = QComboBox()
        for text, base in ID_BASES:
            self.index_base.addItem(text, base)
        self.index_base.setToolTip("How a psiz .hdf5 file numbers its stimuli, when neither the file nor a catalog "
                                   "tells (you are told when that is the case)")
        open_form(self, [("Judgments", self.file), ("Catalog", self.catalog), ("Image root", self.image_root),
                         ("Stimulus ids", self.index_base)])

    def request(self) -> OpenRequest:
        return OpenRequest("judgments", self.file.text(), self.catalog.text(), self.image_root.text(),
                           index_base=self.index_base.currentData())


class OpenSamplesDialog(QDialog):
    """Generator samples: a folder of images, a .npz/.npy array, or a TorchScript generator with its settings."""

    GENERATOR_SUFFIXES = (".pt", ".pth", ".ts", ".jit")

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.setWindowTitle("Open generator samples")
        self.file = PathField("Samples file", "Samples (*.npz *.npy *.pt *.pth *.ts *.jit);;All files (*)")
        self.folder = PathField("Folder of sample images", folder=True)
        self.z_dim = spin_box(1, 100_000, 128)
        self.n = spin_box(1, 10_000_000, 50_000)
        self.classes = spin_box(0, 100_000, 0, "0 for an unconditional generator")
        open_form(self, [("File (.npz, .npy, TorchScript generator)", self.file),
                         ("or a folder of images", self.folder), ("Generator noise size", self.z_dim),
                         ("Samples to draw", self.n), ("Generator classes", self.classes)])
        self.file.edit.textChanged.connect(self._update)
        self._update()

    def _is_generator(self) -> bool:
        return self.file.text().lower().endswith(self.GENERATOR_SUFFIXES)

    def _update(self) -> None:
        for w in (self.z_dim, self.n, self.classes):
            w.setEnabled(self._is_generator())

    def request(self) -> OpenRequest | None:
        if self.file.text():
            generator = (self.z_dim.value(), self.n.value(), self.classes.value()) if self._is_generator() else ()
            return OpenRequest("samples", self.file.text(), generator=generator)
        return OpenRequest("samples", self.folder.text()) if self.folder.text() else None


def ask_request(kind: str, parent: QWidget, settings: Settings,
                architectures: dict[str, tuple[str, ...]] | None = None) -> OpenRequest | None:
    """Ask for a file or folder of `kind` ('model', 'dataset', 'samples', 'judgments'); None when cancelled. The
    model dialog offers `architectures` (core.models.architecture_names) and opens with the kind, architecture and
    file chosen last time."""
    if kind == "model":
        dialog = OpenModelDialog(architectures, parent)
        dialog.restore(settings.get(DIALOG_CHOICES, "open_model"))
        if not (dialog.exec() and dialog.file.text()):
            return None
        settings.set(DIALOG_CHOICES, dialog.choices(), "open_model")
        return dialog.request()
    if kind == "judgments":
        dialog = OpenJudgmentsDialog(parent)
        return dialog.request() if dialog.exec() and dialog.file.text() else None
    if kind == "dataset":
        folder = QFileDialog.getExistingDirectory(parent, "Open probing dataset (Broden format)")
        return OpenRequest("dataset", folder) if folder else None
    dialog = OpenSamplesDialog(parent)
    return dialog.request() if dialog.exec() else None
