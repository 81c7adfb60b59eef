"""The open dialogs build the request the user described; the export dialog follows the chosen format."""

from __future__ import annotations

from probescope.app.export import ExportTarget
from probescope.app.export_dialog import ExportDialog
from probescope.app.open_dialogs import OpenJudgmentsDialog, OpenModelDialog, OpenSamplesDialog
from probescope.app.settings import Settings
from probescope.app.sources import OpenRequest


def test_model_dialog_specs(qtbot):
    dialog = OpenModelDialog(("alexnet", "resnet18"))
    qtbot.addWidget(dialog)
    dialog.file.edit.setText("/m/r.pth.tar")
    expected = {"auto": "/m/r.pth.tar", "torchscript": "torchscript:/m/r.pth.tar", "export": "export:/m/r.pth.tar",
                "torchvision": "resnet18:/m/r.pth.tar", "places365": "places365:resnet18:/m/r.pth.tar",
                "pickle": "pickle:/m/r.pth.tar"}
    dialog.arch.setCurrentText("resnet18")
    for index in range(dialog.kind.count()):
        dialog.kind.setCurrentIndex(index)
        kind = dialog.kind.currentData()
        assert dialog.request().spec == expected[kind]
        assert dialog.arch.isEnabled() == (kind in ("torchvision", "places365"))
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


def test_export_dialog_format_follows_suffix(qtbot, settings_path, tmp_path):
    from PySide6.QtWidgets import QLabel

    label = QLabel("figure")
    qtbot.addWidget(label)
    dialog = ExportDialog([ExportTarget("Unit table", label)], Settings(settings_path))
    qtbot.addWidget(dialog)
    assert dialog.path.text().endswith("unit_table.png")
    dialog.format.setCurrentText("SVG")
    assert dialog.path.text().endswith("unit_table.svg") and not dialog.width_box.isEnabled()
    dialog.path.setText(str(tmp_path / "no-such-dir" / "f.svg"))
    assert dialog.save() == tmp_path / "no-such-dir" / "f.svg"  # folders are created
    failures = []
    dialog.failed.connect(failures.append)
    dialog.path.setText(str(tmp_path / "f.gif"))
    assert dialog.save() is None and "cannot export" in failures[0]
