"""The `probescope` command: every subcommand, the window's (`gui`, in probescope.app.window.launch) and the headless
ones (probescope.cli), dispatched from one parser.

Each subcommand lives in its own module with `add_arguments(parser)` and `run(args) -> int`. `--help` imports every
command's module, so their tops import neither torch nor Qt: those come inside `run` (each import says why), so
headless commands never import Qt and `--help` starts without torch. Bad input raises `InputError`: one line on
stderr, exit code 2.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
import warnings
from collections.abc import Iterator

from probescope import __version__
from probescope.cli.progress import end_progress_line
from probescope.core.errors import InputError, Note
from probescope.jobs.arguments import CommandLineError, OneLineParser

# command name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "gui": ("probescope.app.window.launch", "open the desktop application (the default)"),
    "demo-data": ("probescope.cli.demo_data", "write the demo world's Broden-format probing dataset"),
    "info": ("probescope.cli.info", "show what a model or dataset spec resolves to"),
    "dissect": ("probescope.cli.dissect",
                "Network Dissection, compositional explanations, Detection Accuracy"),
    "ablate": ("probescope.cli.ablate",
               "remove units of a layer: per class accuracy before and after (what the units do for the model)"),
    "batch": ("probescope.cli.batch", "dissect many models and layers, locally or on a Ray cluster"),
    "score": ("probescope.cli.score", "Inception Score of samples, probabilities or logits"),
    "similarity": ("probescope.cli.similarity", "triplet accuracy of model features on human judgments"),
    "embed": ("probescope.cli.embed", "fit a psychological embedding to similarity judgments"),
    "propose": ("probescope.cli.propose", "propose the next trials by expected information gain"),
}


_python_showwarning = warnings.showwarning


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """core's notes (a damaged cache being rebuilt) as one line of their own; other warnings as Python shows them."""
    end_progress_line()
    if issubclass(category, Note):
        print(f"probescope: note: {message}", file=sys.stderr, flush=True)
    else:
        _python_showwarning(message, category, filename, lineno, file, line)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(prog="probescope", description="Look inside vision models and score them.")
    parser.add_argument("--version", action="version", version=f"probescope {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (module_name, help_text) in COMMANDS.items():
        sp = sub.add_parser(name, help=help_text, description=help_text)
        sp.set_defaults(_module=module_name)
        importlib.import_module(module_name).add_arguments(sp)
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv:
        argv = ["gui"]
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except CommandLineError as exc:
        print(exc, file=sys.stderr)
        return 2
    if args.command is None:
        parser.print_help()
        return 2
    module = importlib.import_module(args._module)
    _say_which_demo(args, argv)
    warnings.showwarning = _show_warning
    try:
        with _terminate_as_interrupt(args.command != "gui"):
            return int(module.run(args) or 0)
    except InputError as exc:
        end_progress_line()
        print(f"probescope {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except Terminated:
        end_progress_line()
        print(f"probescope {args.command}: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
    except KeyboardInterrupt:
        end_progress_line()
        print(f"probescope {args.command}: interrupted", file=sys.stderr)
        return 130


BUILTIN_DEMO = "demo"  # always the built-in demo world (model, dataset, samples); a path named so is ./demo


def _say_which_demo(args: argparse.Namespace, argv: list[str]) -> None:
    """The word 'demo' names the built-in demo world in every option; a file or folder called demo in the current
    directory is spelled ./demo. When both could be meant (the word typed, the path there), one line says which is
    used."""
    typed = any(word == BUILTIN_DEMO or word.endswith("=" + BUILTIN_DEMO) for word in argv)
    if not typed or not os.path.lexists(BUILTIN_DEMO):
        return
    flags = {word.split("=", 1)[0] for word in argv if word.startswith("--")}
    given = [name for name, value in vars(args).items() if value == BUILTIN_DEMO and not name.startswith("_")
             and ("--" + name.replace("_", "-") in flags or name == "spec")]
    if given:
        kind = "folder" if os.path.isdir(BUILTIN_DEMO) else "file"
        options = ", ".join("--" + name.replace("_", "-") if name != "spec" else "the spec" for name in given)
        print(f"probescope {args.command}: note: 'demo' ({options}) is the built-in demo world, not the {kind} "
              f"./demo in this directory; write ./demo for that", file=sys.stderr)


class Terminated(Exception):
    """SIGTERM while a headless command runs: raised where it was, so every `with` and `finally` on the way out runs
    (worker processes stopped, temporary folders removed, locks released), as Ctrl+C does."""


def _raise_terminated(_signum: int, _frame: object) -> None:
    raise Terminated


@contextlib.contextmanager
def _terminate_as_interrupt(enabled: bool) -> Iterator[None]:
    """SIGTERM raises Terminated while the block runs (in the main thread; the window has its own handler)."""
    if not enabled or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
