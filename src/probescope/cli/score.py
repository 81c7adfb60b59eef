"""`probescope score`: Inception Score of class probabilities, logits, or images through a classifier; with a
reference set of real images also FID, KID, precision/recall, class coverage and the infinite-N limits.

Examples:
  probescope score --logits logits.npy --json
  probescope score --images samples/ --classifier inception-tf:weights-inception-2015-12-05-6726825d.pth
  probescope score --images samples/ --classifier inception-tf:<weights> --fid real/ --kid --prc --fid-inf --json
  probescope score --images demo --n 2000 --diversity 3 --fidelity 0.5 --fid --kid --prc
  probescope score --example D --splits 1
  probescope score --images samples.npz --fid real/ --per-image per_sample.csv --held-out heldout/
"""

from __future__ import annotations

import argparse
import sys

from probescope.core import bounds
from probescope.core.scoring.sources import DEFAULT_EXTENSIONS
from probescope.jobs.arguments import BoundedArg, NumbersArg, add_trust_arguments, device_arg, trust_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from probescope.core.demo.world import SCENES
    from probescope.core.scoring.copying import DEFAULT_CELLS, MAX_CELLS
    from probescope.core.scoring.protocol import DEFAULT_SEED, DEFAULT_SPLITS

    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--probs", metavar="P.npy", help="class probabilities (N, n): rows must sum to 1")
    src.add_argument("--logits", metavar="L.npy", help="classifier logits (N, n)")
    src.add_argument("--images", metavar="PATH", help="a folder of images (the files directly in it with --extensions, "
                     "in the order of their resolved paths, symbolic links followed, as torch-fidelity reads them), "
                     "a uint8 (N, H, W, 3) .npy/.npz, or 'demo'")
    src.add_argument("--generator", metavar="G.pt", help="a TorchScript generator G(z[, class]) -> (m, 3, H, W), or "
                     "a torch.export program of one (.pt2, exported with a dynamic batch dimension)")
    src.add_argument("--example", choices=["A", "B", "C", "D"], help="the seed note's worked example (3 images)")
    parser.add_argument(
        "--classifier",
        default="demo",
        metavar="SPEC",
        help="for images: 'demo' (default), 'inception-tf:<weights file>' (comparable with published IS), "
        "'inception-tv:<weights file>' (torchvision ImageNet, not comparable), or any model spec",
    )
    parser.add_argument("--splits", type=BoundedArg(bounds.SPLITS), default=DEFAULT_SPLITS,
                        help="number of splits (default %(default)s)")
    parser.add_argument("--seed", type=BoundedArg(bounds.SEED), default=DEFAULT_SEED,
                        help="shuffle seed of the split protocol (default %(default)s)")
    parser.add_argument("--no-shuffle", action="store_true", help="cut splits in input order")
    parser.add_argument("--resize", type=BoundedArg(bounds.IMAGE_SIDE), metavar="N",
                        help="stretch every image to NxN before a model classifier (antialiased bilinear); "
                        "default: the classifier's own rule (the Inception classifiers resize to 299 themselves, as "
                        "torch-fidelity; other models see native sizes, one size at a time)")
    parser.add_argument("--max-pixels", type=BoundedArg(bounds.PIXELS), metavar="N",
                        help="refuse images larger than N pixels before decoding them (default 50000000, or "
                        "$PROBESCOPE_MAX_PIXELS)")
    parser.add_argument("--batch-size", type=BoundedArg(bounds.BATCH), default=64,
                        help="images per classifier batch (default 64; the scores do not depend on it)")
    parser.add_argument("--workers", type=BoundedArg(bounds.WORKERS), default=2,
                        help="decode/prefetch threads (default 2)")
    parser.add_argument("--device", default=None, type=device_arg,
                        help="cpu or cuda[:k] for the classifier and a generator (default cpu); refused with --probs, "
                        "--logits and --example, which run no network")
    parser.add_argument("--extensions", default=",".join(DEFAULT_EXTENSIONS), metavar="EXT,...",
                        help="file extensions read from image folders, case-insensitive (default png,jpg,jpeg: "
                        "torch-fidelity's, so a folder gives the same images as there)")
    parser.add_argument("--bits", action="store_true", help="show entropies in bits (IS is unchanged)")
    parser.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    parser.add_argument("--save-logits", metavar="OUT.npy", help="also save the classifier's logits")
    real = parser.add_argument_group(
        "distances to real images (need --images or --generator; each depends on the classifier's features)")
    real.add_argument("--fid", nargs="?", const="demo", metavar="REF",
                      help="FID against REF: a folder of real images, a uint8 .npy/.npz, a Broden dataset folder, a "
                      "pytorch-fid mu/sigma .npz, or 'demo' (the demo world's images; the default without REF). "
                      "Reference features are cached per classifier and image content. Also reports class coverage")
    real.add_argument("--kid", action="store_true", help="KID against the --fid reference (torch-fidelity's protocol)")
    real.add_argument("--prc", action="store_true", help="precision and recall against the --fid reference")
    real.add_argument("--fid-inf", action="store_true",
                      help="also FID and IS extrapolated to infinite N (Chong & Forsyth 2020); IS_inf alone without "
                      "--fid")
    real.add_argument("--kid-subsets", type=BoundedArg(bounds.KID_SUBSETS), default=100,
                      help="KID subsets (default 100)")
    real.add_argument("--kid-subset-size", type=BoundedArg(bounds.KID_SUBSET_SIZE), default=1000,
                      help="samples per KID subset (default 1000)")
    real.add_argument("--prc-k", type=BoundedArg(bounds.NEIGHBOURS), default=3,
                      help="nearest neighbours of precision/recall (default 3)")
    real.add_argument("--inf-points", type=BoundedArg(bounds.FIT_POINTS), default=15,
                      help="subset sizes of the infinite-N fits (default 15)")
    real.add_argument("--inf-smallest", type=BoundedArg(bounds.KID_SUBSET_SIZE), default=5000,
                      help="smallest subset of the infinite-N fits (default 5000; at most N/2 is used)")
    real.add_argument("--save-stats", metavar="OUT.npz", help="save the generated set's mu/sigma (pytorch-fid format)")
    real.add_argument("--per-image", metavar="OUT.csv",
                      help="write one row per sample, in input order: kl (its KL to the marginal, nats), and against "
                      "the --fid reference's features its realism score (Kynkaanniemi et al., k = --prc-k), its "
                      "--prc-k nearest reference images (index in the reference's order, distance) and possible_copy "
                      "(closer to a reference image than that image's nearest other reference image)")
    real.add_argument("--held-out", metavar="REF",
                      help="held-out real images (never trained on; any reference kind with images): the data-copying "
                      "test C_T of Meehan et al. 2020, with the --fid reference as the generator's training set")
    real.add_argument("--copy-cells", type=BoundedArg(bounds.Bound(1, MAX_CELLS)), default=DEFAULT_CELLS,
                      help=f"k-means cells of the data-copying test, 1-{MAX_CELLS} (default %(default)s)")
    demo = parser.add_argument_group("demo sampler (--images demo)")
    demo.add_argument("--n", type=BoundedArg(bounds.SAMPLES), default=1000,
                      help="number of images (also for --generator; default 1000)")
    demo.add_argument("--diversity", type=BoundedArg(bounds.Bound(1, len(SCENES))), default=None,
                      help="number of scene classes drawn (default: all)")
    demo.add_argument("--fidelity", type=BoundedArg(bounds.FRACTION), default=1.0,
                      help="1 = clean images, 0 = unrecognisable")
    demo.add_argument("--sample-seed", type=BoundedArg(bounds.SEED), default=0,
                      help="seed of the sampler or generator noise")
    gen = parser.add_argument_group("TorchScript generator (--generator)")
    gen.add_argument("--z-dim", type=BoundedArg(bounds.NOISE), default=128, help="noise dimension (default 128)")
    gen.add_argument("--gen-classes", type=BoundedArg(bounds.CLASSES), default=0,
                     help="number of classes of a conditional generator")
    gen.add_argument("--output-range", default="-1,1", metavar="LO,HI",
                     type=NumbersArg((bounds.REAL, bounds.REAL), ",", "-1,1"),
                     help="range of float outputs (default -1,1)")
    add_trust_arguments(parser)


def _load_matrix(path_text: str, kind: str):
    import numpy as np

    from probescope.core.errors import InputError
    from probescope.core.files import readable_file

    path = readable_file(path_text)
    try:
        loaded = np.load(path, allow_pickle=False)
        if isinstance(loaded, np.lib.npyio.NpzFile):
            with loaded:
                names = list(loaded.files)
                name = kind if kind in names else (names[0] if len(names) == 1 else None)
                if name is None:
                    raise InputError(f"the archive holds {names}: name the {kind} array '{kind}'", path)
                return loaded[name]
        return loaded
    except (ValueError, OSError, EOFError) as exc:
        raise InputError(f"cannot read as a NumPy array file ({exc})", path) from None


def _image_source(args: argparse.Namespace, extensions: tuple[str, ...], trust):
    from probescope.core.scoring.sources import TorchScriptGeneratorSource, open_source

    if args.generator:
        low, high = args.output_range
        return TorchScriptGeneratorSource(
            args.generator,
            args.z_dim,
            args.n,
            num_classes=args.gen_classes,
            output_range=(low, high),
            seed=args.sample_seed,
            device=args.device or "cpu",
            trust=trust,
        )
    if args.images == "demo":
        from probescope.core.demo.sampler import DemoSampler
        from probescope.core.demo.world import SCENES

        diversity = len(SCENES) if args.diversity is None else args.diversity
        return DemoSampler(args.n, diversity, args.fidelity, seed=args.sample_seed)
    return open_source(args.images, extensions)


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse flag combinations that would do nothing, before anything is loaded."""
    from probescope.core.errors import InputError

    runs_network = bool(args.images or args.generator)
    if args.device is not None and not runs_network:
        raise InputError(f"--device {args.device} does nothing with --probs, --logits or --example (no network runs)")
    if not runs_network and (args.fid or args.kid or args.prc or args.save_stats):
        raise InputError("--fid, --kid, --prc and --save-stats need the classifier's features: use --images or "
                         "--generator")
    if (args.kid or args.prc or args.held_out) and not args.fid:
        raise InputError("--kid, --prc and --held-out compare with a reference set: give it with --fid REF (or --fid "
                         "for the demo world's images)")


def run(args: argparse.Namespace) -> int:
    import json

    from probescope.core.atomic import save_npy
    from probescope.core.scoring.distances import DistanceSettings, distance_report
    from probescope.core.scoring.distributions import ClassScores
    from probescope.core.scoring.report import score_report

    _check_flags(args)
    header: dict[str, object] = {}
    class_names = None
    features = reference = held_out = None
    if args.example:
        from probescope.core.scoring import examples

        scores = ClassScores(examples.worked_example(args.example), "probs", f"example {args.example}")
        class_names = examples.CLASS_NAMES
        header["source"] = f"worked example, generator {args.example} ({examples.DESCRIPTIONS[args.example]})"
    elif args.probs or args.logits:
        kind, path = ("probs", args.probs) if args.probs else ("logits", args.logits)
        scores = ClassScores(_load_matrix(path, kind), kind, path)
        header["source"] = f"{kind} {path}"
    else:
        from probescope.cli.progress import end_progress_line, stderr_progress
        from probescope.core.data.images import set_max_pixels
        from probescope.core.scoring.classifiers import load_classifier
        from probescope.core.scoring.pipeline import classify_source, embed_source
        from probescope.core.scoring.sources import parse_extensions

        if args.max_pixels is not None:
            set_max_pixels(args.max_pixels)
        trust = trust_from_args(args)
        extensions = parse_extensions(args.extensions)
        source = _image_source(args, extensions, trust)
        if args.kid:
            from probescope.core.scoring.kernel import check_kid_protocol

            check_kid_protocol(source.length, None, args.kid_subsets, args.kid_subset_size)  # before any network runs
        classifier = load_classifier(args.classifier, args.device or "cpu", trust, args.resize)
        if source.length is not None:  # the logits (and features) of every image are kept: they must fit
            outputs = len(classifier.class_names or ()) or 1008
            width = 2048 if args.fid or args.save_stats or args.fid_inf else 0  # the widest features (Inception's)
            bounds.check_fits(4.0 * source.length * (outputs + width), f"{source.length} images' outputs")
        run_options = dict(workers=args.workers, progress=stderr_progress())
        if args.fid:
            from probescope.core.scoring.reference import load_reference

            print(f"reference {args.fid} through {classifier.name}", file=sys.stderr)
            reference = load_reference(args.fid, classifier, extensions=extensions, batch_size=args.batch_size,
                                       **run_options)
            end_progress_line()
            if args.held_out:
                print(f"held-out images {args.held_out} through {classifier.name}", file=sys.stderr)
                held_out = load_reference(args.held_out, classifier, extensions=extensions,
                                          batch_size=args.batch_size, **run_options)
                end_progress_line()
        print(f"scoring {source.describe()} with {classifier.name}", file=sys.stderr)
        if args.fid or args.save_stats:
            features, logits = embed_source(source, classifier, args.batch_size, **run_options)
        else:
            logits = classify_source(source, classifier, args.batch_size, **run_options)
        end_progress_line()
        if args.save_logits:
            save_npy(args.save_logits, logits)
        if args.save_stats:
            from probescope.core.scoring.frechet import gaussian_stats

            gaussian_stats(features).save(args.save_stats)
        scores = ClassScores(logits, "logits", source.name)
        class_names = classifier.class_names
        header.update(
            source=source.describe(),
            lossy_inputs=source.lossy,
            classifier=classifier.name,
            classifier_note=classifier.note,
            comparable_with_published=classifier.comparable,
        )
    unit = "bits" if args.bits else "nats"
    report = score_report(scores, args.splits, not args.no_shuffle, args.seed, unit=unit, class_names=class_names)
    settings = DistanceSettings(kid=args.kid, prc=args.prc, infinite=args.fid_inf, kid_subsets=args.kid_subsets,
                                kid_subset_size=args.kid_subset_size, prc_k=args.prc_k, inf_points=args.inf_points,
                                inf_smallest=args.inf_smallest, seed=args.seed)
    distances = None
    if args.per_image and reference is not None and reference.features is not None:
        from probescope.cli.progress import end_progress_line, stderr_progress

        # precision/recall's radii and the copy flag's, from one pass over the reference (then cached)
        reference.radii_of((args.prc_k, 1), progress=stderr_progress("reference"))
        end_progress_line()
    if reference is not None or args.fid_inf:
        distances = distance_report(features, scores, reference, settings, class_names)
    per_sample, lines = _per_sample(args, report.contributions, features, reference, held_out)
    if args.json:
        print(json.dumps({**header, **report.to_dict(), **(distances.to_dict() if distances else {}), **per_sample},
                         allow_nan=False))
    else:
        for key, value in header.items():
            print(f"{key.replace('_', ' ')}: {value}")
        print(report.summary())
        if distances is not None:
            print(distances.summary())
        for line in lines:
            print(line)
    return 0


def _per_sample(args: argparse.Namespace, kl, features, reference, held_out) -> tuple[dict[str, object], list[str]]:
    """Write --per-image (nearest reference images where the reference has features) and run --held-out's
    data-copying test: (what they report for JSON, the lines of the text output)."""
    from probescope.cli.progress import end_progress_line, stderr_progress
    from probescope.core.scoring.report import shown

    out: dict[str, object] = {}
    lines = []
    if args.per_image:
        from probescope.core.scoring.per_image import write_per_image
        from probescope.core.scoring.realism import sample_neighbours

        neighbours = None
        if reference is not None and reference.features is not None:
            radii = reference.radii_of((args.prc_k, 1))
            neighbours = sample_neighbours(features, reference.features, args.prc_k, real_radii=radii[args.prc_k],
                                           real_nn1=radii[1], progress=stderr_progress())
            end_progress_line()
            out["possible_copies"] = neighbours.copies
        write_per_image(args.per_image, kl, neighbours, args.prc_k)
        out["per_image"] = str(args.per_image)
        lines.append(f"per-image table: {args.per_image}" + (
            " (kl only: realism and the nearest images need a reference's features, --fid REF)" if neighbours is None
            else f" ({neighbours.copies} of {len(kl)} samples closer to a reference image than its nearest other "
            "reference image: possible copies)"))
    if held_out is not None:
        from probescope.core.scoring.copying import data_copying

        copying = data_copying(reference.require_features("the data-copying test"),
                               held_out.require_features("the data-copying test"), features, args.copy_cells,
                               seed=args.seed, progress=stderr_progress())
        end_progress_line()
        out.update(copying.to_dict())
        lines.append(f"data-copying C_T: {shown(copying.statistic, 2)}   ({copying.cells_used} of {copying.cells} "
                     "cells; << 0: samples closer to the training set than held-out images, copying; >> 0: farther, "
                     "underfitting)")
    return out, lines
