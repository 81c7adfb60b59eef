"""`probescope score`: Inception Score of class probabilities, logits, or images through a classifier; with a
reference set of real images also FID, KID, precision/recall, density/coverage, class coverage and the infinite-N
limits; the Vendi score of the images' features (and of the reference's).

Examples:
  probescope score --logits logits.npy --json
  probescope score --images samples/ --classifier inception-tf:weights-inception-2015-12-05-6726825d.pth
  probescope score --images samples/ --classifier inception-tf:<weights> --fid real/ --kid --prc --fid-inf --json
  probescope score --images demo --n 2000 --fid --prc --density-coverage --vendi
  probescope score --images demo --n 2000 --diversity 3 --fidelity 0.5 --fid --kid --prc
  probescope score --example D --splits 1
  probescope score --images samples.npz --fid real/ --per-image per_sample.csv --held-out heldout/
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from probescope.cli.options import add_setting_arguments, settings_from
from probescope.cli.progress import end_progress_line, stderr_progress
from probescope.core import bounds
from probescope.core.data.images import set_max_pixels
from probescope.core.demo.sampler import DemoSampler
from probescope.core.demo.world import SCENES
from probescope.core.errors import InputError
from probescope.core.files import NUMPY_FILE_ERRORS, readable_file, zip_problem
from probescope.core.scoring import examples
from probescope.core.scoring.distributions import ClassScores
from probescope.core.scoring.feature_spec import check_spec
from probescope.core.scoring.kid import check_kid_protocol
from probescope.core.scoring.settings import ScoreSettings
from probescope.core.scoring.sources import (
    DEFAULT_EXTENSIONS,
    TorchScriptGeneratorSource,
    open_source,
    parse_extensions,
)
from probescope.jobs.arguments import BoundedArg, NumbersArg, add_trust_arguments, device_arg, trust_from_args
from probescope.jobs.inputs import DEMO_SAMPLES
from probescope.jobs.outputs import check_outputs
from probescope.jobs.protocol import Progress, TaskContext
from probescope.jobs.scoring.workflow import ScoreAsk, score_images, score_rows


def add_arguments(parser: argparse.ArgumentParser) -> None:
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
    _settings(parser, "splits", "seed", "shuffle", "resize")  # (shuffle: --no-shuffle)
    parser.add_argument("--max-pixels", type=BoundedArg(bounds.PIXELS), metavar="N",
                        help="refuse images larger than N pixels before decoding them (default 50000000, or "
                        "$PROBESCOPE_MAX_PIXELS)")
    _settings(parser, "batch_size", "workers")
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
        "distances to real images (need --images or --generator; each depends on the features, --features)")
    _settings(real, "features", "feature_resize", "precision")
    real.add_argument("--fid", nargs="?", const="demo", metavar="REF",
                      help="FID against REF: a folder of real images, a uint8 .npy/.npz, a Broden dataset folder, a "
                      "pytorch-fid mu/sigma .npz, or 'demo' (the demo world's images; the default without REF). "
                      "Reference features are cached per classifier and image content. Also reports class coverage")
    real.add_argument("--kid", action="store_true", help="KID against the --fid reference (torch-fidelity's protocol)")
    real.add_argument("--prc", action="store_true", help="precision and recall against the --fid reference")
    real.add_argument("--density-coverage", action="store_true",
                      help="density and coverage against the --fid reference's features (Naeem et al. 2020; k = "
                      "--dc-k nearest real neighbours, the paper's 5 by default)")
    real.add_argument("--vendi", action="store_true",
                      help="the Vendi score of the samples' features (Friedman & Dieng 2023, cosine kernel: the "
                      "effective number of distinct samples), and of the --fid reference's when given")
    real.add_argument("--cmmd", action="store_true",
                      help="CMMD against the --fid reference (Jayasumana et al. 2024: unbiased MMD^2 with a Gaussian "
                      "RBF kernel, sigma 10, on unit-length CLIP image embeddings, x1000): needs --features "
                      "openclip:NAME:FILE")
    real.add_argument("--fid-inf", action="store_true",
                      help="also FID and IS extrapolated to infinite N (Chong & Forsyth 2020); IS_inf alone without "
                      "--fid")
    _settings(real, "kid_subsets", "kid_subset_size", "prc_k", "dc_k", "inf_points", "inf_smallest")
    real.add_argument("--save-stats", metavar="OUT.npz", help="save the generated set's mu/sigma (pytorch-fid format)")
    real.add_argument("--per-image", metavar="OUT.csv",
                      help="write one row per sample, in input order: kl (its KL to the marginal, nats), and against "
                      "the --fid reference's features its realism score (Kynkaanniemi et al., k = --prc-k), its "
                      "--prc-k nearest reference images (index in the reference's order, distance) and the copy "
                      "test: copy_p_value and possible_copy (its distance to the nearest reference image is below "
                      "the --copy-alpha quantile of held-out real images', from --held-out or set aside from the "
                      "reference)")
    real.add_argument("--held-out", metavar="REF",
                      help="held-out real images (from the same distribution, never trained on; any reference kind "
                      "with images): they calibrate the copy test, and give the data-copying test C_T of Meehan et "
                      "al. 2020 with the --fid reference as the generator's training set")
    _settings(real, "copy_alpha", "held_out_share", "copy_cells")
    demo = parser.add_argument_group("demo sampler (--images demo)")
    demo.add_argument("--n", type=BoundedArg(bounds.SAMPLES), default=DEMO_SAMPLES,
                      help="number of images (also for --generator; default %(default)s)")
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


METAVARS = {"resize": "N", "features": "SPEC", "copy_alpha": "ALPHA", "held_out_share": "SHARE"}


def _settings(group, *names: str) -> None:
    """The options of ScoreSettings fields `names` (cli.options; their help says the default where it matters)."""
    add_setting_arguments(group, ScoreSettings, names, metavars=METAVARS, shown="")


def settings_from_args(args: argparse.Namespace) -> ScoreSettings:
    """The ScoreSettings the command line asked for."""
    return settings_from(args, ScoreSettings)


def _load_matrix(path_text: str, kind: str):
    path = readable_file(path_text)
    problem = zip_problem(path)
    if problem:
        raise InputError(f"cannot read as a NumPy array file ({problem})", path)
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
    except NUMPY_FILE_ERRORS as exc:
        raise InputError(f"cannot read as a NumPy array file ({exc})", path) from None


def _image_source(args: argparse.Namespace, extensions: tuple[str, ...], trust):
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
        diversity = len(SCENES) if args.diversity is None else args.diversity
        return DemoSampler(args.n, diversity, args.fidelity, seed=args.sample_seed)
    return open_source(args.images, extensions)


def _check_flags(args: argparse.Namespace) -> None:
    """Refuse flag combinations that would do nothing, before anything is loaded."""
    runs_network = bool(args.images or args.generator)
    if args.device is not None and not runs_network:
        raise InputError(f"--device {args.device} does nothing with --probs, --logits or --example (no network runs)")
    if not runs_network and (args.fid or args.kid or args.prc or args.density_coverage or args.vendi or args.cmmd
                             or args.save_stats):
        raise InputError("--fid, --kid, --prc, --density-coverage, --vendi, --cmmd and --save-stats need the images' "
                         "features: use --images or --generator")
    if (args.kid or args.prc or args.density_coverage or args.held_out or args.cmmd) and not args.fid:
        raise InputError("--kid, --prc, --density-coverage, --cmmd and --held-out compare with a reference set: give "
                         "it with --fid REF (or --fid for the demo world's images)")
    if args.held_out and args.fid and _same_input(args.held_out, args.fid):
        raise InputError(f"--held-out {args.held_out} names the --fid reference itself: held-out images must be real "
                         "images not in the reference (never trained on)")

    check_spec(args.features)
    if args.cmmd and not args.features.startswith("openclip:"):
        raise InputError(f"--cmmd is measured on CLIP image embeddings: add --features openclip:NAME:FILE (the "
                         f"features are {args.features!r})")
    _check_outputs(args)


def _same_input(a: str, b: str) -> bool:
    """Two reference specs naming the same images: the same word ('demo') or the same path."""
    return a == b or (Path(a).exists() and Path(b).exists() and Path(a).resolve() == Path(b).resolve())


OUTPUT_OPTIONS = ("per_image", "save_logits", "save_stats")  # every option `score` writes a file to
# every option it reads
INPUT_OPTIONS = ("probs", "logits", "images", "generator", "fid", "held_out", "classifier", "features")


def _check_outputs(args: argparse.Namespace) -> None:
    """Refuse an output that is one of the inputs, or inside an input folder, before anything is read or written."""

    def option(name: str) -> str:
        return "--" + name.replace("_", "-")

    inputs = [(option(name), getattr(args, name)) for name in INPUT_OPTIONS if getattr(args, name) != "demo"]
    inputs += [("--trust", path) for path in args.trust]
    check_outputs([(option(name), getattr(args, name)) for name in OUTPUT_OPTIONS], inputs)


def run(args: argparse.Namespace) -> int:
    _check_flags(args)
    settings = settings_from_args(args)
    ask = ScoreAsk(fid=args.fid, held_out=args.held_out, kid=args.kid, prc=args.prc, fid_inf=args.fid_inf,
                   density_coverage=args.density_coverage, vendi=args.vendi, cmmd=args.cmmd, bits=args.bits,
                   save_logits=args.save_logits, save_stats=args.save_stats, per_image=args.per_image)
    if args.example:
        scores = ClassScores(examples.worked_example(args.example), "probs", f"example {args.example}")
        header = {"source": f"worked example, generator {args.example} ({examples.DESCRIPTIONS[args.example]})"}
        result = _run_job(score_rows, scores=scores, settings=settings, ask=ask, class_names=examples.CLASS_NAMES,
                          header=header)
    elif args.probs or args.logits:
        kind, path = ("probs", args.probs) if args.probs else ("logits", args.logits)
        scores = ClassScores(_load_matrix(path, kind), kind, path)
        result = _run_job(score_rows, scores=scores, settings=settings, ask=ask, header={"source": f"{kind} {path}"})
    else:
        # (torch: `probescope --help` imports this module; torch takes 1.5 s)
        from probescope.core.scoring.classifiers import load_classifier
        from probescope.core.scoring.features import attach_features

        if args.max_pixels is not None:
            set_max_pixels(args.max_pixels)
        trust = trust_from_args(args)
        ask = replace(ask, extensions=parse_extensions(args.extensions))
        source = _image_source(args, ask.extensions, trust)
        if args.kid:
            check_kid_protocol(source.length, None, args.kid_subsets, args.kid_subset_size)  # before any network runs
        classifier = attach_features(load_classifier(args.classifier, args.device or "cpu", trust, args.resize),
                                     settings, trust)
        result = _run_job(score_images, source=source, classifier=classifier, settings=settings, ask=ask)
    if args.json:
        print(json.dumps(result.to_dict(), allow_nan=False))
    else:
        for line in result.text():
            print(line)
    return 0


def _run_job(function, **kwargs):
    """Run a jobs function here: its stages as lines of their own on stderr, its progress as one live line."""
    line = [stderr_progress()]

    def show(progress: Progress) -> None:
        if progress.fraction is None:  # a new stage
            end_progress_line()
            print(progress.message, file=sys.stderr)
            line[0] = stderr_progress()
        else:
            line[0](progress.fraction, progress.message)

    steps = function(TaskContext(emit=show), **kwargs)
    try:
        while True:
            item = next(steps)
            if isinstance(item, Progress):
                show(item)
    except StopIteration as done:
        return done.value
    finally:
        end_progress_line()
