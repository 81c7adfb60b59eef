"""Command-line options generated from a settings dataclass (`DissectionSettings`, `ScoreSettings`, the similarity
workflows'): one option per field, named by the field (`max_epochs` is --max-epochs), its default, help and Bound or
choices read from the field, so the command line never types a default of its own; and the settings read back from
the parsed options. The one builder for every command; a command's hooks rename a flag, convert a value or give a
metavar."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Iterable, Mapping
from dataclasses import MISSING, Field, fields
from typing import Any, TypeVar

from probescope.core.similarity.settings import filter_flag
from probescope.jobs.arguments import BoundedArg, RangesArg

T = TypeVar("T")


def add_setting_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls: type,
                          names: Iterable[str] | None = None, *, flags: Mapping[str, str] | None = None,
                          types: Mapping[str, Callable[[str], Any]] | None = None,
                          defaults: Mapping[str, object] | None = None, metavars: Mapping[str, str] | None = None,
                          shown: str = " (default %(default)s)") -> None:
    """An option per field of `cls` (of those in `names`, in that order, when given): ranges fields take '2-10',
    bounded numbers their Bound, fields with `choices` one of them; a boolean field on by default is a switch that
    turns it off (--no-NAME). `shown` is added to the help of an option with a default. Hooks, by field name: `flags`
    (another flag), `types` (another conversion), `defaults` (the default as the command line writes it),
    `metavars`."""
    by_name = {f.name: f for f in fields(cls)}
    for name in by_name if names is None else names:
        f = by_name[name]
        meta, flag = f.metadata, _flag(f, flags)
        if _is_switch(f):
            parser.add_argument(flag, action="store_true", help=meta["help"])
            continue
        default = (defaults or {}).get(name, f.default)
        kind: Any = (types or {}).get(name)
        if kind is None and "bound" in meta:
            kind = RangesArg(meta["bound"]) if meta.get("ranges") else BoundedArg(meta["bound"])
        extra = {"metavar": metavars[name]} if metavars and name in metavars else {}
        suffix = "" if default is None or default is MISSING else shown
        parser.add_argument(flag, dest=name, type=kind, default=default, choices=meta.get("choices"),
                            help=meta["help"] + suffix, **extra)


def setting_values(args: argparse.Namespace, cls: type, flags: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The value of each field of `cls` the parsed options give (a switch's turned back; ranges fields keep the text
    they were written as)."""
    values = {}
    for f in fields(cls):
        if _is_switch(f):
            values[f.name] = not getattr(args, _flag(f, flags).removeprefix("--").replace("-", "_"))
            continue
        value = getattr(args, f.name)
        values[f.name] = value.text if f.metadata.get("ranges") and hasattr(value, "text") else value
    return values


def settings_from(args: argparse.Namespace, cls: type[T], flags: Mapping[str, str] | None = None) -> T:
    """The `cls` the parsed options ask for."""
    return cls(**setting_values(args, cls, flags))


def add_filter_arguments(parser: argparse.ArgumentParser, cls: type) -> None:
    """A `--no-NAME-filter` switch per (boolean, on by default) field of `cls`, the quality-control filters."""
    add_setting_arguments(parser, cls, flags=_filter_flags(cls))


def filters_from(args: argparse.Namespace, cls: type[T]) -> T:
    """The filters the `--no-NAME-filter` switches leave on."""
    return settings_from(args, cls, _filter_flags(cls))


def _filter_flags(cls: type) -> dict[str, str]:
    return {f.name: filter_flag(f.name) for f in fields(cls)}


def _is_switch(f: Field) -> bool:
    return f.default is True


def _flag(f: Field, flags: Mapping[str, str] | None) -> str:
    if flags and f.name in flags:
        return flags[f.name]
    return ("--no-" if _is_switch(f) else "--") + f.name.replace("_", "-")
