"""`probescope dissect`: Network Dissection, compositional explanations and Detection Accuracy, headless.

Writes OUTDIR/dissection.json (everything, including beam traces and length sweeps), OUTDIR/tally.csv (one row per
unit) and, when the model's predictions are known, OUTDIR/correlation.csv. Every finished unit is recorded at once
(OUTDIR/dissection.journal.jsonl) and dissection.json is rewritten atomically after each block of units; running the
same command again resumes, skipping finished units. One run at a time writes OUTDIR (it holds OUTDIR/.probescope.lock).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from probescope.cli.options import add_setting_arguments, setting_values
from probescope.cli.progress import end_progress_line, stderr_progress
from probescope.core.bounds import UNIT, check_fits
from probescope.core.dissection.settings import DissectionSettings
from probescope.jobs.arguments import (
    RangesArg,
    add_model_shape_arguments,
    add_trust_arguments,
    device_arg,
    trust_from_args,
)
from probescope.jobs.dissection.layer import (
    ActivationFile,
    DatasetSpec,
    LayerRequest,
    ModelLayer,
    dissect_layer,
    layer_units,  # noqa: F401  (cli.ablate reads --units the same way)
)
from probescope.jobs.dissection.layer import run as run_task
from probescope.jobs.protocol import TaskContext


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", type=Path, required=True, help="Broden-format dataset folder")
    parser.add_argument("--index", default="index.csv", help="index file inside the dataset folder (default index.csv)")
    parser.add_argument("--source", help="keep only index rows whose image path starts with this (e.g. ade20k/)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--activations", type=Path,
                      help="ACT.npy: float (images, units, h, w), images in the order of the index rows (or as "
                      "--layout says: nhwc, tokens:P:HxW)")
    what.add_argument("--model", help="model spec (see `probescope info`); needs --layer")
    parser.add_argument("--layer", help="layer to dissect (with --model; default: the model's default layer)")
    add_model_shape_arguments(parser)
    add_trust_arguments(parser)
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    add_settings_arguments(parser)
    parser.add_argument("--units", type=RangesArg(UNIT), help="units to dissect, e.g. 0-9,17 (default all)")
    parser.add_argument("--predictions", type=Path,
                        help="PRED.npy: the model's predicted class per image, or (images, classes) scores")
    parser.add_argument("--class-names", type=Path, help="model class names, one per line (to match scene labels)")
    parser.add_argument("--label-map", type=Path, help="CSV label,class: dataset scene label -> model class name")
    parser.add_argument("--restart", action="store_true", help="ignore an earlier dissection.json in OUTDIR")


def add_settings_arguments(parser: argparse.ArgumentParser) -> None:
    """One option per DissectionSettings field, its default and help read from the dataclass (`searches` is
    --search)."""
    add_setting_arguments(parser.add_argument_group("dissection settings"), DissectionSettings,
                          flags={"searches": "--search"}, types={"device": device_arg},
                          defaults={"searches": ",".join(DissectionSettings().searches)},
                          shown=" (default: %(default)s)")


def settings_from_args(args: argparse.Namespace):
    """The DissectionSettings the command line asked for."""
    settings = DissectionSettings.from_mapping(setting_values(args, DissectionSettings), "command line")
    check_fits(settings.cache_bytes, f"--cache-mb {settings.cache_mb}")
    return settings


def run(args: argparse.Namespace) -> int:
    """Parse, dissect (`jobs.dissection.layer.dissect_layer`), say what was written."""
    progress = stderr_progress()

    def log(line: str) -> None:
        end_progress_line()
        print(line, file=sys.stderr)

    def show(step) -> None:
        progress(step.fraction or 0.0, step.message)

    source = (ActivationFile(args.activations, args.layout) if args.activations is not None
              else ModelLayer(args.model, args.layer, input_size=args.input_size, layout=args.layout))
    request = LayerRequest(DatasetSpec(args.dataset, args.index, args.source or ""), source, settings_from_args(args),
                           units=args.units, out=args.out, restart=args.restart, predictions=args.predictions,
                           class_names=args.class_names, label_map=args.label_map)
    task = dissect_layer(TaskContext(show, trust_from_args(args)), request, log=log)
    done = run_task(task, show)
    log(f"wrote {args.out / 'tally.csv'} ({len(done.result.units)} units)")
    return 0
