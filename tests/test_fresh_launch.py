"""A fresh install: the demo dataset comes in stages, and the window shows the units of its first images at once,
labelled as such, keeps them (never an empty table) while the whole dataset is dissected, then shows the whole one;
the Gallery's FID reference waits for the whole dataset."""

from __future__ import annotations

import threading

from PySide6.QtCore import QTimer
from windows import make_window

from probescope.app.dissection.workspace import DissectionWorkspace
from probescope.core.demo import dataset as demo_dataset
from probescope.core.dissection.settings import DissectionSettings
from probescope.jobs import inputs
from probescope.jobs.dissection import rows
from probescope.jobs.inputs import OpenRequest

WAIT_MS = 120_000
SETTINGS = DissectionSettings(max_length=2, searches=rows.SEARCHES, sweep_length=2, da_limit=4)


def test_first_units_come_from_the_first_images_and_refine_to_the_whole(qtbot, settings_path, monkeypatch,
                                                                         tmp_path):
    monkeypatch.setenv("PROBESCOPE_CACHE", str(tmp_path / "fresh-cache"))
    monkeypatch.setattr(inputs, "DEMO_DATASET_IMAGES", 84)
    monkeypatch.setattr(inputs, "DEMO_FIRST_BATCH", 28)
    monkeypatch.setattr(DissectionWorkspace, "default_settings", SETTINGS)
    stages, release = demo_dataset.demo_dataset_stages, threading.Event()

    def held(*args, **kwargs):  # the whole dataset (written by then) comes once the first part is dissected
        for index in stages(*args, **kwargs):
            if index.name == "index.csv":
                release.wait(WAIT_MS / 1000)
            yield index

    monkeypatch.setattr(demo_dataset, "demo_dataset_stages", held)
    window = make_window(qtbot, settings_path)
    ws, gallery = window.workspaces["dissection"], window.workspaces["gallery"]
    seen: list[tuple] = []  # what was on screen, every 5 ms

    def look() -> None:
        if ws.data is not None and ws.data.dataset.n_images == 28 and ws.data.result.complete:
            release.set()
        loaded = window.state.get("dataset")
        seen.append((ws.units.rowCount(), ws.data.dataset.n_images if ws.data is not None else None,
                     ws.data is not None and ws.data.result.complete, ws.header.text(), ws.is_initial_work_done,
                     loaded.value.n_images if loaded is not None else None, gallery.real.dataset,
                     window.source_bar.buttons["dataset"].text()))

    timer = QTimer()
    timer.timeout.connect(look)
    timer.start(5)
    window.open(OpenRequest("model", inputs.DEMO))
    window.open(OpenRequest("dataset", inputs.DEMO))
    try:
        qtbot.waitUntil(lambda: ws.is_initial_work_done and not window.pool.active(), timeout=WAIT_MS)
    finally:
        release.set()
        timer.stop()
    look()

    first = next(k for k, s in enumerate(seen) if s[0])
    assert seen[first][1] == 28 and "on the first 28 of 84 images" in seen[first][3]
    assert all(s[0] for s in seen[first:])  # the table never empties once the first units are there
    for _units, images, _complete, header, done, loaded, reference, _bar in seen[first:]:
        assert ("on the first 28 of 84 images" in header) == (images == 28)  # the header says what is shown
        assert not (done and images == 28)  # a first part is not the end of the initial work
        if loaded == 84 and images == 28:  # the whole dataset is dissected while the first part stays
            assert "; dissecting all 84 images: " in header
        assert reference is None or reference.n_images == 84  # FID waits for the whole dataset
    assert any(s[1] == 28 and s[2] for s in seen) and any("dissecting all 84 images: " in s[3] for s in seen)
    assert any("first 28 of 84 images" in s[7] for s in seen)
    units, images, complete, header, done, loaded, reference, bar = seen[-1]
    assert (images, complete, done, loaded) == (84, True, True, 84) and "first" not in header
    assert "demo (84 images)" in bar and reference is not None and reference.n_images == 84
    assert len(ws.data.result.units) == ws.data.result.n_units
    assert ws.unit == ws.current.first_unit()  # the whole result opens on its own first unit, as a second launch does
    fired = ws.data.result.units[ws.unit].fired_images
    assert ws.unit_images.data is ws.data and f"<b>Unit {ws.unit}</b>: threshold" in ws.view.title.text() \
        and f"fires on {fired} images" in ws.view.title.text()


def test_a_cached_demo_dataset_comes_whole_at_once(qtbot, settings_path, monkeypatch, tmp_path):
    """The second launch: no first part, the whole dataset straight away."""
    from probescope.core.demo.dataset import ensure_demo_dataset

    monkeypatch.setenv("PROBESCOPE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(inputs, "DEMO_DATASET_IMAGES", 40)
    monkeypatch.setattr(inputs, "DEMO_FIRST_BATCH", 14)
    ensure_demo_dataset(n_images=40)
    window = make_window(qtbot, settings_path)
    states: list = []
    window.state.changed.connect(lambda slot: states.append(window.state.get(slot)) if slot == "dataset" else None)
    with qtbot.waitSignal(window.opened, timeout=WAIT_MS):
        window.open(OpenRequest("dataset", inputs.DEMO))
    assert [(s.value.n_images, s.first_of) for s in states] == [(40, 0)]
