"""`probescope gui --screenshot`: writes a non-blank PNG of the chosen workspace, fails cleanly on bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from PySide6.QtGui import QImage
from windows import open_all, world_requests

from probescope.app.figures.export import PRESETS
from probescope.app.figures.export_dialog import ExportDialog
from probescope.app.window.launch import PRESET_KEYS
from probescope.app.window.saved_settings import Settings
from probescope.main import main

pytestmark = pytest.mark.usefixtures("isolated_cache")


def world_args(world, kernel: str = "thread") -> list[str]:
    """The small world's inputs, computed in the window's own process by default: these tests are about the
    screenshot, and a kernel process costs each a start of torch (this file: 31 s of CPU with one each, 17 s this
    way). The default local kernel is taken by test_screenshot_fails_cleanly (a refusal that crosses it),
    test_kernel.py and docs/api.md's test."""
    return ["--model", world["model"], "--dataset", str(world["dataset"]), "--samples", str(world["samples"]),
            "--judgments", str(world["judgments"]), "--catalog", str(world["catalog"]),
            "--image-root", str(world["image_root"]), "--kernel", kernel]


def test_screenshot_of_a_workspace(qtbot, small_world, tmp_path):
    out = tmp_path / "similarity.png"
    code = main(["gui", "--workspace", "similarity", "--screenshot", str(out), "--size", "900x700",
                 "--settings", str(tmp_path / "s.ini"), *world_args(small_world)])
    assert code == 0
    image = QImage(str(out))
    assert (image.width(), image.height()) == (900, 700)
    small = image.scaled(90, 70).convertToFormat(QImage.Format.Format_RGB32)
    assert len({small.pixel(x, y) for x in range(90) for y in range(70)}) > 50  # pictures, not a blank window


def test_vector_screenshot_of_the_unit_card(qtbot, small_world, tmp_path, capsys):
    """--screenshot OUT.svg (or .pdf) writes the vector export; --view picks one view of the workspace."""
    from PySide6.QtPdf import QPdfDocument

    out = tmp_path / "card.pdf"
    code = main(["gui", "--workspace", "dissection", "--view", "unit card", "--screenshot", str(out), "--size",
                 "1100x800", "--settings", str(tmp_path / "s.ini"), *world_args(small_world)])
    assert code == 0, capsys.readouterr().err
    doc = QPdfDocument()
    assert doc.load(str(out)) == QPdfDocument.Error.None_ and doc.pageCount() == 1
    assert doc.pagePointSize(0).width() < 1100 * 0.75  # the card, not the window
    doc.close()
    code = main(["gui", "--workspace", "dissection", "--view", "no such view", "--screenshot",
                 str(tmp_path / "x.svg"), "--settings", str(tmp_path / "s.ini"), *world_args(small_world)])
    assert code == 2 and "its views: Dissection, Unit images" in capsys.readouterr().err


def test_a_views_screenshot_opens_only_what_the_view_shows(qtbot, small_world, tmp_path, capsys, monkeypatch):
    """A Dissection figure neither opens the demo samples and judgments nor waits for the Gallery's stream and the
    Similarity fits (16 s against 6 s for docs/api.md's unit card on a fresh cache); what the user names opens."""
    from probescope.app.window.main_window import MainWindow

    opened, open_ = [], MainWindow.open
    monkeypatch.setattr(MainWindow, "open", lambda self, request: (opened.append(request.kind), open_(self, request)))
    code = main(["gui", "--workspace", "dissection", "--view", "unit card", "--screenshot", str(tmp_path / "card.png"),
                 "--settings", str(tmp_path / "s.ini"), "--model", small_world["model"], "--dataset",
                 str(small_world["dataset"])])
    assert code == 0, capsys.readouterr().err
    assert opened == ["model", "dataset"]
    opened.clear()
    code = main(["gui", "--workspace", "dissection", "--view", "unit card", "--screenshot", str(tmp_path / "x.png"),
                 "--settings", str(tmp_path / "s.ini"), *world_args(small_world)])
    assert code == 0 and opened == ["model", "dataset", "samples", "judgments"]


def test_screenshot_fails_cleanly(qtbot, small_world, tmp_path, capsys):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"junk")
    args = world_args(small_world, kernel="local")
    args[1] = str(bad)
    code = main(["gui", "--workspace", "gallery", "--screenshot", str(tmp_path / "x.png"), *args])
    assert code == 2  # an input refused (a model file that is no model)
    err = capsys.readouterr().err
    assert "probescope gui: error:" in err and "bad.pt" in err and "Traceback" not in err
    assert not (tmp_path / "x.png").exists()
    assert main(["gui", "--screenshot", str(tmp_path / "x.png"), "--catalog", "c.hdf5"]) == 2
    assert main(["gui", "--screenshot", str(tmp_path / "x.jpg"), *world_args(small_world)]) == 2


def test_size_option(capsys):
    """--size WxH: read as two bounded numbers (at least 200x150), refused in one line otherwise."""
    from probescope.main import build_parser

    assert build_parser().parse_args(["gui", "--size", "1400x900"]).size == (1400, 900)
    for bad in ("1400", "axb", "10x10", "1400x99999999"):
        assert main(["gui", "--size", bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith("probescope gui: error: argument --size: ") and err.count("\n") == 1


def test_kernel_option(capsys):
    """--kernel local (the default: a kernel process), thread (in this process) or a Ray Client address; anything
    else refused in one line."""
    from probescope.main import build_parser

    assert build_parser().parse_args(["gui"]).kernel == "local"
    assert build_parser().parse_args(["gui", "--kernel", "thread"]).kernel == "thread"
    assert build_parser().parse_args(["gui", "--kernel", "ray://127.0.0.1:10001"]).kernel == "ray://127.0.0.1:10001"
    for bad in ("ray", "ray://gpu1", "gpu1:6379", "auto", "ray://gpu1:10001/x", "ray://gpu1:port"):
        assert main(["gui", "--kernel", bad]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"probescope gui: error: argument --kernel: {bad!r}: expected thread, local or a Ray "
                              "Client address ray://HOST:PORT") and err.count("\n") == 1, err


@pytest.fixture
def no_ray_token(monkeypatch, tmp_path):
    """No token authentication set up (and a home without ~/.ray/auth_token)."""
    for name in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    return monkeypatch


def test_a_ray_cluster_elsewhere_without_token_authentication_is_refused(capsys, no_ray_token, tmp_path):
    """Ray runs any code a client sends: a cluster that is not on this machine needs the token, or --kernel-insecure;
    this machine (an SSH tunnel's end) needs neither. Refused before anything connects."""
    from probescope.core.errors import InputError
    from probescope.jobs.kernel.spec import kernel_from_args

    assert main(["gui", "--kernel", "ray://10.1.2.3:10001"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("probescope gui: error: --kernel ray://10.1.2.3:10001: the cluster is not on this machine "
                          "and Ray token authentication is not set up") and err.count("\n") == 1, err
    assert err.rstrip().endswith("or pass --kernel-insecure")
    assert kernel_from_args("ray://10.1.2.3:10001", insecure=True).insecure  # the user said so
    for here in ("ray://127.0.0.1:10001", "ray://127.8.0.1:10001", "ray://localhost:10001", "ray://[::1]:10001"):
        assert kernel_from_args(here, insecure=False).host in ("127.0.0.1", "127.8.0.1", "localhost", "::1")
    for name in ("thread", "local"):
        assert kernel_from_args(name, insecure=False).kind == name

    no_ray_token.setenv("RAY_AUTH_MODE", "token")
    with pytest.raises(InputError, match=r"^--kernel ray://gpu1:10001: RAY_AUTH_MODE=token but there is no token"):
        kernel_from_args("ray://gpu1:10001", insecure=True)  # Ray could not connect: said before it tries
    no_ray_token.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "missing"))
    with pytest.raises(InputError, match=r"RAY_AUTH_TOKEN_PATH names .*missing, which cannot be read or is empty$"):
        kernel_from_args("ray://127.0.0.1:10001", insecure=False)  # (Ray would abort the window)
    (tmp_path / "token").write_text("ab" * 32)
    no_ray_token.setenv("RAY_AUTH_TOKEN_PATH", str(tmp_path / "token"))
    assert kernel_from_args("ray://gpu1:10001", insecure=False).host == "gpu1"
    no_ray_token.delenv("RAY_AUTH_TOKEN_PATH")
    (tmp_path / ".ray").mkdir()
    (tmp_path / ".ray" / "auth_token").write_text("cd" * 32)
    assert kernel_from_args("ray://gpu1:10001", insecure=False).host == "gpu1"


def test_a_ray_kernel_asks_for_a_gpu_when_the_window_computes_on_cuda():
    """The GPU is the cluster's: --device cuda is taken on a desktop without one (the kernel's machine decides)."""
    from probescope.jobs.kernel.spec import on_device, parse_kernel
    from probescope.main import build_parser

    args = build_parser().parse_args(["gui", "--kernel", "ray://127.0.0.1:10001", "--device", "cuda:7"])
    assert args.device == "cuda:7"

    assert on_device(parse_kernel("ray://127.0.0.1:10001"), "cuda:1").gpus == 1
    assert on_device(parse_kernel("ray://127.0.0.1:10001"), "cpu").gpus == 0
    assert on_device(parse_kernel("local"), "cuda").gpus == 0  # a kernel process sees this machine's GPUs


def test_screenshot_of_a_panel_and_a_unit(qtbot, small_world, tmp_path, capsys):
    """--panel brings a panel to the front and --unit shows a unit first (the guide's Role figure)."""
    out = tmp_path / "role.png"
    code = main(["gui", "--workspace", "dissection", "--panel", "role", "--unit", "3", "--view", "role (ablation)",
                 "--screenshot", str(out), "--size", "1300x850", "--settings", str(tmp_path / "s.ini"),
                 *world_args(small_world)])
    assert code == 0, capsys.readouterr().err
    assert QImage(str(out)).width() > 200
    code = main(["gui", "--workspace", "dissection", "--panel", "nope", "--screenshot", str(tmp_path / "x.png"),
                 "--settings", str(tmp_path / "s.ini"), *world_args(small_world)])
    assert code == 2 and "its panels: units" in capsys.readouterr().err


def test_an_export_takes_the_card_of_the_unit_on_screen_not_its_previous_filling(qtbot, window, small_world):
    """The card is filled at the next turn of the event loop; an export asked before that turn fills it first
    (the dialog once took a card filled for the unit's partial overlays: 969 pixels tall instead of 1,294)."""
    open_all(qtbot, window, world_requests(small_world)[:2], workspaces=("dissection",))
    workspace = window.current_workspace()
    assert workspace.units.select_unit(3)
    qtbot.waitUntil(lambda: not window.pool.active() and workspace.unit_images.ready, timeout=60_000)
    qtbot.wait(50)
    whole = workspace.card.heightForWidth(1050)
    workspace.card.clear()
    assert workspace.card.heightForWidth(1050) < whole
    workspace.selected.update_card()  # due, as after the last callback of a unit switch
    targets = {t.name: t for t in workspace.export_targets()}
    assert targets["Unit card"].widget.heightForWidth(1050) == whole


def test_scripted_figure_is_the_export_dialogs(qtbot, window, small_world, tmp_path, capsys):
    """`--screenshot OUT --view NAME --preset column --unit N` writes what the export dialog's preset writes for
    that view and unit (one function does both), and the guide lists every view the flag takes."""
    assert PRESET_KEYS == tuple(p.key for p in PRESETS)
    scripted = tmp_path / "scripted.png"
    code = main(["gui", "--workspace", "dissection", "--view", "Unit card", "--unit", "3", "--preset", "column",
                 "--screenshot", str(scripted), "--settings", str(tmp_path / "s.ini"), *world_args(small_world)])
    assert code == 0, capsys.readouterr().err

    open_all(qtbot, window, world_requests(small_world)[:2], workspaces=("dissection",))
    workspace = window.current_workspace()
    assert workspace.units.select_unit(3)
    qtbot.waitUntil(lambda: not window.pool.active(), timeout=60_000)
    targets = workspace.export_targets()
    dialog = ExportDialog(targets, Settings(tmp_path / "d.ini"), window, [t.name for t in targets].index("Unit card"))
    qtbot.addWidget(dialog)
    assert dialog.preset().key == "column" and dialog.path.text().endswith("unit_card_unit_3_3.5in.png")
    dialog.path.setText(str(tmp_path / "dialog.png"))
    dialog.save()
    a, b = QImage(str(scripted)), QImage(str(tmp_path / "dialog.png"))
    assert (a.width(), a.height(), a.dotsPerMeterX()) == (b.width(), b.height(), b.dotsPerMeterX())
    assert a.width() == 1050 and round(a.dotsPerMeterX() * 0.0254) == 300

    def grey(image: QImage) -> np.ndarray:
        image = image.convertToFormat(QImage.Format.Format_Grayscale8)
        return np.frombuffer(image.constBits(), np.uint8).reshape(image.height(), image.bytesPerLine()).astype(float)

    assert np.abs(grey(a) - grey(b)).mean() < 0.5  # the same figure (the card drawn from the same unit)
    guide = (Path(__file__).parents[1] / "docs" / "window.md").read_text()
    for workspace in window.workspaces.values():
        for target in workspace.export_targets():
            assert f"`{target.name}`" in guide, f"docs/window.md does not list the view {target.name!r}"


def test_the_platforms_notes_are_not_printed_and_everything_else_is():
    """`gui --screenshot` printed the offscreen platform's "does not support propagateSizeHints()" at every run."""
    code = ("from PySide6.QtCore import qWarning; from probescope.app.window.launch import quiet_platform_notes; "
            "quiet_platform_notes(); qWarning('This plugin does not support propagateSizeHints()'); "
            "qWarning('a warning that matters')")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and done.stderr.strip().splitlines() == ["a warning that matters"]


def test_the_splash_is_reaped_once_it_is_told_to_go():
    """The splash (a child process) stayed `<defunct>` while the window was open: closing it now reaps it."""
    import time

    from probescope.app.window import splash

    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    splash.close(child)
    deadline = time.monotonic() + 30
    while child.returncode is None and time.monotonic() < deadline:  # set by the reaper's wait(), not by a poll
        time.sleep(0.05)
    assert child.returncode == 0
