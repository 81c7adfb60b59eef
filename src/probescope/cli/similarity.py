"""probescope similarity: how well a model's features agree with human similarity judgments.

Triplet accuracy (L1, L2, cosine; ties count as wrong) on the trials left after quality control, per-trial agreement
(how many of each trial's 13 triplets the model gets right), and, given a psychological embedding (--embedding), its
own triplet accuracy as the reference row and the Spearman correlation of the model's similarity (cosine, dot) with
the embedding's expected similarity.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from probescope.cli.options import add_filter_arguments, add_setting_arguments, filters_from, settings_from
from probescope.cli.progress import end_progress_line, stderr_progress
from probescope.core.data.preprocess import parse_preprocess
from probescope.core.errors import InputError
from probescope.core.similarity.ensemble import Ensemble
from probescope.core.similarity.settings import AgreementSettings, Filters
from probescope.jobs.arguments import add_model_shape_arguments, add_trust_arguments, device_arg, trust_from_args


def add_judgment_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by similarity, embed and propose: where the judgments are and which filters apply."""
    parser.add_argument("--judgments", required=True, metavar="PATH",
                        help="psiz .hdf5, release .zip or folder, trials .csv, or 'demo' (simulated demo-world data)")
    parser.add_argument("--catalog", type=Path, metavar="FILE", help="stimulus catalog (.hdf5, .csv, stimuli.txt)")
    parser.add_argument("--images", type=Path, metavar="ROOT", help="folder the catalog's image paths are under")
    parser.add_argument("--index-base", type=int, choices=(0, 1), metavar="0|1",
                        help="how a psiz .hdf5 file numbers its stimuli, when neither its content nor a catalog tells")
    add_filter_arguments(parser, Filters)
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_judgment_arguments(parser)
    parser.add_argument("--features", type=Path, metavar="F.npy", help="row i = features of stimulus i")
    parser.add_argument("--model", metavar="SPEC", help="model spec, with --layer: features from its activations")
    parser.add_argument("--layer", metavar="NAME", help="layer of --model")
    parser.add_argument("--preprocess", metavar="SPEC",
                        help="the model's preprocessing: classic | imagenet, optionally :stretch=N or :crop=N (images "
                        "of several sizes need one, e.g. imagenet:crop=224); default: the model's own, at native size")
    parser.add_argument("--embedding", type=Path, metavar="EMB.npz",
                        help="psychological embedding: reference row and embedding correlation")
    add_setting_arguments(parser, AgreementSettings)
    parser.add_argument("--device", default="cpu", type=device_arg, help="device for --model (cpu, cuda)")
    add_model_shape_arguments(parser)
    add_trust_arguments(parser)


def load_filtered(args: argparse.Namespace):
    """Judgments per the shared options, after quality control: (source, trials, report); InputError saying which
    filters dropped what when no trial is left."""
    # (lazy: `probescope --help` imports this module; the judgments' readers add 30 ms to it)
    from probescope.jobs.similarity.trials import open_filtered

    return open_filtered(args.judgments, args.catalog, args.images, args.index_base, filters_from(args, Filters))


def describe_source(source, report) -> list[str]:
    j = source.judgments
    flag = "  [SIMULATED: not human data]" if j.simulated else ""
    lines = [f"judgments: {j.source} ({j.format}){flag}"]
    lines += [f"  {note}" for note in j.notes]
    dropped = ", ".join(f"{k} {v}" for k, v in report.dropped.items())
    lines.append(f"trials: {report.kept} kept of {len(j.trials)} (dropped: {dropped}); "
                 f"catch trials {report.catch_trials}")
    if report.grades:
        lines.append("sessions: " + ", ".join(f"{k} {v}" for k, v in report.sessions.items()))
    return lines


def run(args: argparse.Namespace) -> int:
    # (lazy: `probescope --help` imports this module; the scores' workflow adds 32 ms to it)
    from probescope.jobs.similarity.scores import distances_of, similarity_report, stimulus_features

    settings = settings_from(args, AgreementSettings)
    distances = distances_of(settings.distance)
    if (args.features is None) == (args.model is None):
        raise InputError("give either --features F.npy or --model SPEC --layer NAME")
    if args.model is not None and not args.layer:
        raise InputError("--model needs --layer")

    source, trials, report = load_filtered(args)
    j = source.judgments
    if args.features is not None:
        features, feature_name = stimulus_features(j, features=args.features)
    else:
        features, feature_name = stimulus_features(
            j, model=args.model, layer=args.layer, pool=settings.pool, device=args.device,
            trust=trust_from_args(args), preprocess=parse_preprocess(args.preprocess) if args.preprocess else None,
            input_size=args.input_size, layout=args.layout,
            progress=stderr_progress("features"))
        end_progress_line()
    ensemble = Ensemble.load(args.embedding) if args.embedding is not None else None
    out = similarity_report(j, trials, report, features, feature_name, settings, ensemble, args.embedding)
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    first = out["triplets"]
    print("\n".join(describe_source(source, report)))
    print(f"features: {feature_name}  ({features.shape[0]} x {features.shape[1]})")
    print(f"triplets: {first} ({first / len(trials):.1f} per trial)")
    print("triplet accuracy" + "".join(f"  {d:>7}" for d in distances))
    print("  model         " + "".join(f"  {out['accuracy'][d]:7.4f}" for d in distances))
    if "embedding" in out:
        print(f"  psych. embedding (expected similarity): {out['embedding']['accuracy']:.4f}")
    for d in distances:
        hist = out["per_trial_agreement"][d]["histogram"]
        print(f"per-trial agreement ({d}): mean {out['per_trial_agreement'][d]['mean']:.2f} of "
              f"{len(hist) - 1}; trials with k right: {hist}")
    if "embedding" in out:
        for k, c in out["embedding"]["correlation"].items():
            how = "sampled" if c["sampled"] else "all"
            print(f"embedding correlation ({k}): Spearman {c['spearman']:.4f} over {c['pairs']} pairs ({how})")
    return 0
