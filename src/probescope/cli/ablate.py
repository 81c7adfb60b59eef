"""`probescope ablate`: remove units of a layer and measure, per class, the model's accuracy and the probability of
the true class before and after (Bau et al., PNAS 2020), on the probing images whose scene labels name a class.

Writes OUTDIR/ablation.csv (one row per group of units and class) and OUTDIR/ablation.json (everything, with the
model and dataset identity and which path ran: the network's tail on the cached activations, or full forwards).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from probescope.cli.progress import stderr_progress
from probescope.core import bounds
from probescope.core.cache import cache_dir
from probescope.core.dissection.correlation import read_label_map
from probescope.core.dissection.inputs import model_identity, open_dataset
from probescope.core.errors import InputError
from probescope.jobs.arguments import (
    BoundedArg,
    RangesArg,
    add_model_shape_arguments,
    add_trust_arguments,
    device_arg,
    trust_from_args,
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", required=True, help="model spec (see `probescope info`)")
    parser.add_argument("--layer", help="layer whose units are ablated (default: the model's default layer)")
    add_model_shape_arguments(parser)
    parser.add_argument("--dataset", type=Path, required=True, help="Broden-format dataset folder with scene labels")
    parser.add_argument("--index", default="index.csv", help="index file inside the dataset folder (default index.csv)")
    parser.add_argument("--source", help="keep only index rows whose image path starts with this (e.g. ade20k/)")
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--units", type=RangesArg(bounds.UNIT), help="ablate these units together, e.g. 0-9,17")
    what.add_argument("--each", action="store_true", help="ablate every unit alone (the units x classes table)")
    what.add_argument("--concept",
                      help="ablate the units whose explanation (any method) names the concept; a comma list gives "
                           "one group per concept (needs --dissection)")
    what.add_argument("--specialised", action="store_true",
                      help="ablate the specialised units together (needs --dissection with the iou and da-stop "
                           "searches)")
    parser.add_argument("--dissection", type=Path,
                        help="dissection.json of this model and layer (or its folder), from `probescope dissect`")
    parser.add_argument("--min-iou", type=BoundedArg(bounds.FRACTION), default=0.0,
                        help="with --concept: only explanations with an IoU above this (default: %(default)s)")
    parser.add_argument("--top-units", type=BoundedArg(bounds.UNITS), default=0, metavar="K",
                        help="with --each: also ablate, per class, the K units whose removal hurts it most")
    parser.add_argument("--mode", choices=("zero", "mean"), default="zero",
                        help="set ablated units to zero or to their mean activation on the dataset (default: zero)")
    parser.add_argument("--path", choices=("auto", "tail", "hook"), default="auto",
                        help="auto: run only the network after the layer on the cached activations when it can be "
                             "separated, else full forward passes; tail / hook: insist on one (default: auto)")
    parser.add_argument("--class-names", type=Path, help="model class names, one per line (to match scene labels)")
    parser.add_argument("--label-map", type=Path, help="CSV label,class: dataset scene label -> model class name")
    parser.add_argument("--device", default="cpu", type=device_arg, help="torch device (default cpu)")
    parser.add_argument("--batch-size", type=BoundedArg(bounds.BATCH), default=64,
                        help="images per batch (default %(default)s)")
    add_trust_arguments(parser)
    parser.add_argument("--out", type=Path, required=True, help="output folder")


def run(args: argparse.Namespace) -> int:
    # (torch: `probescope --help` imports this module; torch takes 1.5 s)
    from probescope.core.data.activations import extract_activations
    from probescope.core.models.loading import load_model

    # (lazy: `probescope --help` imports this module; jobs.ablation adds 10 ms to it)
    from probescope.jobs.ablation import ablate, ablation_groups, layer_ablation, read_dissection, true_classes

    progress = stderr_progress()
    if args.top_units and not args.each:
        raise InputError("--top-units ranks the units of an --each run: add --each")
    dataset, dataset_info = open_dataset(args.dataset, args.index, args.source or "")
    model = load_model(args.model, trust=trust_from_args(args), device=args.device, class_names=args.class_names,
                       input_size=args.input_size, layouts=None if args.layout is None else {args.layer: args.layout})
    layer = args.layer or model.default_layer
    if not layer:
        raise InputError(f"{model.name}: no default layer; name one with --layer (see `probescope info`)")
    if not model.class_names:
        raise InputError(f"{model.name} does not name its classes: give --class-names (one per line)")
    truth = true_classes(dataset, model.class_names, read_label_map(args.label_map) if args.label_map else None,
                         args.label_map)
    dissection = None
    if args.concept or args.specialised:
        if args.dissection is None:
            raise InputError("--concept and --specialised read the units' explanations: give --dissection "
                             "DIR/dissection.json (from `probescope dissect`)")
        dissection = read_dissection(args.dissection, model, layer)
    activations = extract_activations(model, layer, dataset, cache_dir(), device=args.device, progress=progress)
    print(file=sys.stderr)  # end the progress line
    n_units = int(activations.shape[1])
    bounds.UNITS.check(args.top_units, "--top-units", high=n_units, because=f"the layer has {n_units} units")
    groups = ablation_groups(n_units, units=args.units, each=args.each, specialised=args.specialised,
                             concepts=[c.strip() for c in args.concept.split(",") if c.strip()] if args.concept
                             else (), dissection=dissection, min_iou=args.min_iou)
    ablation = layer_ablation(model, layer, activations, dataset, truth, model.class_names, mode=args.mode,
                              path=args.path, batch_size=args.batch_size,
                              model_info=model_identity(model, args.model, layer), dataset_info=dataset_info)
    print(f"{len(ablation.labelled)} of {len(truth)} images have a true label among the model's classes; "
          f"{ablation.path}: {ablation.path_note}", file=sys.stderr)
    result = ablate(ablation, groups, top=args.top_units, progress=progress)
    args.out.mkdir(parents=True, exist_ok=True)
    result.write_csv(args.out / "ablation.csv")
    result.save(args.out / "ablation.json")
    print(file=sys.stderr)
    for g, group in enumerate(result.groups[:20]):
        hurt = ", ".join(f"{e.name} {e.delta_accuracy:+.3f} (p {e.delta_p_true:+.3f})"
                         for e in result.most_hurt(g, 3)) or "no class"
        print(f"{group.name} ({len(group.units)} unit{'s' * (len(group.units) > 1)}): hurts {hurt}", file=sys.stderr)
    if len(result.groups) > 20:
        print(f"... and {len(result.groups) - 20} more groups", file=sys.stderr)
    print(f"wrote {args.out / 'ablation.csv'} ({len(result.groups)} groups x {len(result.classes)} classes)",
          file=sys.stderr)
    return 0
