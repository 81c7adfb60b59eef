"""probescope propose: the next batch of trials, chosen by expected information gain under a fitted ensemble.

Writes them in the plain trials CSV layout (choices blank, plus `kind` and `info_gain` columns); the answered file
can be read back by every command. Queries that already served often are drawn less (frequency adjustment).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from probescope.cli.options import add_setting_arguments, settings_from
from probescope.cli.progress import end_progress_line, stderr_progress
from probescope.cli.similarity import add_judgment_arguments, load_filtered
from probescope.core.similarity.ensemble import Ensemble
from probescope.core.similarity.settings import ProposeSettings
from probescope.jobs.arguments import device_arg
from probescope.jobs.outputs import check_outputs


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_judgment_arguments(parser)
    parser.add_argument("--embedding", type=Path, required=True, metavar="EMB.npz")
    parser.add_argument("--out", type=Path, required=True, metavar="NEXT.csv")
    add_setting_arguments(parser, ProposeSettings)
    parser.add_argument("--device", default="cpu", type=device_arg)


def run(args: argparse.Namespace) -> int:
    # (lazy: `probescope --help` imports this module; the proposal's workflow adds 17 ms to it)
    from probescope.jobs.similarity.propose import check_proposal, propose, random_baseline, save_proposal

    check_outputs([("--out", args.out)], [("--judgments", args.judgments), ("--catalog", args.catalog),
                                          ("--embedding", args.embedding)])
    settings = settings_from(args, ProposeSettings)  # (refuses --keep above --candidates before anything loads)
    source, _, _ = load_filtered(args)
    j = source.judgments
    ens = Ensemble.load(args.embedding)
    check_proposal(ens, j, settings, args.embedding)

    start = time.perf_counter()
    proposal = propose(ens, j, settings, progress=None if args.json else stderr_progress("proposing"),
                       device=args.device)
    seconds = time.perf_counter() - start
    end_progress_line()
    save_proposal(args.out, proposal)
    random_gain = random_baseline(ens, j, proposal, settings, args.device)
    active = proposal.kind == "active"
    out = {
        "out": str(args.out), "trials": len(proposal.trials), "active": int(active.sum()),
        "confirmation": int((~active).sum()), "simulated": j.simulated, "seconds": seconds,
        "candidates_scored": settings.queries * settings.candidates,
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
