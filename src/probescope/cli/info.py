"""`probescope info SPEC`: what a model spec or a dataset folder resolves to."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from probescope.core.data.broden import BrodenDataset
from probescope.core.data.preprocess import parse_preprocess
from probescope.jobs.arguments import add_model_shape_arguments, add_trust_arguments, trust_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "spec",
        help="a model spec (demo, resnet18:FILE, vit_b_16:FILE, places365:ARCH:FILE, timm:NAME:FILE, "
        "openclip:NAME:FILE, dinov2:vits14[-reg]:FILE, torchscript:FILE, export:FILE, pickle:FILE, FILE) "
        "or a Broden-format dataset folder (with index.csv) or index file",
    )
    parser.add_argument("--index", default="index.csv", help="dataset index file inside the folder")
    add_trust_arguments(parser)
    parser.add_argument("--class-names", type=Path, help="text file with one class name per line")
    parser.add_argument("--preprocess", help="classic | imagenet | clip, optionally :stretch=N or :crop=N")
    add_model_shape_arguments(parser, layout=False)


def _dataset_target(spec: str, index: str) -> tuple[Path, str] | None:
    if spec == "demo":  # the built-in demo model, whatever the current directory holds (./demo for a folder)
        return None
    path = Path(spec).expanduser()
    if path.is_dir() and (path / index).is_file():
        return path, index
    if path.is_file() and path.suffix == ".csv":
        return path.parent, path.name
    return None


def run(args: argparse.Namespace) -> int:
    target = _dataset_target(args.spec, args.index)
    if target is not None:
        _dataset_info(*target)
    else:
        _model_info(args)
    return 0


def _dataset_info(root: Path, index: str) -> None:
    ds = BrodenDataset.open(root, index)
    counts = Counter(label.category for label in ds.labels.values())
    print(f"{'dataset':<16} {ds.root} ({ds.index_path.name})")
    print(f"{'images':<16} {ds.n_images}")
    print(f"{'categories':<16} {', '.join(ds.categories)}")
    print(f"{'  pixel-level':<16} {', '.join(ds.pixel_categories) or '-'}")
    print(f"{'  image-level':<16} {', '.join(ds.image_categories) or '-'}")
    print("concepts per category (label.csv)")
    for category in ds.categories:
        print(f"  {category:<14} {counts.get(category, 0)}")
    others = {c: n for c, n in counts.items() if c not in ds.categories}
    for category, n in sorted(others.items()):
        print(f"  {category:<14} {n} (no column in {ds.index_path.name})")


def _model_info(args: argparse.Namespace) -> None:
    # (torch: `probescope --help` imports this module; torch takes 1.5 s)
    from probescope.core.models.layers import list_layers
    from probescope.core.models.loading import load_model

    model = load_model(
        args.spec,
        trust=trust_from_args(args),
        class_names=args.class_names,
        preprocess=parse_preprocess(args.preprocess) if args.preprocess else None,
        input_size=args.input_size,
    )
    n_params = sum(p.numel() for p in model.module.parameters())
    rows = [
        ("model", model.name),
        ("architecture", f"{model.arch} ({n_params:,} parameters)"),
        ("weights", str(model.source)),
        ("preprocess", model.preprocess.describe()),
    ]
    if model.class_names:
        shown = ", ".join(model.class_names[:8]) + (", ..." if len(model.class_names) > 8 else "")
        rows.append(("classes", f"{len(model.class_names)}: {shown}"))
    elif "num_classes" in model.metadata:
        rows.append(("classes", f"{model.metadata['num_classes']} (no names)"))
    rows += [(key, str(model.metadata[key])) for key in ("epoch", "best_prec1", "heldout_accuracy")
             if key in model.metadata]
    rows.append(("default layer", model.default_layer or "-"))
    for label, value in rows:
        print(f"{label:<16} {value}")
    height, width = model.input_size
    print(f"layers (output per image for a {height}x{width} input; its layout; units x grid)")
    for info in list_layers(model):
        shape = "x".join(map(str, info.out_shape)) if info.out_shape is not None else "-"
        layout = "" if info.layout is None else f"  {info.layout}"
        units = info.units
        read = f"  {units[0]} units" + (f" x {units[1]}x{units[2]}" if units[1] * units[2] > 1 else "") if units else ""
        why = f"  ({info.layout.describe()})" if info.layout is not None and units is None else ""
        calls = f"  (runs {info.calls}x)" if info.calls > 1 else ""
        print(f"  {info.name:<40} {info.kind:<20} {shape}{layout}{read}{why}{calls}")
