"""probescope propose: the next batch of trials, chosen by expected information gain under a fitted ensemble.

Writes them in the plain trials CSV layout (choices blank, plus `kind` and `info_gain` columns); the answered file
can be read back by every command. Queries that already served often are drawn less (frequency adjustment).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from probescope.core import bounds
from probescope.jobs.arguments import BoundedArg, device_arg


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from probescope.cli.similarity import add_judgment_arguments

    add_judgment_arguments(parser)
    parser.add_argument("--embedding", type=Path, required=True, metavar="EMB.npz")
    parser.add_argument("--out", type=Path, required=True, metavar="NEXT.csv")
    parser.add_argument("--queries", type=BoundedArg(bounds.QUERIES), default=100,
                        help="queries to sample (default 100)")
    parser.add_argument("--candidates", type=BoundedArg(bounds.CANDIDATES), default=1000,
                        help="candidate trials per query (default 1000)")
    parser.add_argument("--keep", type=BoundedArg(bounds.CANDIDATES), default=3,
                        help="best trials kept per query, at most the candidates (default 3)")
    parser.add_argument("--confirmation", type=BoundedArg(bounds.Bound(0, bounds.QUERIES.high)),
                        help="confirmation trials (default: as many as queries)")
    parser.add_argument("--neighbors", type=BoundedArg(bounds.NEIGHBOURS), help="nearest neighbours references come "
                        "from, fewer than the stimuli (default: 1%% of the stimuli, at least 24)")
    parser.add_argument("--samples", type=BoundedArg(bounds.POSTERIOR_SAMPLES), default=32,
                        help="posterior samples per member (default 32)")
    parser.add_argument("--seed", type=BoundedArg(bounds.SEED), default=0)
    parser.add_argument("--device", default="cpu", type=device_arg)


def run(args: argparse.Namespace) -> int:
    import json
    import time

    import numpy as np

    from probescope.cli.progress import end_progress_line, stderr_progress
    from probescope.cli.similarity import load_filtered
    from probescope.core.errors import InputError
    from probescope.core.similarity.active import information_gain, propose_trials
    from probescope.core.similarity.embedding import Ensemble
    from probescope.core.similarity.simulate import random_references
    from probescope.core.similarity.writers import write_trials_csv

    bounds.CANDIDATES.check(args.keep, "--keep", high=args.candidates, because=f"--candidates {args.candidates}")
    source, trials, _ = load_filtered(args)
    j = source.judgments
    ens = Ensemble.load(args.embedding)
    if ens.n_stimuli != j.n_stimuli:
        raise InputError(f"the embedding has {ens.n_stimuli} stimuli, the judgments {j.n_stimuli}",
                         args.embedding)
    n = ens.n_stimuli
    if args.neighbors is not None:
        bounds.NEIGHBOURS.check(args.neighbors, "--neighbors", high=n - 1, because=f"the embedding has {n} stimuli")
    neighbours = args.neighbors or max(n // 100 + 1, 24)
    # posterior samples of every stimulus, and per chunk of queries the Gumbel keys of candidates x neighbours
    bounds.check_fits(4.0 * args.samples * ens.n_members * n * ens.dims + 16.0 * args.candidates * neighbours
                      + 4.0 * 512 * args.samples * 64 * 3, f"proposing with --samples {args.samples} and "
                      f"--candidates {args.candidates}")
    counts = np.bincount(j.trials.query, minlength=ens.n_stimuli).astype(np.float64)
    eligible = j.catalog.mirror_of < 0 if j.catalog is not None else None

    progress = None if args.json else stderr_progress("proposing")

    start = time.perf_counter()
    proposal = propose_trials(
        ens, n_queries=args.queries, n_candidates=args.candidates, keep_per_query=args.keep,
        n_confirmation=args.confirmation, n_neighbors=args.neighbors, query_counts=counts, eligible=eligible,
        n_samples=args.samples, seed=args.seed, progress=progress, device=args.device,
    )
    seconds = time.perf_counter() - start
    end_progress_line()
    write_trials_csv(args.out, proposal.trials, {"kind": proposal.kind, "info_gain": proposal.info_gain})

    # baseline: the same number of randomly assembled trials
    rng = np.random.default_rng(args.seed)
    pool = np.nonzero(eligible)[0] if eligible is not None else np.arange(ens.n_stimuli)
    rq = rng.choice(pool, len(proposal.trials))
    random_gain = information_gain(ens, rq, random_references(rng, rq, pool, proposal.trials.references.shape[1]),
                                   n_samples=args.samples, seed=args.seed, device=args.device)
    active = proposal.kind == "active"
    out = {
        "out": str(args.out), "trials": len(proposal.trials), "active": int(active.sum()),
        "confirmation": int((~active).sum()), "simulated": j.simulated, "seconds": seconds,
        "candidates_scored": args.queries * args.candidates,
        "mean_info_gain": {"active": float(proposal.info_gain[active].mean()),
                           "confirmation": float(proposal.info_gain[~active].mean()) if (~active).any() else None,
                           "random": float(random_gain.mean())},
    }
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    flag = "  [SIMULATED judgments]" if j.simulated else ""
    print(f"wrote {args.out}: {out['trials']} trials ({out['active']} active, {out['confirmation']} confirmation)"
          f"{flag}")
    print(f"scored {out['candidates_scored']} candidates in {seconds:.1f} s")
    gains = out["mean_info_gain"]
    print(f"mean expected information gain (nats): active {gains['active']:.4f}, confirmation "
          f"{gains['confirmation'] if gains['confirmation'] is None else round(gains['confirmation'], 4)}, "
          f"random trials {gains['random']:.4f}")
    return 0
