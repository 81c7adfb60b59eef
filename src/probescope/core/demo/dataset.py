"""The demo world's probing dataset: a Broden-format folder generated deterministically from the scene renderer.

It is written once into the user's cache folder and regenerated when missing or damaged (a manifest written last
records what a complete dataset holds); `probescope demo-data DIR` writes it anywhere.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from probescope.core.atomic import write_json
from probescope.core.cache import cache_dir, ensure_writable
from probescope.core.data import broden
from probescope.core.data.broden_write import BrodenImage, write_broden
from probescope.core.demo import world
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report

DEFAULT_N = 1500
DEFAULT_SEED = 0
VAL_SHARE = 0.2
GENERATOR_VERSION = 1  # bump when the renderer changes, so cached copies are regenerated
MANIFEST = "demo_manifest.json"


def _items(n_images: int, seed: int, progress: ProgressCallback | None,
           cancel: CancelCheck | None) -> Iterator[BrodenImage]:
    rng = np.random.default_rng(seed)
    n_val = int(round(n_images * VAL_SHARE))
    for k in range(n_images):
        scene = world.SCENES[k % len(world.SCENES)]  # balanced classes
        sample = world.render_sample(rng, scene)
        parts = [sample.layers["part_1"], sample.layers["part_2"]]
        yield BrodenImage(
            name=f"demo/{k:06d}",
            image=sample.image,
            layers={"color": [sample.layers["color"]], "object": [sample.layers["object"]], "part": parts},
            image_labels={"scene": [world.label_number(scene)]},
            split="val" if k >= n_images - n_val else "train",
        )
        if k % 50 == 0:
            check_cancel(cancel)
            report(progress, k / n_images, f"rendering demo image {k} of {n_images}")


def write_demo_dataset(root: str | Path, n_images: int = DEFAULT_N, seed: int = DEFAULT_SEED,
                       progress: ProgressCallback | None = None, cancel: CancelCheck | None = None) -> Path:
    """Write the demo probing dataset into `root` (created; files already there are overwritten).

    A cancelled run raises `Cancelled` before the manifest is written, so what it left is never taken as complete.
    """
    root = ensure_writable(Path(root))
    labels = [broden.Label(lb.number, lb.name, lb.category) for lb in world.LABELS]
    write_broden(root, _items(n_images, seed, progress, cancel), labels)
    manifest = {"generator_version": GENERATOR_VERSION, "n_images": n_images, "seed": seed,
                "index_sha256": _sha256(root / "index.csv"), "label_sha256": _sha256(root / "label.csv")}
    write_json(root / MANIFEST, manifest)
    report(progress, 1.0, f"demo dataset written to {root}")
    return root


def is_complete(root: Path, n_images: int = DEFAULT_N, seed: int = DEFAULT_SEED) -> bool:
    """True when `root` holds an undamaged demo dataset of this generator version, size and seed."""
    try:
        manifest = json.loads((root / MANIFEST).read_text())
        if (manifest.get("generator_version"), manifest.get("n_images"), manifest.get("seed")) != (
                GENERATOR_VERSION, n_images, seed):
            return False
        if manifest["index_sha256"] != _sha256(root / "index.csv") or \
                manifest["label_sha256"] != _sha256(root / "label.csv"):
            return False
        ds = broden.BrodenDataset.open(root)
        return ds.n_images == n_images and all(ds.image_path(i).is_file() for i in (0, n_images - 1))
    except (OSError, ValueError, KeyError, broden.InputError):
        return False


def ensure_demo_dataset(cache: Path | None = None, n_images: int = DEFAULT_N, seed: int = DEFAULT_SEED,
                        progress: ProgressCallback | None = None, cancel: CancelCheck | None = None) -> Path:
    """The demo dataset in the cache folder, generated first if missing or damaged."""
    root = (cache or cache_dir()) / f"demo-broden-v{GENERATOR_VERSION}-{n_images}-{seed}"
    if is_complete(root, n_images, seed):
        return root
    staging = root.with_name(root.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    write_demo_dataset(staging, n_images, seed, progress, cancel)
    shutil.rmtree(root, ignore_errors=True)
    staging.rename(root)
    return root


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
