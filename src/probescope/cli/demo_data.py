"""`probescope demo-data DIR`: write the demo world's Broden-format probing dataset anywhere."""

from __future__ import annotations

import argparse

from probescope.cli.progress import end_progress_line, stderr_progress
from probescope.core import bounds
from probescope.core.data.broden import BrodenDataset
from probescope.core.demo.dataset import DEFAULT_N, write_demo_dataset
from probescope.jobs.arguments import BoundedArg


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="folder to write (created if missing)")
    parser.add_argument("--images", type=BoundedArg(bounds.DEMO_IMAGES), default=None,
                        help="number of images (default: the demo's 1500)")
    parser.add_argument("--seed", type=BoundedArg(bounds.SEED), default=0, help="generator seed (default 0)")


def run(args: argparse.Namespace) -> int:
    root = write_demo_dataset(args.dir, args.images or DEFAULT_N, args.seed, stderr_progress())
    end_progress_line()
    ds = BrodenDataset.open(root)
    per_category = {c: sum(1 for lb in ds.labels.values() if lb.category == c) for c in ds.categories}
    summary = ", ".join(f"{c} {n}" for c, n in per_category.items() if n)
    print(f"{root}: {ds.n_images} images, {len(ds.labels)} concepts ({summary})")
    return 0
