"""`probescope dissect`: Network Dissection, compositional explanations and Detection Accuracy, headless.

Writes OUTDIR/dissection.json (everything, including beam traces and length sweeps), OUTDIR/tally.csv (one row per
unit) and, when the model's predictions are known, OUTDIR/correlation.csv. dissection.json is rewritten atomically
as units finish; running the same command again resumes, skipping finished units.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dataset", type=Path, required=True, help="Broden-format dataset folder")
    parser.add_argument("--index", default="index.csv", help="index file inside the dataset folder (default index.csv)")
    parser.add_argument("--source", help="keep only index rows whose image path starts with this (e.g. ade20k/)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--activations", type=Path,
                      help="ACT.npy: float (images, units, h, w), images in the order of the index rows")
    what.add_argument("--model", help="model spec (see `probescope info`); needs --layer")
    parser.add_argument("--layer", help="layer to dissect (with --model; default: the model's default layer)")
    parser.add_argument("--trust-pickle", action="store_true", help="allow whole-model pickles (runs their code)")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--quantile", type=float, default=0.005, help="top quantile q: T_u = quantile(1 - q)")
    parser.add_argument("--beam-size", type=int, default=5)
    parser.add_argument("--beam-limit", type=int, default=50, help="candidate atoms per unit (0 = all)")
    parser.add_argument("--max-length", type=int, default=3, help="atoms in compositional explanations")
    parser.add_argument("--min-samples", type=int, default=5, help="drop concepts present in fewer images")
    parser.add_argument("--search", default="iou", help="comma list of iou, da-select, da-stop (default iou)")
    parser.add_argument("--sweep-length", type=int, default=0,
                        help="length sweep: best IoU and its DA at max lengths 1..N per unit (the seed's is 10; "
                             "costs about N/2 times the length-3 search; default 0 = none)")
    parser.add_argument("--da-limit", type=int, default=10, help="safety cap on atoms for da-select / da-stop")
    parser.add_argument("--units", help="units to dissect, e.g. 0-9,17 (default all)")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (mask upsampling)")
    parser.add_argument("--cache-mb", type=int, default=1024, help="memory for cached formula pixel sets")
    parser.add_argument("--predictions", type=Path,
                        help="PRED.npy: the model's predicted class per image, or (images, classes) scores")
    parser.add_argument("--class-names", type=Path, help="model class names, one per line (to match scene labels)")
    parser.add_argument("--label-map", type=Path, help="CSV label,class: dataset scene label -> model class name")
    parser.add_argument("--restart", action="store_true", help="ignore an earlier dissection.json in OUTDIR")


def parse_units(text: str) -> list[int]:
    """'0-9,17' -> [0, ..., 9, 17] (InputError on malformed text)."""
    from probescope.core.errors import InputError

    out: list[int] = []
    for part in text.split(","):
        part = part.strip()
        try:
            if "-" in part:
                lo, hi = (int(x) for x in part.split("-", 1))
                if hi < lo:
                    raise ValueError
                out += range(lo, hi + 1)
            else:
                out.append(int(part))
        except ValueError:
            raise InputError(f"--units: cannot read {part!r} in {text!r} (expected e.g. 0-9,17)") from None
    return sorted(set(out))


def run(args: argparse.Namespace) -> int:
    import sys

    import numpy as np

    from probescope.app.cli import stderr_progress
    from probescope.core.dissection.correlation import (
        accuracy_correlation,
        correct_predictions,
        read_label_map,
        scene_truth,
        write_correlation_csv,
    )
    from probescope.core.dissection.engine import DissectionSettings, dissect
    from probescope.core.dissection.inputs import extract_model_layers, load_activation_file, open_dataset
    from probescope.core.dissection.labels import LabelStore
    from probescope.core.dissection.results import DissectionResult
    from probescope.core.errors import InputError
    from probescope.core.models.loading import read_class_names

    progress = stderr_progress()
    settings = DissectionSettings(
        quantile=args.quantile, beam_size=args.beam_size, beam_limit=args.beam_limit, max_length=args.max_length,
        min_samples=args.min_samples, searches=tuple(s.strip() for s in args.search.split(",") if s.strip()),
        sweep_length=args.sweep_length, da_limit=args.da_limit, device=args.device,
        cache_bytes=args.cache_mb << 20)
    units = parse_units(args.units) if args.units else None
    if args.device.startswith("cuda"):
        import torch

        if not torch.cuda.is_available():
            raise InputError("--device cuda: no CUDA device available")
    dataset, dataset_info = open_dataset(args.dataset, args.index, args.source or "")
    class_names = read_class_names(args.class_names) if args.class_names else None
    predictions = None
    if args.activations is not None:
        act, model_info = load_activation_file(args.activations, dataset.n_images)
    else:
        [job] = extract_model_layers(args.model, [args.layer], args.dataset, args.index, args.source or "",
                                     args.device, args.trust_pickle, class_names=args.class_names,
                                     predict=args.predictions is None, progress=progress)
        act, model_info, predictions = job.activations, job.model_info, job.predictions
        class_names = class_names or job.class_names
    if args.predictions is not None:
        try:
            predictions = np.load(args.predictions, allow_pickle=False)
        except (FileNotFoundError, ValueError, OSError) as exc:
            raise InputError(f"not a readable .npy array ({exc})", args.predictions) from None
    if units is not None and units[-1] >= act.shape[1]:
        raise InputError(f"--units: unit {units[-1]} out of range (the layer has {act.shape[1]} units)")

    store = LabelStore.build(dataset, progress=progress)
    correct = None
    if predictions is not None:
        if class_names is None:
            raise InputError("--predictions needs --class-names (or a --model with class names) to read true labels")
        truth = scene_truth(store, class_names, read_label_map(args.label_map) if args.label_map else None)
        correct = correct_predictions(predictions, truth)
        print(f"\n{int((truth >= 0).sum())} of {len(truth)} images have a true label among the model's classes",
              file=sys.stderr)

    out = args.out
    out.mkdir(parents=True, exist_ok=True)
    json_path = out / "dissection.json"
    previous = None
    if json_path.exists() and not args.restart:
        previous = DissectionResult.load(json_path)
        kept = len(previous.units)
        if (previous.settings, previous.dataset, previous.model) != (settings.protocol(), dataset_info, model_info):
            print(f"\n{json_path}: other settings, dataset or model; starting over", file=sys.stderr)
            previous = None
        else:
            print(f"\nresuming: {kept} units already done", file=sys.stderr)

    result = dissect(store, act, settings, units, correct=correct, previous=previous, dataset_info=dataset_info,
                     model_info=model_info, progress=progress, checkpoint=lambda r: r.save(json_path))
    result.save(json_path)
    result.write_tally(out / "tally.csv", settings.searches)
    if correct is not None:
        write_correlation_csv(out / "correlation.csv", accuracy_correlation(result))
    print(f"\nwrote {out / 'tally.csv'} ({len(result.units)} units)", file=sys.stderr)
    return 0
