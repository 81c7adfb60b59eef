"""Command-line options generated from a settings dataclass (`core.similarity.settings`): one option per field,
named by the field (`max_epochs` is --max-epochs), its default, help and Bound read from the field, so the command
line never types a default of its own."""

from __future__ import annotations

import argparse
from dataclasses import MISSING, fields
from typing import Any, TypeVar

from probescope.core.similarity.settings import filter_flag
from probescope.jobs.arguments import BoundedArg, RangesArg

T = TypeVar("T")


def add_setting_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """An option per field of `cls`: ranges fields take '2-10', bounded numbers their Bound, fields with `choices`
    one of them."""
    for f in fields(cls):
        meta, default = f.metadata, f.default
        kind: Any = None
        if "bound" in meta:
            kind = RangesArg(meta["bound"]) if meta.get("ranges") else BoundedArg(meta["bound"])
        shown = "" if default is None or default is MISSING else " (default %(default)s)"
        parser.add_argument("--" + f.name.replace("_", "-"), dest=f.name, type=kind, default=default,
                            choices=meta.get("choices"), help=meta["help"] + shown)


def add_filter_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """A `--no-NAME-filter` switch per (boolean, on by default) field of `cls`, the quality-control filters."""
    for f in fields(cls):
        parser.add_argument(filter_flag(f.name), dest=f"no_{f.name}_filter", action="store_true",
                            help=f.metadata["help"])


def filters_from(args: argparse.Namespace, cls: type[T]) -> T:
    """The filters the `--no-NAME-filter` switches leave on."""
    return cls(**{f.name: not getattr(args, f"no_{f.name}_filter") for f in fields(cls)})


def settings_from(args: argparse.Namespace, cls: type[T]) -> T:
    """The `cls` the parsed options ask for (ranges fields keep the text they were written as)."""
    values = {}
    for f in fields(cls):
        value = getattr(args, f.name)
        values[f.name] = value.text if f.metadata.get("ranges") and hasattr(value, "text") else value
    return cls(**values)
