"""`probescope dissect`: Network Dissection, compositional explanations and Detection Accuracy, headless.

Writes OUTDIR/dissection.json (everything, including beam traces and length sweeps), OUTDIR/tally.csv (one row per
unit) and, when the model's predictions are known, OUTDIR/correlation.csv. Every finished unit is recorded at once
(OUTDIR/dissection.journal.jsonl) and dissection.json is rewritten atomically after each block of units; running the
same command again resumes, skipping finished units. One run at a time writes OUTDIR (it holds OUTDIR/.probescope.lock).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from probescope.core.bounds import UNIT
from probescope.jobs.arguments import BoundedArg, RangesArg, add_trust_arguments, device_arg, trust_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", type=Path, required=True, help="Broden-format dataset folder")
    parser.add_argument("--index", default="index.csv", help="index file inside the dataset folder (default index.csv)")
    parser.add_argument("--source", help="keep only index rows whose image path starts with this (e.g. ade20k/)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--activations", type=Path,
                      help="ACT.npy: float (images, units, h, w), images in the order of the index rows")
    what.add_argument("--model", help="model spec (see `probescope info`); needs --layer")
    parser.add_argument("--layer", help="layer to dissect (with --model; default: the model's default layer)")
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
    from dataclasses import fields

    from probescope.core.dissection.settings import DissectionSettings

    group = parser.add_argument_group("dissection settings")
    for f in fields(DissectionSettings):
        flag = "--search" if f.name == "searches" else "--" + f.name.replace("_", "-")
        default = ",".join(f.default) if f.name == "searches" else f.default
        kind = BoundedArg(f.metadata["bound"]) if "bound" in f.metadata else type(default)
        kind = device_arg if f.name == "device" else kind
        group.add_argument(flag, dest=f.name, type=kind, default=default,
                           help=f"{f.metadata['help']} (default: %(default)s)")


def settings_from_args(args: argparse.Namespace):
    """The DissectionSettings the command line asked for."""
    from dataclasses import fields

    from probescope.core.bounds import check_fits
    from probescope.core.dissection.settings import DissectionSettings

    settings = DissectionSettings.from_mapping({f.name: getattr(args, f.name) for f in fields(DissectionSettings)},
                                               "command line")
    check_fits(settings.cache_bytes, f"--cache-mb {settings.cache_mb}")
    return settings


def layer_units(ranges, n_units: int) -> list[int]:
    """The units --units names, once the layer's width says which exist (the ranges are never expanded before)."""
    return ranges.values("--units", "unit", high=n_units - 1, because=f"the layer has {n_units} units")


def run(args: argparse.Namespace) -> int:
    from probescope.core.locks import folder_lock

    settings = settings_from_args(args)
    units = args.units  # IntRanges, expanded once the layer's width is known
    trust = trust_from_args(args)
    with folder_lock(args.out, "probescope dissect"):
        return _dissect(args, settings, units, trust)


def _dissect(args: argparse.Namespace, settings, units, trust) -> int:
    import sys
    from collections import deque

    import numpy as np

    from probescope.cli.progress import end_progress_line, stderr_progress
    from probescope.core.cache import cache_dir
    from probescope.core.dissection.correlation import correct_predictions, read_label_map, scene_truth
    from probescope.core.dissection.inputs import extract_model_layers, load_activation_file, open_dataset
    from probescope.core.dissection.label_cache import label_store
    from probescope.core.dissection.saved import dissect_in_blocks, resumable, write_layer
    from probescope.core.errors import InputError
    from probescope.core.models.loading import read_class_names

    progress = stderr_progress()
    dataset, dataset_info = open_dataset(args.dataset, args.index, args.source or "")
    class_names = read_class_names(args.class_names) if args.class_names else None
    predictions = None
    if args.activations is not None:
        act, model_info = load_activation_file(args.activations, dataset.n_images)
    else:
        [job] = extract_model_layers(args.model, [args.layer], args.dataset, args.index, args.source or "",
                                     args.device, trust, class_names=args.class_names,
                                     predict=args.predictions is None, progress=progress)
        act, model_info, predictions = job.activations, job.model_info, job.predictions
        class_names = class_names or job.class_names
    if args.predictions is not None:
        try:
            predictions = np.load(args.predictions, allow_pickle=False)
        except (FileNotFoundError, ValueError, OSError) as exc:
            raise InputError(f"not a readable .npy array ({exc})", args.predictions) from None
    units = layer_units(units, int(act.shape[1])) if units is not None else None

    store = label_store(dataset, cache_dir(), progress=progress)
    correct = None
    if predictions is not None:
        if class_names is None:
            raise InputError("--predictions needs --class-names (or a --model with class names) to read true labels")
        truth = scene_truth(store, class_names, read_label_map(args.label_map) if args.label_map else None,
                            overrides_source=args.label_map)
        correct = correct_predictions(predictions, truth, args.predictions)
        end_progress_line()
        print(f"{int((truth >= 0).sum())} of {len(truth)} images have a true label among the model's classes",
              file=sys.stderr)

    json_path = args.out / "dissection.json"
    previous = None
    if not args.restart:
        previous, why = resumable(json_path, settings, dataset_info, model_info, int(act.shape[1]))
        end_progress_line()
        if why:
            print(why, file=sys.stderr)
        elif previous is not None:
            left = len(set(range(int(act.shape[1])) if units is None else units) - set(previous.units))
            print(f"resuming: {len(previous.units)} units already done, {left} to go" if left else
                  f"complete: all {len(previous.units)} units already done, nothing to resume (--restart dissects "
                  "again)", file=sys.stderr)
    blocks = dissect_in_blocks(json_path, store, act, settings, units, previous=previous, correct=correct,
                               dataset_info=dataset_info, model_info=model_info, progress=progress)
    last = deque(blocks, maxlen=1)  # each block is saved as it finishes; the last is the layer
    result = last[0] if last else previous  # no block ran: every unit asked for was done already
    write_layer(args.out, result)
    end_progress_line()
    print(f"wrote {args.out / 'tally.csv'} ({len(result.units)} units)", file=sys.stderr)
    return 0
