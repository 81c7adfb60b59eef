"""`probescope batch MANIFEST.toml --out DIR [--ray auto|ADDRESS]`: dissect many models and layers.

Without --ray the jobs run here, one after another, each layer's units in --jobs processes; with --ray they run as
tasks on a Ray cluster (`auto`: the cluster this machine belongs to, or a local one started for the run). Either way
DIR/<model>/<layer>/ gets the dissection.json and tally.csv that `probescope dissect` writes; DIR/status.json tracks
progress, and running the command again resumes, skipping finished chunks. See docs/cluster.md.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

from probescope.core.bounds import PROCESSES, check_fits
from probescope.core.dissection.settings import DissectionSettings
from probescope.jobs.arguments import BoundedArg, add_trust_arguments, trust_from_args
from probescope.jobs.batch.manifest import read_manifest
from probescope.jobs.kernel.spec import ray_address_from_args


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("manifest", type=Path, help="batch manifest (TOML): dataset, models with layers, settings")
    parser.add_argument("--out", type=Path, required=True, help="output folder")
    parser.add_argument("--ray", metavar="auto|ADDRESS",
                        help="run on a Ray cluster (needs probescope[cluster]): auto (the cluster this machine belongs "
                             "to, or one started for the run), local, a head's HOST:PORT or ray://HOST:PORT; default: "
                             "locally, one job at a time. A cluster on another machine needs Ray's token "
                             "authentication or --ray-insecure (docs/cluster.md)")
    parser.add_argument("--ray-insecure", action="store_true",
                        help="with --ray: connect to a Ray cluster on another machine although Ray's token "
                             "authentication is not set up (anyone who can reach that cluster can run code on it)")
    parser.add_argument("--jobs", type=BoundedArg(PROCESSES), metavar="N",
                        help="local runs: processes dissecting units at once (0 = one per core, 1 = this process "
                             "alone; the results are the same for any number); default: the manifest's [settings] "
                             "jobs, else 0. On Ray, the cluster decides")
    add_trust_arguments(parser)


def run(args: argparse.Namespace) -> int:
    # (lazy: `probescope --help` imports this module; running a batch adds 60 modules, 60 ms, to it)
    from probescope.jobs.batch.ray_executor import RayExecutor
    from probescope.jobs.batch.runner import run_batch

    if args.ray:  # a cluster it must not reach, or a malformed address: refused before anything else
        ray_address_from_args(args.ray, args.ray_insecure)
    manifest = read_manifest(args.manifest)
    check_fits(manifest.settings.cache_bytes, f"[settings] cache_mb = {manifest.settings.cache_mb}", args.manifest)
    if args.jobs is not None:
        manifest = replace(manifest, settings=DissectionSettings.from_mapping(
            {**manifest.settings.to_mapping(), "jobs": args.jobs}, "--jobs"))
    trust = trust_from_args(args)
    executor = None
    if args.ray:
        executor = RayExecutor(args.ray, args.ray_insecure)
    try:
        doc = run_batch(manifest, args.out, executor, trust=trust)
    finally:
        if executor is not None:
            executor.close()
    print(f"wrote {len(doc['jobs'])} layer(s) under {args.out}", file=sys.stderr)
    return 0
