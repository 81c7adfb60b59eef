"""Browsing a `probescope batch` output folder in the Dissection workspace: every job listed with its state and the
layer's counts (checked against a direct count over the saved units), each merged layer shown as it was saved (no
re-dissection, the batch's cached activations reused), the loaded inputs taking over when they change, a running
or damaged batch described, and the window's drop, menu and `gui --batch` entry points."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
from PySide6.QtCore import QMimeData, QPointF, Qt, QUrl
from PySide6.QtGui import QDropEvent, QImage

from probescope.app.dissection.workspace import DissectionWorkspace
from probescope.app.window.main_window import MainWindow
from probescope.app.window.saved_settings import Settings
from probescope.core.dissection.results import DissectionResult
from probescope.core.dissection.settings import DissectionSettings
from probescope.jobs.dissection.saved_layers import JOB_COLUMNS
from probescope.jobs.inputs import OpenRequest
from probescope.main import main

pytestmark = pytest.mark.usefixtures("isolated_cache")
WAIT_MS = 120_000
MANIFEST = """[dataset]
path = "data"

[settings]
chunk_units = 48
max_length = 2
min_samples = 4
searches = ["iou", "da-select", "da-stop"]

[[models]]
spec = "demo"
layers = ["layer4"]

[[models]]
name = "random"
activations = "act.npy"
"""


@pytest.fixture(scope="module")
def batch(tmp_path_factory):
    """A finished batch over 80 demo images: the demo model's layer4 (128 units) and random activations (10 units),
    run with the session's cache (the one `isolated_cache` gives the tests), as a user's batch fills theirs."""
    from probescope.core.demo.dataset import write_demo_dataset

    root = tmp_path_factory.mktemp("batchgui")
    write_demo_dataset(root / "data", n_images=80)
    np.save(root / "act.npy", np.random.default_rng(1).gamma(2.0, size=(80, 10, 4, 4)).astype(np.float32))
    (root / "zoo.toml").write_text(MANIFEST)
    cache = tmp_path_factory.getbasetemp() / "probescope-cache"
    cache.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as m:
        m.setenv("PROBESCOPE_CACHE", str(cache))
        assert main(["batch", str(root / "zoo.toml"), "--out", str(root / "zoo")]) == 0
    return root


@pytest.fixture
def env(make_workspace):
    return make_workspace(DissectionWorkspace)


def settle(qtbot, ws, pool, condition=lambda: True) -> None:
    qtbot.waitUntil(lambda: condition() and not pool.active() and ws.unit_images.ready, timeout=WAIT_MS)


def cells(ws) -> list[list]:
    t = ws.batch.jobs
    return [[t.value(r, c) for c in range(t.columnCount())] for r in range(t.rowCount())]


def click_job(qtbot, ws, row: int) -> None:
    t = ws.batch.jobs
    qtbot.mouseClick(t.viewport(), Qt.MouseButton.LeftButton, pos=t.visualRect(t.model().index(row, 1)).center())


def test_every_job_is_listed_and_browsable_as_saved(qtbot, env, batch, isolated_cache):
    ws, pool, state = env
    activations_before = sorted((isolated_cache / "activations").iterdir())
    ws.open_batch(batch / "zoo")
    settle(qtbot, ws, pool, lambda: ws.is_initial_work_done)
    assert ws.batch.isVisible()  # the Batch panel is brought to the front
    assert "done, 4/4 chunks, 2 of 2 layers merged" in ws.batch.caption.text()

    # the table's numbers, against a direct count over the saved units
    saved = DissectionResult.load(batch / "zoo/demo/layer4/dissection.json")
    nd = [u.netdissect for u in saved.units.values()]
    good = [e for e in nd if e is not None and e.iou > 0.04]
    comp = [u.explanations["iou"] for u in saved.units.values()]
    row = dict(zip(JOB_COLUMNS, cells(ws)[0], strict=True))
    assert row["model"] == "demo" and row["layer"] == "layer4" and row["state"] == "done" and row["units"] == 128
    assert row["interp."] == len(good) > 10 and row["conc."] == len({e.label for e in good}) > 5
    assert row["ND IoU"] == pytest.approx(np.mean([e.iou if e else 0.0 for e in nd]))
    assert row["comp IoU"] == pytest.approx(np.mean([e.iou if e else 0.0 for e in comp]))
    assert row["spec."] == sum(u.explanations["da-stop"].length == 1 and u.explanations["iou"].length > 1
                               for u in saved.units.values())
    assert ws.batch.concepts.names == ["demo / layer4", "random / units"]
    assert list(ws.batch.concepts.values) == [row["conc."], cells(ws)[1][6]]

    # the first merged job is on screen: the saved result itself, with overlays, never re-dissected
    d = ws.data
    assert d.origin == "batch zoo" and d.layer == "layer4" and d.result.to_json() == saved.to_json()
    assert ws.units.rowCount() == 128 and len(ws.overlays) == 12 and ws.view.images.thumbnails.rowCount() == 12
    assert "from batch zoo" in ws.header.text() and not ws.runs.run.isEnabled()
    assert d.settings == DissectionSettings(max_length=2, min_samples=4, searches=("iou", "da-select", "da-stop"))
    assert sorted((isolated_cache / "activations").iterdir()) == activations_before  # the batch's cache, reused

    # a click on the precomputed-activations job shows it, activations read from the batch's file
    click_job(qtbot, ws, 1)
    settle(qtbot, ws, pool, lambda: ws.data.layer == "units")
    assert ws.units.rowCount() == 10 and ws.data.result.n_units == 10
    assert np.array_equal(ws.data.activations, np.load(batch / "act.npy"))
    assert len(ws.overlays) == 12
    ws.step(1)  # the unit table still walks
    qtbot.waitUntil(lambda: ws.unit == ws.units.current_unit(), timeout=WAIT_MS)


def test_loaded_inputs_are_reused_and_take_over_again(qtbot, env, batch, monkeypatch, open_input):
    ws, pool, state = env
    monkeypatch.setattr(ws, "settings", DissectionSettings(max_length=1, searches=("iou",)))
    open_input(pool, state, OpenRequest("model", "demo"))
    open_input(pool, state, OpenRequest("dataset", str(batch / "data")))
    settle(qtbot, ws, pool, lambda: ws.data is not None and ws.data.result.complete)
    live = ws.data
    assert live.origin == "" and ws.runs.run.isEnabled()

    ws.open_batch(batch / "zoo")
    settle(qtbot, ws, pool, lambda: ws.data.origin != "")
    assert ws.data.dataset is state.dataset and ws.data.store is live.store  # the loaded dataset and its labels

    qtbot.mouseClick(ws.batch.live, Qt.MouseButton.LeftButton)  # back to the loaded model: from the disk cache
    settle(qtbot, ws, pool, lambda: ws.data.origin == "")
    assert ws.data.result.to_json() == live.result.to_json() and ws.runs.run.isEnabled()

    click_job(qtbot, ws, 0)
    settle(qtbot, ws, pool, lambda: ws.data.origin != "")
    state.set_layer("layer3")  # a change of the loaded inputs shows them again
    assert ws.data is None and ws.units.rowCount() == 0  # nothing of the saved result stays on screen
    settle(qtbot, ws, pool, lambda: ws.data is not None and ws.data.layer == "layer3" and ws.data.result.complete)
    assert ws.data.origin == "" and "from batch" not in ws.header.text()


def test_running_damaged_and_moved_batches_are_described(qtbot, env, batch, tmp_path, open_input):
    ws, pool, state = env
    ws.open_batch(tmp_path)
    qtbot.waitUntil(lambda: "no status.json" in ws.batch.message.text(), timeout=WAIT_MS)
    assert str(tmp_path) in ws.batch.message.text()

    # a batch still running: its second job has 1 of 3 chunks, the first job's file is damaged
    running = tmp_path / "running"
    shutil.copytree(batch / "zoo", running)
    status = json.loads((running / "status.json").read_text())
    status["state"] = "running"
    status["jobs"][1].update(state="running", chunks_done=1, chunks_total=3)
    (running / "status.json").write_text(json.dumps(status))
    (running / "random/units/dissection.json").unlink()
    (running / "demo/layer4/dissection.json").write_text("{broken")
    ws.open_batch(running)
    qtbot.waitUntil(lambda: ws.is_initial_work_done and not pool.active(), timeout=WAIT_MS)
    assert [r[3] for r in cells(ws)] == ["unreadable", "running 1/3"]
    assert cells(ws)[1][5:] == [None] * 5
    assert ws.browser.timer.isActive()  # a running batch is read again while shown
    click_job(qtbot, ws, 0)
    assert "damaged dissection file" in ws.batch.message.text() and "dissection.json" in ws.batch.message.text()
    click_job(qtbot, ws, 1)
    assert ws.batch.message.text() == "random / units is not merged yet (running 1/3)"
    assert ws.data is None

    # a batch copied from a cluster: its dataset folder is not here, and no loaded dataset matches it
    moved = tmp_path / "moved"
    shutil.copytree(batch / "zoo", moved)
    path = moved / "demo/layer4/dissection.json"
    doc = json.loads(path.read_text())
    doc["dataset"]["root"] = "/cluster/data/broden"
    path.write_text(json.dumps(doc))
    ws.open_batch(moved)
    qtbot.waitUntil(lambda: "not on this machine" in ws.batch.message.text(), timeout=WAIT_MS)
    assert "/cluster/data/broden" in ws.batch.message.text()
    # ... and with a copy of it loaded, the job opens against the copy
    shutil.copytree(batch / "data", tmp_path / "local-data")
    open_input(pool, state, OpenRequest("dataset", str(tmp_path / "local-data")))
    ws.show_job(0)
    settle(qtbot, ws, pool, lambda: ws.data is not None and ws.data.origin == "batch moved")
    assert ws.data.dataset is state.dataset and len(ws.overlays) == 12


def test_window_opens_a_dropped_batch_and_gui_takes_one(qtbot, batch, settings_path, tmp_path, small_world):
    window = MainWindow(Settings(settings_path), device="cpu")
    qtbot.addWidget(window)
    window.show()
    ws = window.workspaces["dissection"]
    window.set_workspace("gallery")
    mime = QMimeData()
    mime.setUrls([QUrl.fromLocalFile(str(batch / "zoo" / "status.json"))])
    window.dropEvent(QDropEvent(QPointF(10, 10), Qt.DropAction.CopyAction, mime, Qt.MouseButton.LeftButton,
                                Qt.KeyboardModifier.NoModifier))
    assert window.current_workspace() is ws
    qtbot.waitUntil(lambda: ws.data is not None and ws.data.origin == "batch zoo" and not window.pool.active(),
                    timeout=WAIT_MS)
    assert "Open Dissection Batch Folder…" in [a.text().replace("&", "") for a in window.menus.actions]
    window.close()

    out = tmp_path / "batch.png"
    assert main(["gui", "--batch", str(batch / "zoo"), "--screenshot", str(out), "--size", "1200x800", "--settings",
                 str(tmp_path / "s.ini"), "--samples", str(small_world["samples"]), "--judgments",
                 str(small_world["judgments"]), "--catalog", str(small_world["catalog"]), "--image-root",
                 str(small_world["image_root"])]) == 0
    small = QImage(str(out)).scaled(120, 80).convertToFormat(QImage.Format.Format_RGB32)
    assert len({small.pixel(x, y) for x in range(120) for y in range(80)}) > 50
    assert main(["gui", "--batch", str(tmp_path), "--screenshot", str(out)]) == 2  # not a batch: one line, exit 2
