"""Packaging and desktop integration: the AppStream metadata validates, the .desktop entry and the metadata agree
with each other and with the version, the icon set is complete and rendered from its SVG, the staging step lays
the source out as the installed namespace, and the About box shows the version."""

from __future__ import annotations

import configparser
import importlib.util
import re
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from probescope import __version__

ROOT = Path(__file__).resolve().parent.parent
APP_ID = "io.github.probescope.Probescope"
LINUX = ROOT / "packaging" / "linux"
METAINFO = LINUX / f"{APP_ID}.metainfo.xml"
DESKTOP = LINUX / f"{APP_ID}.desktop"
ICONS = ROOT / "src" / "probescope" / "assets" / "icons"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(shutil.which("appstreamcli") is None, reason="appstreamcli is not installed")
def test_metainfo_passes_appstreamcli_validate():
    result = subprocess.run(["appstreamcli", "validate", "--no-net", str(METAINFO)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stdout + result.stderr


def test_metainfo_names_the_desktop_entry_and_the_current_release():
    root = ET.parse(METAINFO).getroot()
    assert root.findtext("id") == APP_ID
    assert root.find("launchable").text == DESKTOP.name
    assert root.find("releases/release").get("version") == __version__  # newest release first
    assert root.find("provides/binary").text == "probescope"


def test_desktop_entry_is_complete_and_consistent():
    entry = configparser.ConfigParser(interpolation=None)
    entry.optionxform = str  # keys are case-sensitive
    entry.read(DESKTOP, encoding="utf-8")
    section = entry["Desktop Entry"]
    assert section["Type"] == "Application"
    assert section["Exec"].split()[0] == "probescope"
    assert section["Icon"] == "probescope"
    assert section["Categories"].endswith(";") and "Science" in section["Categories"].split(";")
    assert section["Keywords"].endswith(";")
    gui = (ROOT / "src" / "probescope" / "app" / "window" / "launch.py").read_text(encoding="utf-8")
    assert f'setDesktopFileName("{APP_ID}")' in gui  # windows find their entry (taskbars, Wayland)


def test_changelog_leads_with_the_current_version():
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    first = re.search(r"^## \[?(\d+\.\d+\.\d+)\]?", text, re.MULTILINE)
    assert first is not None and first.group(1) == __version__


def test_icon_set_is_complete_and_matches_its_svg(qapp, tmp_path):  # qapp: one QApplication for all tests
    render_icons = _load("render_icons", ROOT / "packaging" / "render_icons.py")
    ET.parse(ICONS / "probescope.svg")  # well-formed
    for size in render_icons.SIZES:
        with Image.open(ICONS / f"probescope-{size}.png") as image:
            assert image.size == (size, size) and image.mode == "RGBA"
    fresh = render_icons.render(ICONS / "probescope.svg", tmp_path, sizes=(32, 128))
    for path in fresh:  # the PNGs are the SVG's current rendering, not a stale one
        shipped = np.asarray(Image.open(ICONS / path.name), dtype=float)
        assert np.abs(np.asarray(Image.open(path), dtype=float) - shipped).mean() < 2.0


def test_stage_lays_out_the_installed_namespace_and_lists_its_contents(tmp_path):
    stage = _load("stage", ROOT / "packaging" / "stage.py")
    out = tmp_path / "stage"
    staged = stage.stage(out)
    assert {"probescope", "probescope.core", "probescope.app", "probescope.widgets", "probescope.assets"} <= set(staged)
    assert (out / "probescope" / "app" / "window" / "launch.py").is_file()
    assert (out / "probescope" / "assets" / "demo_model.pt").is_file()
    assert (out / "probescope" / "assets" / "icons" / "probescope-512.png").is_file()
    assert not list(out.rglob("__pycache__"))
    modules, datas = stage.contents(out)
    assert {"probescope.app.window.launch", "probescope.cli.score", "probescope.core",
            "probescope"} <= set(modules)
    assert (str(out / "probescope" / "assets" / "icons" / "probescope-16.png"), "probescope/assets/icons") in datas
    assert not any(source.endswith(".py") for source, _ in datas)
    code = f"import sys; sys.path.insert(0, {str(out)!r}); import probescope.main as m; print(m.__file__)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert Path(result.stdout.strip()).is_relative_to(out)  # imported from the staged tree, not the source


def test_every_package_is_in_the_wheel(tmp_path):
    """The build backend finds the packages itself: a wheel built from the tree holds every package folder under
    src/ and the assets' data files."""
    wheel = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
                            "-w", str(tmp_path), str(ROOT)], capture_output=True, text=True, timeout=300)
    assert wheel.returncode == 0, wheel.stderr
    import zipfile

    names = set(zipfile.ZipFile(next(tmp_path.glob("probescope-*.whl"))).namelist())
    src = ROOT / "src"
    packages = {init.relative_to(src).as_posix() for init in (src / "probescope").rglob("__init__.py")}
    assert packages <= names, sorted(packages - names)
    assert {"probescope/assets/demo_model.pt", "probescope/assets/icons/probescope-512.png"} <= names


def test_about_box_shows_the_version(qtbot, settings_path):
    from PySide6.QtWidgets import QMessageBox

    from probescope.app.window.main_window import MainWindow
    from probescope.app.window.saved_settings import Settings

    window = MainWindow(Settings(settings_path), device="cpu")
    qtbot.addWidget(window)
    about = next(a for a in window.menus.actions if a.text() == "&About probescope")
    about.trigger()
    box = window.findChild(QMessageBox)
    assert box is not None and f"probescope {__version__}" in box.text()
    box.close()
    window.close()
