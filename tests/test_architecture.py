"""Layering contracts: pyproject.toml's import-linter contracts hold (and fail when broken); core never loads Qt at run
time; the headless commands never load Qt; the benchmarks' imports resolve."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"
QT_MODULES = ("PySide6", "PyQt5", "PyQt6", "PySide2", "shiboken6", "pyqtgraph", "qtpy")


def _lint_imports(tree: Path) -> subprocess.CompletedProcess:
    """lint-imports with pyproject.toml's contracts over `tree`, a folder that holds the `probescope` package."""
    env = {**os.environ, "PYTHONPATH": str(tree), "COLUMNS": "400"}  # one line per contract
    run = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    return subprocess.run([sys.executable, "-c", run, "--no-cache", str(ROOT / "pyproject.toml")], cwd=tree,
                          env=env, capture_output=True, text=True, timeout=300)


def test_import_contracts_are_kept():
    """The layers (app | cli over jobs over core), no Qt below the app, widgets free of torch and of the layers."""
    out = _lint_imports(SRC)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout


PROBES = [  # (the package a probe module goes in, what it imports, the contract it must break)
    ("core", "probescope.jobs", "layers"),
    ("jobs", "probescope.app", "layers"),
    ("cli", "probescope.app", "layers"),
    ("app", "probescope.cli", "layers"),
    ("core", "PySide6", "import no Qt"),
    ("jobs", "pyqtgraph", "import no Qt"),
    ("cli", "probescope.widgets", "import no Qt"),
    ("widgets", "probescope.core", "widgets import neither"),
    ("widgets", "torch", "widgets import neither"),
]


@pytest.fixture(scope="module")
def probe_tree(tmp_path_factory) -> Path:
    import shutil

    tree = tmp_path_factory.mktemp("probes") / "tree"
    shutil.copytree(SRC, tree, ignore=shutil.ignore_patterns("__pycache__"))
    return tree


@pytest.mark.parametrize("package,target,contract", PROBES)
def test_each_contract_catches_a_probe_import(probe_tree, package, target, contract):
    """The checker itself: a module that imports what its package may not makes lint-imports fail, in the contract
    that forbids it."""
    probe = probe_tree / "probescope" / package / "probe_of_the_contracts.py"
    probe.write_text(f"import {target}  # noqa: F401\n", encoding="utf-8")
    try:
        out = _lint_imports(probe_tree)
    finally:
        probe.unlink()
    assert out.returncode != 0
    broken = [line for line in out.stdout.splitlines() if line.endswith("BROKEN")]
    assert any(contract in line for line in broken), out.stdout
    assert f"probescope.{package}.probe_of_the_contracts" in out.stdout



def test_no_import_cycles():
    """No module imports itself through others, counting the imports inside functions (they run too) but not those
    under `if TYPE_CHECKING:` (annotations, never run): a cycle is broken by moving what both sides share to a
    module they both import, or a function to the module that owns its data, not by hiding an import in a function.
    Each cycle found is printed as a chain of modules."""
    import grimp

    graph = grimp.build_graph("probescope", exclude_type_checking_imports=True, cache_dir=None)
    cycles: dict[frozenset[str], str] = {}
    for importer in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(importer)):
            if graph.chain_exists(importer=imported, imported=importer):
                chain = (importer, *graph.find_shortest_chain(importer=imported, imported=importer))
                cycles.setdefault(frozenset(chain), " -> ".join(chain))
    assert not cycles, "import cycles:\n" + "\n".join(sorted(cycles.values()))

def test_importing_all_of_core_loads_no_qt():
    """Transitive check: import every core module in a fresh interpreter and look at sys.modules."""
    modules = sorted(
        ".".join(p.relative_to(SRC).with_suffix("").parts).removesuffix(".__init__")
        for p in (SRC / "probescope" / "core").rglob("*.py")
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
        "from probescope.main import build_parser\n"
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


MODULE_LINES = 400  # a module that says one thing fits on a few screens (issue 43)


def test_every_module_is_at_most_400_lines():
    """A module over the limit holds more than one subject: split it where the subjects part (as activation_cache,
    unit_scorer, painters, release, pickling, threads and the gallery's cell were split off)."""
    over = {str(path.relative_to(SRC)): n for path in sorted((SRC / "probescope").rglob("*.py"))
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > MODULE_LINES}
    assert over == {}


CLASS_METHODS = 25  # a class past this does several things: give one of them a home of its own (issue 43)


def test_no_class_has_more_than_25_methods():
    """Counted as written in the class body (properties and Qt overrides included, nested functions not)."""
    over = {}
    for path in sorted((SRC / "probescope").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                n = sum(isinstance(x, ast.FunctionDef | ast.AsyncFunctionDef) for x in node.body)
                if n > CLASS_METHODS:
                    over[f"{path.relative_to(SRC)}:{node.name}"] = n
    assert over == {}
