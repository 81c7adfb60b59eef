"""probescope embed: fit a psychological embedding (an ensemble of variational embeddings) to similarity judgments.

Prints the held-out cross-entropy of each dimensionality tried, the chosen one, and the convergence measures:
within-ensemble correlation, coarse-grained loss (when the source has a randomly assembled trial set), and
consecutive-fit correlation (with --init). Saves the ensemble as an .npz for `similarity --embedding` and `propose`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from probescope.core import bounds
from probescope.jobs.arguments import BoundedArg, RangesArg, device_arg


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from probescope.cli.similarity import add_judgment_arguments

    add_judgment_arguments(parser)
    parser.add_argument("--dims", default="2-10", type=RangesArg(bounds.DIMENSIONS),
                        help="dimensionalities to try, e.g. 2-10, 4 or 2,4,8, at most the number of stimuli "
                        "(default 2-10)")
    parser.add_argument("--ensemble", type=BoundedArg(bounds.MEMBERS), default=3,
                        help="members, each with its own 5%% held out (default 3)")
    parser.add_argument("--out", type=Path, default=Path("embedding.npz"), metavar="EMB.npz")
    parser.add_argument("--init", type=Path, metavar="PREV.npz",
                        help="warm start: the previous fit's two best members resume, the worst restarts")
    parser.add_argument("--coarse", metavar="FILE", help="randomly assembled trials for the coarse-grained loss")
    parser.add_argument("--max-epochs", type=BoundedArg(bounds.EPOCHS), default=300)
    parser.add_argument("--seed", type=BoundedArg(bounds.SEED), default=0)
    parser.add_argument("--device", default="cpu", type=device_arg, help="cpu or cuda")


def run(args: argparse.Namespace) -> int:
    import json
    import time

    import numpy as np

    from probescope.cli.progress import end_progress_line, stderr_progress
    from probescope.cli.similarity import describe_source, load_filtered
    from probescope.core.similarity.agreement import agreement_from_distances, reference_distances
    from probescope.core.similarity.correlation import (
        consecutive_correlation,
        expected_similarity,
        spearman,
        upper_pairs,
        within_ensemble_correlation,
    )
    from probescope.core.similarity.embedding import Ensemble, FitOptions, ensemble_cross_entropy, fit_ensemble
    from probescope.core.similarity.readers import load_judgments

    source, trials, report = load_filtered(args)
    j = source.judgments
    n = j.n_stimuli
    dims = args.dims.values("--dims", "dimensionality", high=n, because=f"the judgments have {n} stimuli")
    # each member holds a location and a scale per stimulus and dimension, with their gradients and Adam's moments
    bounds.check_fits(8.0 * args.ensemble * n * max(dims) * 4 * 2, f"an ensemble of {args.ensemble} x {n} stimuli x "
                      f"{max(dims)} dimensions")
    previous = Ensemble.load(args.init) if args.init is not None else None
    coarse, coarse_name = source.coarse, source.coarse_name
    if args.coarse is not None:
        coarse = load_judgments(args.coarse, args.catalog, index_base=args.index_base).trials
        coarse_name = str(args.coarse)

    progress = None if args.json else stderr_progress("fitting")

    start = time.perf_counter()
    result = fit_ensemble(trials, j.n_stimuli, dims, n_members=args.ensemble, previous=previous, seed=args.seed,
                          options=FitOptions(max_epochs=args.max_epochs), progress=progress, device=args.device)
    seconds = time.perf_counter() - start
    end_progress_line()
    ens = result.ensemble
    meta = dict(ens.meta)
    meta.update({"judgments": str(j.source), "simulated": j.simulated, "dropped": report.dropped,
                 "fit_seconds": seconds})
    ens = Ensemble(ens.loc, ens.scale, ens.prior_scale, ens.val_loss, ens.beta, meta)
    ens.save(args.out)

    real = np.nonzero(j.catalog.mirror_of < 0)[0] if j.catalog is not None else None  # no mirrored catch images
    within = within_ensemble_correlation(ens, stimuli=real, seed=args.seed) if ens.n_members > 1 else None
    psych = agreement_from_distances(trials, reference_distances(
        trials, lambda a, b: -expected_similarity(ens, a, b, seed=args.seed).mean(0)))
    out: dict = {
        "judgments": str(j.source), "simulated": j.simulated, "trials": len(trials), "dropped": report.dropped,
        "dims_loss": {str(k): v for k, v in result.dims_loss.items()}, "dims": ens.dims,
        "member_loss": ens.val_loss.tolist(), "warm_started": list(result.warm_started),
        "training_triplet_accuracy": psych.accuracy, "seconds": seconds, "out": str(args.out),
    }
    if within is not None:
        out["within_ensemble_correlation"] = {"pearson": within.value, "pairs": within.n_pairs}
    if coarse is not None and len(coarse):
        out["coarse_grained_loss"] = ensemble_cross_entropy(ens, coarse, seed=args.seed, source=coarse_name)
        out["coarse_trials"] = len(coarse)
        out["coarse_set"] = coarse_name
    if previous is not None:
        c = consecutive_correlation(previous, ens, stimuli=real, seed=args.seed)
        out["consecutive_correlation"] = {"pearson": c.value, "pairs": c.n_pairs}
    if source.truth is not None:  # simulated data: compare with the planted similarity
        a, b, _ = upper_pairs(len(real)) if real is not None else upper_pairs(ens.n_stimuli)
        if real is not None:
            a, b = real[a], real[b]
        fitted = expected_similarity(ens, a, b, seed=args.seed).mean(0)
        dist = np.linalg.norm(source.truth[a] - source.truth[b], axis=1)
        out["truth_spearman"] = spearman(fitted, np.exp(-ens.beta * dist))
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    print("\n".join(describe_source(source, report)))
    print(f"fit: {len(trials)} trials, {ens.n_members} members, {seconds:.1f} s")
    print("held-out cross-entropy (nats per trial; chance for 8-rank-2 = ln 56 = 4.03):")
    for d, loss in result.dims_loss.items():
        print(f"  {d:2d}-D  {loss:.4f}" + ("   <- chosen" if d == ens.dims else ""))
    print("members' held-out cross-entropy: " + ", ".join(f"{v:.4f}" for v in ens.val_loss)
          + ("  (warm started: " + ", ".join(str(w) for w in result.warm_started) + ")" if previous else ""))
    print(f"triplet accuracy on the training trials: {psych.accuracy:.4f}")
    if within is not None:
        print(f"within-ensemble correlation (Pearson, {within.n_pairs} pairs): {within.value:.4f}")
    if "coarse_grained_loss" in out:
        print(f"coarse-grained loss ({out['coarse_trials']} trials: {coarse_name}): {out['coarse_grained_loss']:.4f}")
    if "consecutive_correlation" in out:
        print(f"consecutive-fit correlation (Pearson): {out['consecutive_correlation']['pearson']:.4f}")
    if "truth_spearman" in out:
        print(f"SIMULATED data: Spearman of fitted vs planted similarity: {out['truth_spearman']:.4f}")
    print(f"saved {args.out}")
    return 0
