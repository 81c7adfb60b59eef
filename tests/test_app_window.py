"""The main window: demo world on start, every open action on real files and on bad ones, progress and cancel,
settings across a restart, export, keyboard (workspaces, next/previous, command palette), drag and drop."""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent, QImage
from windows import WAIT_MS, make_window, open_all, world_requests

from probescope.app.window.saved_settings import DEVICE, EXPORT_DEFAULTS, THEME
from probescope.core.errors import InputError
from probescope.jobs import inputs
from probescope.jobs.inputs import OpenRequest, classify_path
from probescope.jobs.protocol import Progress

pytestmark = pytest.mark.usefixtures("isolated_cache")


def test_window_opens_on_the_demo_world(qtbot, window, monkeypatch):
    monkeypatch.setattr(inputs, "DEMO_DATASET_IMAGES", 14)
    monkeypatch.setattr(inputs, "DEMO_SAMPLES", 20)
    window.open_demo_world()
    qtbot.waitUntil(lambda: all(ws.is_initial_work_done for ws in window.workspaces.values()), timeout=WAIT_MS)
    state = window.state
    assert state.model.name == "demo" and state.layer == "layer4"
    assert state.dataset.n_images == 14
    assert state.samples.length == 20
    assert state.judgments.simulated
    assert window.workspaces["dissection"].view.images.thumbnails.rowCount() == 12  # the unit's top 12 of 14 images
    window.set_workspace("gallery")  # (a workspace out of sight draws its views when shown)
    assert window.workspaces["gallery"].grid.thumbnails.rowCount() == 20
    assert "demo" in window.source_bar.buttons["model"].text()
    assert not window.notification.isVisible()


def test_the_workspace_on_screen_computes_first(qtbot, window, monkeypatch):
    """On the demo world, only the inputs the workspace on screen needs open at once: the others (and the work of
    the workspaces that need them) wait until its first results are shown, so none competes with them; a workspace
    shown meanwhile opens what it needs at once."""
    monkeypatch.setattr(inputs, "DEMO_DATASET_IMAGES", 14)
    monkeypatch.setattr(inputs, "DEMO_SAMPLES", 20)
    dissection = window.workspaces["dissection"]
    asked_when_first_shown = []
    dissection.first_results.connect(lambda: asked_when_first_shown.append(set(window._asked)))
    window.open_demo_world()
    assert set(window._asked) == {"model", "dataset"}
    qtbot.waitUntil(lambda: bool(asked_when_first_shown), timeout=WAIT_MS)
    assert dissection.units.rowCount() > 0 and asked_when_first_shown[0] == {"model", "dataset"}
    qtbot.waitUntil(lambda: all(ws.is_initial_work_done for ws in window.workspaces.values()), timeout=WAIT_MS)
    assert set(window._asked) == {"model", "dataset", "samples", "judgments"}


def test_a_workspace_shown_early_opens_what_it_needs(qtbot, window, monkeypatch):
    monkeypatch.setattr(inputs, "DEMO_DATASET_IMAGES", 14)
    monkeypatch.setattr(inputs, "DEMO_SAMPLES", 20)
    window.open_demo_world()
    window.set_workspace("similarity")
    assert "judgments" in window._asked and "samples" not in window._asked
    qtbot.waitUntil(lambda: all(ws.is_initial_work_done for ws in window.workspaces.values()), timeout=WAIT_MS)


def test_every_open_action_works_on_real_files(qtbot, window, small_world):
    open_all(qtbot, window, world_requests(small_world))
    state = window.state
    assert state.layer == "layer4"
    assert state.dataset.n_images == 12
    assert state.samples.length == 10
    assert len(state.judgments.trials) == 20
    window.set_workspace("gallery")  # (a workspace out of sight draws its views when shown)
    assert window.workspaces["gallery"].grid.thumbnails.rowCount() == 10
    assert "12 images" in window.source_bar.buttons["dataset"].text()
    recent = window.settings.recent.items()
    assert {item.kind for item in recent} == {"model", "dataset", "samples", "judgments"}
    dissection = window.workspaces["dissection"]
    assert dissection.units.rowCount() == 8  # the untrained test model's layer4 has 8 units
    # switching the layer is followed by the workspaces and the bar; quick switches: the last one wins
    for layer in ("layer2", "layer1", "layer3"):
        window.source_bar.layer.setCurrentText(layer)
    assert state.layer == "layer3"
    assert window.source_bar.layer.currentText() == "layer3"
    qtbot.waitUntil(lambda: "Units of layer3</b>:" in dissection.header.text(), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: not window.pool.active(), timeout=WAIT_MS)
    assert "layer3</b>:" in dissection.header.text() and dissection.units.rowCount() == 8
    # a device switch reloads the model there and is remembered
    with qtbot.waitSignal(window.opened, timeout=WAIT_MS) as blocker:
        window.compute.choose("cpu")
    assert blocker.args[0].kind == "model" and window.settings.get(DEVICE) == "cpu"


def _bad_files(tmp_path):
    (tmp_path / "bad.pt").write_bytes(b"not a torch file at all")
    (tmp_path / "bad_dataset").mkdir()
    (tmp_path / "bad_dataset" / "index.csv").write_text("image,ih\nx.jpg,notanumber\n")
    np.savez(tmp_path / "bad.npz", images=np.zeros((2, 3, 8, 8), np.float32))
    (tmp_path / "bad.hdf5").write_bytes(b"\x89HDF garbage")
    return [
        OpenRequest("model", str(tmp_path / "bad.pt")),
        OpenRequest("dataset", str(tmp_path / "bad_dataset")),
        OpenRequest("samples", str(tmp_path / "bad.npz")),
        OpenRequest("judgments", str(tmp_path / "bad.hdf5")),
    ]


def test_bad_files_fail_cleanly_and_keep_what_was_loaded(qtbot, window, small_world, tmp_path):
    open_all(qtbot, window, world_requests(small_world))
    before = {slot: window.state.get(slot) for slot in inputs.KINDS}
    thumbs = window.workspaces["dissection"].view.images.thumbnails.rowCount()
    for request in _bad_files(tmp_path):
        with qtbot.waitSignal(window.open_failed, timeout=WAIT_MS) as blocker:
            window.open(request)
        error = blocker.args[1]
        assert error.input_error, error.details  # a one-line InputError, shown as it is
        assert str(tmp_path) in error.message
        assert window.notification.isVisible()
        assert window.notification.message.text() == error.message
        assert window.state.get(request.kind) is before[request.kind]
        assert "loading" not in window.source_bar.buttons[request.kind].text()
    assert window.workspaces["dissection"].view.images.thumbnails.rowCount() == thumbs


def test_an_index_file_opens_only_its_rows(qtbot, window, small_world, tmp_path):
    """`--dataset DIR/index_ade20k.csv` (or dropping that file): the folder's images, the rows of that index."""
    import shutil

    root = tmp_path / "broden"
    shutil.copytree(small_world["dataset"], root)
    lines = (root / "index.csv").read_text().splitlines(keepends=True)
    (root / "index_ade20k.csv").write_text("".join(lines[:6]))
    request = classify_path(root / "index_ade20k.csv")
    assert request == OpenRequest("dataset", str(root / "index_ade20k.csv"))
    with qtbot.waitSignal(window.opened, timeout=WAIT_MS) as blocker:
        window.open(request)
    loaded = blocker.args[0]
    assert loaded.value.n_images == 5 and loaded.value.index_path == root / "index_ade20k.csv"
    assert loaded.label == "broden/index_ade20k.csv (5 images)"


def test_drag_and_drop_opens_by_kind(qtbot, window, small_world, tmp_path):
    assert classify_path(small_world["dataset"]).kind == "dataset"
    assert classify_path(small_world["dataset"] / "index.csv").kind == "dataset"
    assert classify_path(small_world["samples"]).kind == "samples"
    assert classify_path(small_world["judgments"]).kind == "judgments"
    assert classify_path(small_world["root"] / "model.pt").kind == "model"
    assert classify_path(small_world["image_root"] / "harbor-s").kind == "samples"
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(InputError, match="unknown file type"):
        classify_path(tmp_path / "notes.txt")

    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(small_world["dataset"]))])
    event = QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.NoButton,
                       Qt.KeyboardModifier.NoModifier)
    with qtbot.waitSignal(window.opened, timeout=WAIT_MS) as blocker:
        window.dropEvent(event)
    assert blocker.args[0].kind == "dataset"
    window.open_path(tmp_path / "notes.txt")
    assert "unknown file type" in window.notification.message.text()


def test_long_task_shows_progress_cancels_and_leaves_no_thread(qtbot, window):
    import time

    def long_task(ctx):
        for i in range(100_000):
            time.sleep(0.001)
            yield Progress(i / 100_000, f"step {i}")
        return "finished"

    results = []
    handle = window.pool.submit(long_task, name="long task", key="test", on_result=results.append)
    qtbot.waitUntil(lambda: window.progress.isVisible() and "step" in window.progress.label.text(), timeout=WAIT_MS)
    assert window.progress.bar.maximum() == 1000
    with qtbot.waitSignal(window.pool.finished, timeout=WAIT_MS):
        qtbot.mouseClick(window.progress.cancel_button, Qt.MouseButton.LeftButton)
    assert handle.cancelled and results == []
    qtbot.waitUntil(lambda: not window.progress.isVisible(), timeout=WAIT_MS)
    window.pool.submit(long_task, name="left running at close")
    window.close()  # cancels and joins: the autouse fixture fails the test if a thread survives
    assert window.pool.is_shut_down


def test_settings_survive_a_restart(qtbot, settings_path, small_world):
    first = make_window(qtbot, settings_path)
    first.resize(710, 507)  # within the offscreen screen (800x600)
    first.set_workspace("similarity")
    first.set_theme("dark")
    with qtbot.waitSignal(first.opened, timeout=WAIT_MS):
        first.open(OpenRequest("dataset", str(small_world["dataset"])))
    first.close()

    second = make_window(qtbot, settings_path)
    try:
        assert (second.width(), second.height()) == (710, 507)
        assert second.current_workspace().name == "similarity"
        assert second.settings.get(THEME) == "dark"
        recent = second.settings.recent.items("dataset")
        assert recent and OpenRequest.from_json(recent[0].spec).spec == str(small_world["dataset"])
        assert second.menus.recent.isEnabled()
    finally:
        second.set_theme("light")
        second.close()


def test_export_dialog_writes_files_that_open(qtbot, window, small_world, tmp_path):
    from PySide6.QtSvg import QSvgRenderer

    from probescope.app.figures.export_dialog import ExportDialog

    open_all(qtbot, window, world_requests(small_world)[:2], workspaces=("dissection",))
    targets = window.current_workspace().export_targets()
    names = [t.name for t in targets]
    assert names[0] == "Dissection" and "Unit card" in names
    for suffix in ("png", "svg", "pdf"):
        dialog = ExportDialog(targets, window.settings, window)
        dialog.size.setCurrentIndex(dialog.size.findData("custom"))  # the PNG size fields, not a paper preset
        dialog.format.setCurrentText(suffix.upper())
        dialog.path.setText(str(tmp_path / f"figure.{suffix}"))
        if suffix == "png":
            dialog.by_width.setChecked(True)
            dialog.width_box.setValue(2 * window.width())
        assert dialog.save() == tmp_path / f"figure.{suffix}"
    png = QImage(str(tmp_path / "figure.png"))
    assert png.width() == 2 * window.width()
    assert QSvgRenderer(str(tmp_path / "figure.svg")).isValid()
    assert (tmp_path / "figure.pdf").read_bytes().startswith(b"%PDF")
    assert window.settings.get(EXPORT_DEFAULTS).format == "pdf"


def test_keyboard_workspaces_items_and_command_palette(qtbot, window, small_world):
    open_all(qtbot, window, world_requests(small_world))
    qtbot.keyClick(window, Qt.Key.Key_3, Qt.KeyboardModifier.ControlModifier)
    assert window.current_workspace().name == "similarity"
    similarity = window.workspaces["similarity"]
    with qtbot.waitSignal(window.pool.finished, timeout=WAIT_MS):
        qtbot.keyClick(window, Qt.Key.Key_BracketRight, Qt.KeyboardModifier.ControlModifier)
    assert similarity.shown.trial == 1 and "trial 2 of 20" in similarity.view.caption.text()

    qtbot.keyClick(window, Qt.Key.Key_1, Qt.KeyboardModifier.ControlModifier)
    units = window.workspaces["dissection"].units
    units.select_unit(units.units()[0])
    rows = []
    for step in ("next_item", "next_item", "next_item", "previous_item"):
        getattr(window.current_workspace(), step)()
        rows.append(units.currentIndex().row())
    assert rows == [1, 2, 3, 2]

    palette = window.menus.show_command_palette()
    qtbot.keyClicks(palette.search, "gallery work")
    assert palette.visible_commands() == ["Gallery Workspace"]
    qtbot.keyClick(palette.search, Qt.Key.Key_Return)
    assert window.current_workspace().name == "gallery"
    assert not palette.isVisible()


def test_closing_while_the_demo_data_is_generated_is_quick(qtbot, settings_path, monkeypatch, tmp_path):
    import time

    from probescope.core.demo.dataset import is_complete

    monkeypatch.setenv("PROBESCOPE_CACHE", str(tmp_path / "fresh-cache"))
    monkeypatch.setattr(inputs, "DEMO_DATASET_IMAGES", 3000)
    window = make_window(qtbot, settings_path)
    window.open(OpenRequest("dataset", inputs.DEMO))
    qtbot.waitUntil(lambda: "rendering demo image" in window.progress.label.text(), timeout=WAIT_MS)
    t0 = time.monotonic()
    window.close()
    assert time.monotonic() - t0 < 5
    assert window.state.dataset is None
    assert not any(is_complete(p, 3000) for p in (tmp_path / "fresh-cache").iterdir())  # it is redone next time


@pytest.mark.filterwarnings("ignore:`torch.jit:FutureWarning")
@pytest.mark.parametrize("kernel", ["thread", "local"])
def test_torchscript_model_and_generator_open(qtbot, settings_path, small_world, tmp_path, answer_trust, kernel):
    """Code the user trusts runs where the computation runs: in a kernel, the generator is held there and the
    window streams its samples by their description (a kernel restarted meanwhile opens it again)."""
    import torch
    from torch import nn

    class Generator(nn.Module):
        def forward(self, z: torch.Tensor) -> torch.Tensor:
            return torch.tanh(z[:, :3, None, None].expand(-1, 3, 16, 16))

    class Classifier(nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x.mean(dim=(2, 3))

    torch.jit.script(Generator()).save(str(tmp_path / "gen.pt"))
    torch.jit.script(Classifier()).save(str(tmp_path / "clf.pt"))
    window = make_window(qtbot, settings_path, kernel)
    asked = answer_trust(accept=True)  # both files run code: the window asks once for each
    with qtbot.waitSignal(window.opened, timeout=WAIT_MS) as blocker:
        window.open(OpenRequest("samples", str(tmp_path / "gen.pt"), generator=(4, 6, 0)))
    assert blocker.args[0].value.length == 6
    with qtbot.waitSignal(window.opened, timeout=WAIT_MS) as blocker:
        window.open(OpenRequest("model", f"torchscript:{tmp_path / 'clf.pt'}"))
    assert window.state.layers() == ["output"]
    qtbot.waitUntil(lambda: window.workspaces["gallery"].is_initial_work_done and not window.pool.active(),
                    timeout=WAIT_MS)
    window.set_workspace("gallery")  # (a workspace out of sight draws its views when shown)
    assert window.workspaces["gallery"].grid.thumbnails.rowCount() == 6
    assert len(asked) == 2 and "gen.pt" in asked[0] and "clf.pt" in asked[1]
    if kernel == "local":
        os.kill(window.pool.kernel.pid, signal.SIGKILL)  # the held generator is gone with it
        qtbot.waitUntil(lambda: window.notification.isVisible(), timeout=WAIT_MS)
        gallery = window.workspaces["gallery"]
        gallery.run.reset(start=True)
        qtbot.waitUntil(lambda: not gallery.streaming and gallery.scores.n == 6, timeout=WAIT_MS)
    window.close()
