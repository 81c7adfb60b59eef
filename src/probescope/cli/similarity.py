"""probescope similarity: how well a model's features agree with human similarity judgments.

Triplet accuracy (L1, L2, cosine; ties count as wrong) on the trials left after quality control, per-trial agreement
(how many of each trial's 13 triplets the model gets right), and, given a psychological embedding (--embedding), its
own triplet accuracy as the reference row and the Spearman correlation of the model's similarity (cosine, dot) with
the embedding's expected similarity.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from probescope.core import bounds
from probescope.jobs.arguments import BoundedArg, add_trust_arguments, device_arg


def add_judgment_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by similarity, embed and propose: where the judgments are and which filters apply."""
    parser.add_argument("--judgments", required=True, metavar="PATH",
                        help="psiz .hdf5, release .zip or folder, trials .csv, or 'demo' (simulated demo-world data)")
    parser.add_argument("--catalog", type=Path, metavar="FILE", help="stimulus catalog (.hdf5, .csv, stimuli.txt)")
    parser.add_argument("--images", type=Path, metavar="ROOT", help="folder the catalog's image paths are under")
    parser.add_argument("--index-base", type=int, choices=(0, 1), metavar="0|1",
                        help="how a psiz .hdf5 file numbers its stimuli, when neither its content nor a catalog tells")
    parser.add_argument("--no-catch-filter", action="store_true", help="keep catch trials")
    parser.add_argument("--no-grade-filter", action="store_true",
                        help="keep unsatisfactory sessions and the file's trial weights")
    parser.add_argument("--no-rt-filter", action="store_true", help="keep trials answered in under 1 s")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead of text")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_judgment_arguments(parser)
    parser.add_argument("--features", type=Path, metavar="F.npy", help="row i = features of stimulus i")
    parser.add_argument("--model", metavar="SPEC", help="model spec, with --layer: features from its activations")
    parser.add_argument("--layer", metavar="NAME", help="layer of --model")
    parser.add_argument("--preprocess", metavar="SPEC",
                        help="the model's preprocessing: classic | imagenet, optionally :stretch=N or :crop=N (images "
                        "of several sizes need one, e.g. imagenet:crop=224); default: the model's own, at native size")
    parser.add_argument("--pool", choices=("avg", "flatten"), default="avg",
                        help="global-average pool the layer (default) or flatten it")
    parser.add_argument("--distance", default="cosine,l1,l2", help="comma-separated: cosine, l1, l2")
    parser.add_argument("--embedding", type=Path, metavar="EMB.npz",
                        help="psychological embedding: reference row and embedding correlation")
    parser.add_argument("--max-pairs", type=BoundedArg(bounds.PAIRS), default=1_000_000,
                        help="pairs for the embedding correlation (sampled, seeded, when there are more)")
    parser.add_argument("--seed", type=BoundedArg(bounds.SEED), default=0)
    parser.add_argument("--device", default="cpu", type=device_arg, help="device for --model (cpu, cuda)")
    add_trust_arguments(parser)


def load_filtered(args: argparse.Namespace):
    """Judgments per the shared options, after quality control: (source, trials, report); InputError saying which
    filters dropped what when no trial is left."""
    from probescope.core.errors import InputError
    from probescope.core.similarity.quality import apply_quality_control
    from probescope.core.similarity.sources import open_judgments

    source = open_judgments(args.judgments, args.catalog, args.images, index_base=args.index_base)
    j = source.judgments
    mirror = j.catalog.mirror_of if j.catalog is not None else None
    trials, report = apply_quality_control(
        j.trials, mirror, j.session_grade,
        catch=not args.no_catch_filter, grade=not args.no_grade_filter, rt=not args.no_rt_filter,
    )
    if len(trials) == 0:
        flags = {"catch": "--no-catch-filter", "grade": "--no-grade-filter", "rt": "--no-rt-filter"}
        why = ", ".join(f"{n} by the {k} filter ({flags[k]} keeps them)" for k, n in report.dropped.items() if n)
        raise InputError(f"no trials left after quality control: of {len(j.trials)} read, {why}", j.source)
    return source, trials, report


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
    import json

    import numpy as np

    from probescope.core.errors import InputError
    from probescope.core.similarity.agreement import (
        DISTANCES,
        agreement_from_distances,
        reference_distances,
        triplet_agreement,
    )
    from probescope.core.similarity.correlation import MODEL_SIMILARITIES, embedding_correlation, expected_similarity
    from probescope.core.similarity.embedding import Ensemble
    from probescope.core.similarity.sources import load_features, model_features

    distances = [d.strip().lower() for d in args.distance.split(",") if d.strip()]
    unknown = sorted(set(distances) - set(DISTANCES))
    if unknown or not distances:
        raise InputError(f"--distance: unknown {', '.join(unknown) or 'empty list'} (choose from cosine, l1, l2)")
    if (args.features is None) == (args.model is None):
        raise InputError("give either --features F.npy or --model SPEC --layer NAME")
    if args.model is not None and not args.layer:
        raise InputError("--model needs --layer")

    source, trials, report = load_filtered(args)
    j = source.judgments
    n = j.n_stimuli
    if args.features is not None:
        features = load_features(args.features, j)
        feature_name = str(args.features)
    else:
        if j.catalog is None:
            raise InputError("--model needs a catalog of stimulus images (--catalog)", j.source)
        from probescope.cli.progress import end_progress_line, stderr_progress
        from probescope.core.cache import cache_dir
        from probescope.core.data.preprocess import parse_preprocess
        from probescope.jobs.arguments import trust_from_args

        features = model_features(j.catalog, args.model, args.layer, pool=args.pool, device=args.device,
                                  cache_dir=cache_dir(), progress=stderr_progress("features"),
                                  trust=trust_from_args(args),
                                  preprocess=parse_preprocess(args.preprocess) if args.preprocess else None)
        end_progress_line()
        feature_name = f"{args.model} {args.layer} ({args.pool})"

    results = {d: triplet_agreement(trials, features, d) for d in distances}
    first = results[distances[0]]
    out: dict = {
        "judgments": str(j.source), "format": j.format, "simulated": j.simulated, "notes": list(j.notes),
        "features": feature_name, "trials": len(trials), "trials_read": len(j.trials),
        "triplets": first.n_triplets, "accuracy": {d: r.accuracy for d, r in results.items()},
        "dropped": report.dropped, "sessions": report.sessions,
        "per_trial_agreement": {
            d: {"mean": float(r.per_trial_correct.mean()),
                "histogram": np.bincount(r.per_trial_correct, minlength=int(r.per_trial_total.max()) + 1).tolist()}
            for d, r in results.items()},
    }
    if args.embedding is not None:
        ens = Ensemble.load(args.embedding)
        if ens.n_stimuli != n:
            raise InputError(f"the embedding has {ens.n_stimuli} stimuli, the judgments {n}", args.embedding)
        psych = agreement_from_distances(trials, reference_distances(
            trials, lambda a, b: -expected_similarity(ens, a, b, seed=args.seed).mean(0)))
        keep = j.catalog.mirror_of < 0 if j.catalog is not None else None
        stimuli = np.nonzero(keep)[0] if keep is not None else None
        corr = {k: embedding_correlation(ens, features, k, stimuli=stimuli, max_pairs=args.max_pairs, seed=args.seed)
                for k in MODEL_SIMILARITIES}
        out["embedding"] = {
            "path": str(args.embedding), "accuracy": psych.accuracy,
            "correlation": {k: {"spearman": c.value, "pairs": c.n_pairs, "sampled": c.sampled}
                            for k, c in corr.items()},
        }
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print("\n".join(describe_source(source, report)))
    print(f"features: {feature_name}  ({features.shape[0]} x {features.shape[1]})")
    print(f"triplets: {first.n_triplets} ({first.n_triplets / len(trials):.1f} per trial)")
    print("triplet accuracy" + "".join(f"  {d:>7}" for d in distances))
    print("  model         " + "".join(f"  {results[d].accuracy:7.4f}" for d in distances))
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
