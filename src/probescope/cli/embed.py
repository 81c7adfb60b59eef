"""probescope embed: fit a psychological embedding (an ensemble of variational embeddings) to similarity judgments.

Prints the held-out cross-entropy of each dimensionality tried, the chosen one, and the convergence measures:
within-ensemble correlation, coarse-grained loss (when the source has a randomly assembled trial set), and
consecutive-fit correlation (with --init). Saves the ensemble as an .npz for `similarity --embedding` and `propose`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from probescope.cli.options import add_setting_arguments, settings_from
from probescope.cli.progress import end_progress_line, stderr_progress
from probescope.cli.similarity import add_judgment_arguments, describe_source, load_filtered
from probescope.core import bounds
from probescope.core.similarity.ensemble import Ensemble
from probescope.core.similarity.settings import EmbeddingSettings
from probescope.jobs.arguments import device_arg
from probescope.jobs.outputs import check_outputs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_judgment_arguments(parser)
    parser.add_argument("--out", type=Path, default=Path("embedding.npz"), metavar="EMB.npz")
    parser.add_argument("--init", type=Path, metavar="PREV.npz",
                        help="warm start: the previous fit's two best members resume, the worst restarts")
    parser.add_argument("--coarse", metavar="FILE", help="randomly assembled trials for the coarse-grained loss")
    add_setting_arguments(parser, EmbeddingSettings)
    parser.add_argument("--device", default="cpu", type=device_arg, help="cpu or cuda")


def run(args: argparse.Namespace) -> int:
    # (lazy: `probescope --help` imports this module; the judgments' readers and the fit add 40 ms to it)
    from probescope.core.similarity.readers import load_judgments
    from probescope.jobs.similarity.embedding import embed

    check_outputs([("--out", args.out)], [("--judgments", args.judgments), ("--catalog", args.catalog),
                                          ("--coarse", args.coarse)])  # --out --init: a warm start updated in place
    settings = settings_from(args, EmbeddingSettings)
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

    out, result = embed(source, trials, report, dims, settings, args.out, previous=previous, coarse=coarse,
                        coarse_name=coarse_name, progress=None if args.json else stderr_progress("fitting"),
                        device=args.device)
    end_progress_line()
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    ens = result.ensemble
    print("\n".join(describe_source(source, report)))
    print(f"fit: {len(trials)} trials, {ens.n_members} members, {out['seconds']:.1f} s")
    print("held-out cross-entropy (nats per trial; chance for 8-rank-2 = ln 56 = 4.03):")
    for d, loss in result.dims_loss.items():
        print(f"  {d:2d}-D  {loss:.4f}" + ("   <- chosen" if d == ens.dims else ""))
    print("members' held-out cross-entropy: " + ", ".join(f"{v:.4f}" for v in ens.val_loss)
          + ("  (warm started: " + ", ".join(str(w) for w in result.warm_started) + ")" if previous else ""))
    print(f"triplet accuracy on the training trials: {out['training_triplet_accuracy']:.4f}")
    if "within_ensemble_correlation" in out:
        within = out["within_ensemble_correlation"]
        print(f"within-ensemble correlation (Pearson, {within['pairs']} pairs): {within['pearson']:.4f}")
    if "coarse_grained_loss" in out:
        print(f"coarse-grained loss ({out['coarse_trials']} trials: {coarse_name}): {out['coarse_grained_loss']:.4f}")
    if "consecutive_correlation" in out:
        print(f"consecutive-fit correlation (Pearson): {out['consecutive_correlation']['pearson']:.4f}")
    if "truth_spearman" in out:
        print(f"SIMULATED data: Spearman of fitted vs planted similarity: {out['truth_spearman']:.4f}")
    print(f"saved {args.out}")
    return 0
