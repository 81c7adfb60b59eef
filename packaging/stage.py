"""Lay the source tree out as the installed `probescope.*` namespace, for PyInstaller to analyse.

The source keeps its layers as top-level folders (core/, widgets/, app/, assets/) that pyproject.toml's
`package-dir` maps onto `probescope.core`, ... This copies each mapped folder to its place under STAGE_DIR, so the
bundle holds exactly what an install would, without building a wheel. Usage: python packaging/stage.py STAGE_DIR
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent


def stage(out: Path, root: Path = ROOT) -> list[str]:
    """Copy every package of pyproject.toml's package-dir under `out`, and the user guide (docs/) into the assets;
    returns the package names staged."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    package_dir: dict[str, str] = config["tool"]["setuptools"]["package-dir"]
    if out.exists():
        shutil.rmtree(out)
    staged = []
    for package, folder in sorted(package_dir.items()):  # parents before children
        source = root / folder
        if not (source / "__init__.py").is_file():
            print(f"stage: skipping {package}: {source} is not a package yet", file=sys.stderr)
            continue
        shutil.copytree(source, out / package.replace(".", "/"), dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        staged.append(package)
    guide = out / "probescope" / "assets" / "guide"  # the user guide, for the app's Help menu (app/help.py)
    shutil.copytree(root / "docs", guide, dirs_exist_ok=True,
                    ignore=shutil.ignore_patterns("*.svg", "*.pdf"))  # (the vector screenshots: not needed there)
    return staged


def contents(out: Path) -> tuple[list[str], list[tuple[str, str]]]:
    """What PyInstaller must bundle from a staged tree: every module (app/cli.py imports its commands by name, which
    the analysis cannot follow) and every data file under the assets, as (source file, destination folder)."""
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
