"""Stage what the bundle holds, for PyInstaller to analyse: the `probescope` package from src/ and the user guide.

The bundle then holds exactly what an install would, plus docs/ for the Help menu, without building a wheel (an
editable install of the build environment would otherwise point the analysis at the checkout).
Usage: python packaging/stage.py STAGE_DIR
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def stage(out: Path, root: Path = ROOT) -> list[str]:
    """Copy src/probescope under `out`, and the user guide (docs/) into its assets; returns the packages staged."""
    if out.exists():
        shutil.rmtree(out)
    shutil.copytree(root / "src" / "probescope", out / "probescope",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    staged = sorted(".".join(init.parent.relative_to(out).parts) for init in out.rglob("__init__.py"))
    guide = out / "probescope" / "assets" / "guide"  # the user guide, for the app's Help menu (app/window/help.py)
    shutil.copytree(root / "docs", guide, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*.svg", "*.pdf"))  # (the vector screenshots: not needed there)
    return staged


def contents(out: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """What PyInstaller must bundle from a staged tree: every module (probescope.main imports its commands by name,
    which the analysis cannot follow) and every data file under the assets, as (source file, destination folder)."""
    package = out / "probescope"
    modules = sorted(".".join(path.relative_to(out).with_suffix("").parts).removesuffix(".__init__")
                     for path in package.rglob("*.py"))
    datas = sorted((str(path), str(path.parent.relative_to(out))) for path in (package / "assets").rglob("*")
                   if path.is_file() and path.suffix not in (".py", ".pyc"))
    return modules, datas


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: python packaging/stage.py STAGE_DIR")
    print(" ".join(stage(Path(sys.argv[1]))))
