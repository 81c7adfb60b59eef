"""Command-line dispatcher.

Each subcommand lives in its own module with `add_arguments(parser)` and `run(args) -> int`. Command modules keep
their module-level imports light (argparse, pathlib) and import numpy/torch/Qt inside `run`, so headless commands
never import Qt and `--help` is instant. Bad input raises `InputError`: one line on stderr, exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings

from probescope import __version__
from probescope.core.bounds import Bound, IntRanges
from probescope.core.errors import InputError, Note
from probescope.core.tasks import ProgressCallback

# command name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "gui": ("probescope.app.commands.gui", "open the desktop application (the default)"),
    "demo-data": ("probescope.app.commands.demo_data", "write the demo world's Broden-format probing dataset"),
    "info": ("probescope.app.commands.info", "show what a model or dataset spec resolves to"),
    "dissect": ("probescope.app.commands.dissect",
                "Network Dissection, compositional explanations, Detection Accuracy"),
    "ablate": ("probescope.app.commands.ablate",
               "remove units of a layer: per class accuracy before and after (what the units do for the model)"),
    "batch": ("probescope.app.commands.batch", "dissect many models and layers, locally or on a Ray cluster"),
    "score": ("probescope.app.commands.score", "Inception Score of samples, probabilities or logits"),
    "similarity": ("probescope.app.commands.similarity", "triplet accuracy of model features on human judgments"),
    "embed": ("probescope.app.commands.embed", "fit a psychological embedding to similarity judgments"),
    "propose": ("probescope.app.commands.propose", "propose the next trials by expected information gain"),
}


_progress_line = [False]  # a progress line is on stderr, not yet ended


def stderr_progress(prefix: str = "") -> ProgressCallback:
    """A progress(fraction, message) for commands: rewrites one stderr line, only when the shown text changes."""
    shown = [""]
    lead = f"{prefix} " if prefix else ""

    def progress(fraction: float, message: str) -> None:
        text = f"\r{lead}{fraction:6.1%} {message:<40}"
        if text != shown[0]:
            shown[0] = text
            _progress_line[0] = True
            print(text, end="", file=sys.stderr, flush=True)

    return progress


def end_progress_line() -> None:
    """End the progress line, if one is open, so what is printed next starts a line of its own."""
    if _progress_line[0]:
        _progress_line[0] = False
        print(file=sys.stderr, flush=True)


def add_trust_arguments(parser: argparse.ArgumentParser) -> None:
    """--trust FILE / --trust-code: the command line's trust decision for model files that run code when loaded."""
    parser.add_argument("--trust", action="append", default=[], metavar="FILE",
                        help="trust this file to run code when loaded (a TorchScript archive, a torch.export program "
                        "or a whole-model pickle); its current content is trusted (repeatable)")
    parser.add_argument("--trust-code", "--trust-pickle", action="store_true", dest="trust_code",
                        help="trust every file this command loads that runs code (only for sources you trust)")


def trust_from_args(args: argparse.Namespace):
    """The Trust the command line gave (probescope.core.trust)."""
    from probescope.core.trust import Trust

    return Trust.of_files(list(args.trust), everything=args.trust_code)


class BoundedArg:
    """argparse type of a numeric option: one number within `bound` (refused in one line otherwise, before the
    command runs). The bound stays readable (`.bound`), so the table of every option's bounds is tested."""

    def __init__(self, bound: Bound):
        self.bound = bound
        self.__name__ = "number"

    def __call__(self, text: str) -> int | float:
        try:
            return self.bound.parse(text)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None


class NumbersArg:
    """argparse type of an option that writes several numbers, e.g. 1400x900 or 128,50000[,1000]: one bound each,
    `optional` of them may be left off (they are then 0)."""

    def __init__(self, bounds: tuple[Bound, ...], sep: str, example: str, optional: int = 0):
        self.bounds, self.sep, self.example, self.optional = bounds, sep, example, optional
        self.__name__ = "numbers"

    def __call__(self, text: str) -> tuple:
        parts = text.lower().split(self.sep)
        if not len(self.bounds) - self.optional <= len(parts) <= len(self.bounds):
            raise argparse.ArgumentTypeError(f"expected e.g. {self.example}, got {text!r}")
        try:
            values = [bound.parse(part) for bound, part in zip(self.bounds, parts)]
        except InputError as exc:
            raise argparse.ArgumentTypeError(f"{exc} (in {text!r})") from None
        return tuple(values) + (0,) * (len(self.bounds) - len(values))


class RangesArg:
    """argparse type of an option that lists whole numbers as ranges ('0-9,17'): kept as ranges (IntRanges) until
    the data bounds them, so no absurd range is ever expanded."""

    def __init__(self, bound: Bound):
        self.bound = bound
        self.__name__ = "ranges"

    def __call__(self, text: str) -> IntRanges:
        try:
            return IntRanges.parse(text, "", self.bound)
        except InputError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None


class CommandLineError(Exception):
    """A command line argparse cannot read: `main` prints it in one line and returns 2."""


def device_arg(text: str) -> str:
    """argparse type of --device: a device of this machine (probescope.core.devices decides), refused in one line
    before anything loads."""
    from probescope.core.devices import device_problem

    problem = device_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text.strip()


class OneLineParser(argparse.ArgumentParser):
    """Refuses a bad command line in one line (`probescope score: error: argument --splits: ...`), as every other
    refusal is, instead of argparse's usage block before the message."""

    def error(self, message: str):
        raise CommandLineError(f"{self.prog}: error: {message} (see {self.prog} --help)")


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
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name != module_name:
                raise
            continue  # a command whose module is not written yet
        module.add_arguments(sp)
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
    warnings.showwarning = _show_warning
    try:
        return int(module.run(args) or 0)
    except InputError as exc:
        end_progress_line()
        print(f"probescope {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        end_progress_line()
        print(f"probescope {args.command}: interrupted", file=sys.stderr)
        return 130
