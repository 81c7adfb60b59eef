"""Every saved setting is checked when it is read: a value of the wrong type, and one this machine cannot honour,
each give way to the default with one note naming the setting and why, and the app starts. Before, a settings
file with `[compute] device=quantum:9` (or a `cuda:3` on a machine without it) made every model load fail, in the
window and in `gui --screenshot`."""

from __future__ import annotations

import pytest
import torch
from PySide6.QtCore import QByteArray, QSettings

from probescope.app.window import saved_settings as saved
from probescope.app.window.saved_settings import ExportDefaults, Settings
from probescope.main import main

WORKSPACES = ("dissection", "gallery", "similarity")
MISSING_GPU = f"cuda:{torch.cuda.device_count() + 2}"  # a GPU this machine does not have
RECENT_OF_UNKNOWN_KIND = '[{"kind": "weights", "spec": "{\\"kind\\": \\"weights\\", \\"spec\\": \\"w.pt\\"}", ' \
    '"label": "w.pt"}]'

# setting: (how it is read, its default, a value of the wrong type, values this machine cannot honour)
SETTINGS = {
    "compute/device": (lambda s: s.get(saved.DEVICE), "cpu", ["cuda", "0"], ["quantum:9", MISSING_GPU]),
    "appearance/theme": (lambda s: s.get(saved.THEME), "system", ["dark", "light"], ["neon"]),
    "window/workspace": (lambda s: s.get(saved.LAST_WORKSPACE, known=WORKSPACES), None, ["a", "b"], ["nowhere"]),
    "window/geometry": (lambda s: s.get(saved.GEOMETRY), None, "a window", []),  # bytes Qt cannot restore: see below
    "layout/dissection": (lambda s: s.get(saved.PANEL_LAYOUT, "dissection"), None, ["a", "b"], []),
    "recent/items": (lambda s: s.recent.items(), [], '{"kind": "model"}',
                     [RECENT_OF_UNKNOWN_KIND, '[{"kind": "model", "spec": "not json", "label": "x"}]']),
    "trust/files": (lambda s: s.trusted.files(), [], '"all of them"',
                    ['[{"sha256": "not-a-hash", "path": "/m.pt", "kind": "pickle"}]']),
    "export/defaults": (lambda s: s.get(saved.EXPORT_DEFAULTS), ExportDefaults(), "[2400]",
                        ['{"width": 1000000000}', '{"scale": -1}', '{"format": "gif"}',
                         '{"folder": "/no/such/folder/here"}', '{"margin_free": "yes"}',
                         '{"preset": "poster"}', '{"follow_theme": 1}']),
    "dialogs/open_model": (lambda s: s.get(saved.DIALOG_CHOICES, "open_model"), {}, '"resnet18"', ['{"file": 7}']),
}


def _saved(path, key, value) -> Settings:
    raw = QSettings(str(path), QSettings.Format.IniFormat)
    raw.setValue(key, value)
    raw.sync()
    return Settings(path)


def _cases():
    for key, (_read, _default, wrong, unusable) in SETTINGS.items():
        yield pytest.param(key, wrong, id=f"{key}-wrong-type")
        for k, value in enumerate(unusable):
            yield pytest.param(key, value, id=f"{key}-cannot-honour-{k}")


@pytest.mark.parametrize("key,value", list(_cases()))
def test_an_unusable_saved_value_gives_way_to_the_default_with_one_note(settings_path, key, value):
    read, default, _wrong, _unusable = SETTINGS[key]
    settings = _saved(settings_path, key, value)
    assert read(settings) == default
    assert len(settings.notes) == 1, settings.notes
    note = settings.notes[0]
    assert note.startswith(f"saved setting {key}") and " not used: " in note and "\n" not in note
    read(settings)
    assert len(settings.notes) == 1  # read again: noted once


def test_every_saved_setting_is_in_the_table(settings_path):
    """Every setting Settings declares has its row above, and check_all reads each of them."""
    examples = {"layout/{}": "layout/dissection", "dialogs/{}": "dialogs/open_model"}
    assert {examples.get(s.key, s.key) for s in saved.SETTINGS} == set(SETTINGS)
    settings = Settings(settings_path)
    for key, (_read, _default, wrong, _unusable) in SETTINGS.items():
        QSettings(str(settings_path), QSettings.Format.IniFormat).setValue(key, wrong)
    notes = Settings(settings_path).check_all(WORKSPACES)
    assert {n.split(" = ")[0].removeprefix("saved setting ").split(" ")[0] for n in notes} == set(SETTINGS)
    assert settings.get(saved.DEVICE) == "cpu"


def test_good_values_pass_without_a_note(settings_path):
    settings = Settings(settings_path)
    settings.set(saved.DEVICE, "cpu")
    settings.set(saved.THEME, "dark")
    settings.set(saved.LAST_WORKSPACE, "gallery")
    settings.set(saved.EXPORT_DEFAULTS, ExportDefaults("svg", 1200, 3.0, True, str(settings_path.parent)))
    settings.sync()
    again = Settings(settings_path)
    assert again.check_all(WORKSPACES) == []
    assert again.get(saved.DEVICE) == "cpu" and again.get(saved.THEME) == "dark"
    assert again.get(saved.LAST_WORKSPACE, known=WORKSPACES) == "gallery"


def _bad_file(path) -> None:
    raw = QSettings(str(path), QSettings.Format.IniFormat)
    raw.setValue("compute/device", "quantum:9")
    raw.setValue("window/geometry", QByteArray(b"not a geometry"))
    raw.sync()


def test_the_window_notes_what_it_did_not_use_and_loads_the_model(qtbot, settings_path, small_world,
                                                                   isolated_cache):
    from probescope.app.window.main_window import MainWindow
    from probescope.jobs.inputs import OpenRequest

    _bad_file(settings_path)
    window = MainWindow(Settings(settings_path), ask_trust=False)
    qtbot.addWidget(window)
    assert window.state.device == "cpu"
    text = window.notification.message.text()
    assert "compute/device = 'quantum:9' not used: unknown device 'quantum:9'" in text and "1 more" in text
    assert "window/geometry" in window.notification.details.toPlainText()
    failures = []
    window.pool.failed.connect(lambda _h, error: failures.append(error.message))
    with qtbot.waitSignal(window.opened, timeout=60_000):
        window.open(OpenRequest("model", small_world["model"]))
    assert not failures
    window.close()


def test_a_screenshot_with_such_settings_succeeds_and_prints_the_note(qtbot, small_world, tmp_path, capsys):
    settings = tmp_path / "bad.ini"
    _bad_file(settings)
    out = tmp_path / "window.png"
    w = small_world
    code = main(["gui", "--workspace", "gallery", "--screenshot", str(out), "--size", "900x700", "--settings",
                 str(settings), "--model", w["model"], "--dataset", str(w["dataset"]), "--samples",
                 str(w["samples"]), "--judgments", str(w["judgments"]), "--catalog", str(w["catalog"]),
                 "--image-root", str(w["image_root"])])
    err = capsys.readouterr().err
    assert code == 0 and out.is_file(), err
    assert "probescope gui: note: saved setting compute/device = 'quantum:9' not used" in err
    assert "RuntimeError" not in err and "failed" not in err


def test_a_device_named_on_the_command_line_is_refused_in_one_line(capsys):
    """The command line is not a saved setting: a device this machine lacks is an error there, not a fallback."""
    for device in ("quantum:9", MISSING_GPU):
        assert main(["gui", "--device", device, "--screenshot", "x.png"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("probescope gui: error: argument --device: ") and err.count("\n") == 1
