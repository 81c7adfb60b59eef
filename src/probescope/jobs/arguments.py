"""Command-line argument types shared by every command line (the headless commands and `probescope gui`): bounded
numbers and ranges (refused in one line before anything runs), a device of this machine, the trust flags.
"""

from __future__ import annotations

import argparse

from probescope.core.bounds import IMAGE_SIDE, Bound, IntRanges
from probescope.core.devices import device_problem
from probescope.core.errors import InputError
from probescope.core.models.layout import LAYOUT_HELP, Layout
from probescope.core.trust import Trust


def add_trust_arguments(parser: argparse.ArgumentParser) -> None:
    """--trust FILE / --trust-code: the command line's trust decision for model files that run code when loaded."""
    parser.add_argument("--trust", action="append", default=[], metavar="FILE",
                        help="trust this file to run code when loaded (a TorchScript archive, a torch.export program "
                        "or a whole-model pickle); its current content is trusted (repeatable)")
    parser.add_argument("--trust-code", "--trust-pickle", action="store_true", dest="trust_code",
                        help="trust every file this command loads that runs code (only for sources you trust)")


def trust_from_args(args: argparse.Namespace):
    """The Trust the command line gave (probescope.core.trust)."""
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


def layout_arg(text: str):
    """argparse type of --layout: nchw, nhwc, tokens:P:HxW or flat (probescope.core.models.layout)."""
    try:
        return Layout.parse(text)
    except InputError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class InputSizeArg(NumbersArg):
    """argparse type of --input-size: a side (224) or rows x columns (224x320), each within IMAGE_SIDE; (rows,
    columns) either way."""

    def __init__(self) -> None:
        super().__init__((IMAGE_SIDE, IMAGE_SIDE), "x", "224 or 224x320", optional=1)

    def __call__(self, text: str) -> tuple:
        rows, columns = super().__call__(text)
        return rows, columns or rows


def add_model_shape_arguments(parser: argparse.ArgumentParser, *, layout: bool = True) -> None:
    """--input-size (the size a timm or DINOv2 model is built for) and --layout (how the layer's output is laid out,
    where the model does not say)."""
    parser.add_argument("--input-size", type=InputSizeArg(), metavar="N|HxW",
                        help="the input size a timm or DINOv2 model is built for (e.g. 224x320); elsewhere the size "
                        "its layers are probed at")
    if layout:
        parser.add_argument("--layout", type=layout_arg, metavar="LAYOUT",
                            help=f"how --layer's output is laid out, where the model does not say: {LAYOUT_HELP}")


class CommandLineError(Exception):
    """A command line argparse cannot read: `main` prints it in one line and returns 2."""


def device_name_arg(text: str) -> str:
    """argparse type of a --device whose machine is decided later (the window's compute kernel may be elsewhere):
    a device's name, refused in one line when it is not one."""
    problem = device_problem(text, here=False)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text.strip()


def device_arg(text: str) -> str:
    """argparse type of --device: a device of this machine (probescope.core.devices decides), refused in one line
    before anything loads."""
    problem = device_problem(text)
    if problem is not None:
        raise argparse.ArgumentTypeError(problem)
    return text.strip()


class OneLineParser(argparse.ArgumentParser):
    """Refuses a bad command line in one line (`probescope score: error: argument --splits: ...`), as every other
    refusal is, instead of argparse's usage block before the message."""

    def error(self, message: str):
        raise CommandLineError(f"{self.prog}: error: {message} (see {self.prog} --help)")
