"""The cache folder and the headless command line: clear one-line errors, no Qt, exit codes."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from probescope.core import cache, environment
from probescope.core.errors import InputError


def test_cache_dir_follows_environment(tmp_path, monkeypatch):
    monkeypatch.setenv(environment.CACHE, str(tmp_path / "c"))
    assert cache.cache_dir() == tmp_path / "c"
    assert (tmp_path / "c").is_dir()


@pytest.mark.skipif(sys.platform != "linux", reason="the XDG folders are Linux's")
def test_without_the_variable_the_platform_folders_are_used(tmp_path, monkeypatch):
    """The cache and the settings file where the platform keeps them: on Linux the XDG folders (the settings file
    is the one QSettings' user scope wrote before, so saved settings carry over)."""
    from probescope.app.window.saved_settings import Settings

    monkeypatch.delenv(environment.CACHE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xc"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xf"))
    assert cache.cache_dir() == tmp_path / "xc" / "probescope"
    assert Settings().path == str(tmp_path / "xf" / "probescope" / "probescope.ini")


def test_unwritable_cache_dir(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    monkeypatch.setenv(environment.CACHE, str(blocker / "cache"))
    with pytest.raises(InputError, match=r"file/cache: cache folder is not writable.*PROBESCOPE_CACHE"):
        cache.cache_dir()


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "probescope", *args], capture_output=True, text=True,
                          timeout=300, env={**os.environ, **(env or {})})


def test_version():
    out = _cli("--version")
    assert out.returncode == 0 and out.stdout.startswith("probescope ")


def test_demo_data_command(tmp_path):
    out = _cli("demo-data", str(tmp_path / "d"), "--images", "28")
    assert out.returncode == 0, out.stderr
    assert "28 images, 58 concepts (color 11, object 15, part 18, scene 14)" in out.stdout
    assert (tmp_path / "d" / "index.csv").is_file()


def test_demo_data_command_reports_unwritable_target(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    out = _cli("demo-data", str(blocker / "d"))
    assert out.returncode == 2
    assert out.stderr.strip().count("\n") == 0
    assert "not writable" in out.stderr and "Traceback" not in out.stderr
