"""The open dialogs build the request the user described; the export dialog follows the chosen format."""

from __future__ import annotations

from probescope.app.figures.export import ExportTarget
from probescope.app.figures.export_dialog import ExportDialog
from probescope.app.window.open_dialogs import OpenJudgmentsDialog, OpenModelDialog, OpenSamplesDialog
from probescope.app.window.saved_settings import EXPORT_DEFAULTS, Settings
from probescope.jobs.inputs import OpenRequest


def test_model_dialog_specs(qtbot):
    archs = {"torchvision": ("alexnet", "resnet18", "vit_b_16"),
             "timm": ("deit_small_patch16_224", "vit_small_patch14_reg4_dinov2"),
             "openclip": ("RN50", "ViT-B-32"), "dinov2": ("vits14", "vits14-reg")}
    dialog = OpenModelDialog(archs)
    qtbot.addWidget(dialog)
    dialog.file.edit.setText("/m/r.pth.tar")
    expected = {"auto": "/m/r.pth.tar", "torchscript": "torchscript:/m/r.pth.tar", "export": "export:/m/r.pth.tar",
                "torchvision": "resnet18:/m/r.pth.tar", "places365": "places365:resnet18:/m/r.pth.tar",
                "timm": "timm:vit_small_patch14_reg4_dinov2:/m/r.pth.tar", "openclip": "openclip:ViT-B-32:/m/r.pth.tar",
                "dinov2": "dinov2:vits14-reg:/m/r.pth.tar", "pickle": "pickle:/m/r.pth.tar"}
    picks = {"torchvision": "resnet18", "places365": "resnet18", "timm": "vit_small_patch14_reg4_dinov2",
             "openclip": "ViT-B-32", "dinov2": "vits14-reg"}
    for index in range(dialog.kind.count()):
        dialog.kind.setCurrentIndex(index)
        kind = dialog.kind.currentData()
        if kind in picks:
            listed = [dialog.arch.itemText(i) for i in range(dialog.arch.count())]
            assert listed == list(archs["torchvision" if kind == "places365" else kind])  # the kind's own names
            dialog.arch.setCurrentText(picks[kind])
        assert dialog.request().spec == expected[kind]
        assert dialog.arch.isEnabled() == (kind in picks)
    dialog.kind.setCurrentIndex(dialog.kind.findData("timm"))
    dialog.arch.setCurrentText("eva02_small_patch14_224")  # a name the list does not hold can be typed
    assert dialog.request().spec == "timm:eva02_small_patch14_224:/m/r.pth.tar"
    assert not hasattr(dialog, "trust")  # no dialog grants trust: loading asks (see test_app_trust)


def test_samples_and_judgments_dialogs(qtbot):
    samples = OpenSamplesDialog()
    qtbot.addWidget(samples)
    samples.folder.edit.setText("/s")
    assert samples.request() == OpenRequest("samples", "/s")
    samples.file.edit.setText("/g.ts")
    assert samples.z_dim.isEnabled()
    samples.z_dim.setValue(64)
    samples.n.setValue(100)
    assert samples.request() == OpenRequest("samples", "/g.ts", generator=(64, 100, 0))
    samples.file.edit.setText("/a.npz")
    assert not samples.z_dim.isEnabled() and samples.request() == OpenRequest("samples", "/a.npz")

    judgments = OpenJudgmentsDialog()
    qtbot.addWidget(judgments)
    judgments.file.edit.setText("/j/obs.hdf5")
    judgments.image_root.edit.setText("/img")
    assert judgments.request() == OpenRequest("judgments", "/j/obs.hdf5", "", "/img")
    judgments.index_base.setCurrentIndex(2)
    assert judgments.request().index_base == 1
    assert OpenRequest.from_json(judgments.request().to_json()) == judgments.request()


def test_export_dialog_names_follows_the_suffix_and_remembers(qtbot, settings_path, tmp_path, monkeypatch):
    """The name says which view, which unit and which size; a typed .svg makes the format SVG and the format's
    choice renames the file; the folder, the size, the format and the colours chosen are the next defaults."""
    from PySide6.QtCore import Qt
    from PySide6.QtWidgets import QLabel

    monkeypatch.chdir(tmp_path)  # the first folder offered: the working one (no figure written yet)
    card, table = QLabel("card"), QLabel("table")
    for w in (card, table):
        qtbot.addWidget(w)
    settings = Settings(settings_path)
    dialog = ExportDialog([ExportTarget("Unit card", card, "unit 17"), ExportTarget("Unit table", table)], settings)
    qtbot.addWidget(dialog)
    assert dialog.path.text() == str(tmp_path / "unit_card_unit_17_3.5in.png")  # the paper column by default
    assert dialog.preset().key == "column" and not dialog.follow_theme.isChecked()
    dialog.path.clear()
    qtbot.keyClicks(dialog.path, str(tmp_path / "figs" / "card.svg"))
    assert dialog.format.currentText() == "SVG" and dialog.path.text().endswith("card.svg")  # the name as typed
    dialog.format.setCurrentText("PDF")
    assert dialog.path.text() == str(tmp_path / "figs" / "unit_card_unit_17_3.5in.pdf")
    dialog.target.setCurrentIndex(1)
    assert dialog.path.text().endswith("unit_table_3.5in.pdf")
    dialog.size.setCurrentIndex(dialog.size.findData("custom"))
    assert dialog.path.text().endswith("unit_table.pdf") and not dialog.width_box.isEnabled()
    dialog.format.setCurrentText("PNG")
    assert dialog.width_box.isEnabled()
    dialog.size.setCurrentIndex(dialog.size.findData("page"))
    dialog.follow_theme.setChecked(True)
    dialog.path.setText(str(tmp_path / "figs" / "table.svg"))
    assert dialog.save() == tmp_path / "figs" / "table.svg"  # folders are created; the suffix decides
    defaults = settings.get(EXPORT_DEFAULTS)
    assert (defaults.folder, defaults.format, defaults.preset, defaults.follow_theme) == (
        str(tmp_path / "figs"), "svg", "page", True)

    again = ExportDialog([ExportTarget("Unit card", card, "unit 3")], Settings(settings_path))
    qtbot.addWidget(again)
    assert again.path.text() == str(tmp_path / "figs" / "unit_card_unit_3_7in.svg")  # the last folder used
    assert again.follow_theme.checkState() == Qt.CheckState.Checked and again.preset().key == "page"
    failures = []
    again.failed.connect(failures.append)
    again.path.setText(str(tmp_path / "f.gif"))
    assert again.save() is None and "cannot export" in failures[0]
