"""Layering contracts: core never imports Qt (directly or through anything it imports); widgets never import torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QT_MODULES = ("PySide6", "PyQt5", "PyQt6", "PySide2", "shiboken6", "pyqtgraph", "qtpy")


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _offenders(folder: str, forbidden: tuple[str, ...]) -> list[str]:
    return [f"{path.relative_to(ROOT)} imports {name}"
            for path in sorted((ROOT / folder).rglob("*.py"))
            for name in sorted(_imports(path) & set(forbidden))]


def test_core_source_never_imports_qt():
    assert _offenders("core", QT_MODULES) == []


def test_widgets_never_import_torch():
    assert _offenders("widgets", ("torch", "torchvision")) == []


def test_importing_all_of_core_loads_no_qt():
    """Transitive check: import every core module in a fresh interpreter and look at sys.modules."""
    modules = sorted(
        "probescope.core." + ".".join(p.relative_to(ROOT / "core").with_suffix("").parts).removesuffix(".__init__")
        for p in (ROOT / "core").rglob("*.py")
    )
    code = (
        "import importlib, sys\n"
        f"for m in {modules!r}:\n"
        "    importlib.import_module(m.rstrip('.'))\n"
        f"bad = sorted(m for m in sys.modules if m.split('.')[0] in {QT_MODULES!r})\n"
        "print(','.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_headless_commands_do_not_import_qt():
    code = (
        "import sys\n"
        "from probescope.app.cli import build_parser\n"
        "build_parser()\n"
        f"print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in {QT_MODULES!r})))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == ""


def test_every_probescope_name_the_benchmarks_import_exists():
    """The benchmarks are not run by the tests; their imports (also the ones inside functions) must still resolve."""
    import importlib

    missing = []
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("probescope"):
                module = importlib.import_module(node.module)
                missing += [f"{path.name}: {node.module}.{a.name}" for a in node.names if not hasattr(module, a.name)
                            and not (hasattr(module, "__path__")  # a submodule of a package
                                     and importlib.util.find_spec(f"{node.module}.{a.name}") is not None)]
    assert missing == []
