"""The demo world's probing dataset: a Broden-format folder generated deterministically from the scene renderer.

It is written once into the user's cache folder and regenerated when missing or damaged (a manifest written last
records what a complete dataset holds); `probescope demo-data DIR` writes it anywhere.

In the cache it is generated in stages (`demo_dataset_stages`), so a fresh install shows results within seconds:
once its first FIRST_BATCH images are written, `index_first150.csv` lists them with label tables of their own, a
complete dataset of its own that the window dissects and shows while the rest render; the whole dataset follows.
The files are written without a sync each (one sync before the manifest: on a shared disk the per-file syncs took
24 of the 30 s), in place: until its manifest is written the folder is not taken as complete.
"""

from __future__ import annotations

import hashlib
import json
import queue
import shutil
import subprocess
import sys
import threading
import traceback
from collections.abc import Iterable, Iterator
from pathlib import Path

import numpy as np

import probescope
from probescope.core.atomic import sync_files, write_json
from probescope.core.cache import cache_dir, ensure_writable
from probescope.core.data import broden
from probescope.core.data.broden_write import BrodenImage, WrittenImage, write_image, write_tables
from probescope.core.demo import world
from probescope.core.errors import InputError
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report

DEFAULT_N = 1500
DEFAULT_SEED = 0
VAL_SHARE = 0.2
GENERATOR_VERSION = 1  # bump when the renderer changes, so cached copies are regenerated
MANIFEST = "demo_manifest.json"
# images of the first stage of a generation in the cache: rendered, extracted and labelled in about 2 s of CPU; at
# 300 the first units took 15 s beside two CPU-bound processes (issue 45, benchmarks/gui_bench.py --fresh --load 2)
FIRST_BATCH = 150


def first_index(n_first: int) -> str:
    """The index file of the first stage: the first `n_first` rows of index.csv."""
    return f"index_first{n_first}.csv"


def _rendered(n_images: int, seed: int, progress: ProgressCallback | None,
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
    _finish(root, [write_image(root, item) for item in _rendered(n_images, seed, progress, cancel)], seed, progress)
    return root


def _labels() -> list[broden.Label]:
    return [broden.Label(lb.number, lb.name, lb.category) for lb in world.LABELS]


def _finish(root: Path, written: list[WrittenImage], seed: int, progress: ProgressCallback | None) -> None:
    """The tables, then the manifest that makes the folder a complete dataset."""
    write_tables(root, written, _labels())
    manifest = {"generator_version": GENERATOR_VERSION, "n_images": len(written), "seed": seed,
                "index_sha256": _sha256(root / "index.csv"), "label_sha256": _sha256(root / "label.csv")}
    write_json(root / MANIFEST, manifest)
    report(progress, 1.0, f"demo dataset written to {root}")


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
    *_, index = demo_dataset_stages(cache, n_images, seed, progress, cancel)
    return index.parent


def demo_dataset_stages(cache: Path | None = None, n_images: int = DEFAULT_N, seed: int = DEFAULT_SEED,
                        progress: ProgressCallback | None = None, cancel: CancelCheck | None = None,
                        first_batch: int = FIRST_BATCH, in_child: bool = False) -> Iterator[Path]:
    """The index files of the demo dataset in the cache folder, generated first if missing or damaged.

    When it is generated with more than `first_batch` images, the first stage's index comes as soon as those are
    written: a dataset of its own in the same folder (the first rows of index.csv, their files and splits; label
    tables of those images, replaced by the whole dataset's at the end). The whole dataset's index.csv comes last.
    `in_child` renders in a child process: the renderer is Python-bound, and in the window it would share one
    interpreter lock with every other task of the launch (and one core, of two).
    """
    root = (cache or cache_dir()) / f"demo-broden-v{GENERATOR_VERSION}-{n_images}-{seed}"
    if not is_complete(root, n_images, seed):
        generate = _generate_in_child if in_child else _generate
        yield from generate(root, n_images, seed, first_batch, progress, cancel)
    yield root / "index.csv"


def _generate(root: Path, n_images: int, seed: int, first_batch: int, progress: ProgressCallback | None,
              cancel: CancelCheck | None) -> Iterator[Path]:
    """Write the dataset into `root` (what was there is removed first); yields the first stage's index."""
    shutil.rmtree(root, ignore_errors=True)
    ensure_writable(root)
    written: list[WrittenImage] = []
    for item in _rendered(n_images, seed, progress, cancel):
        written.append(write_image(root, item, atomic=False))
        if len(written) == first_batch < n_images:
            write_tables(root, written, _labels(), index=first_index(first_batch))
            yield root / first_index(first_batch)
    sync_files(_files(root, written))
    _finish(root, written, seed, progress)


def _generate_in_child(root: Path, n_images: int, seed: int, first_batch: int, progress: ProgressCallback | None,
                       cancel: CancelCheck | None) -> Iterator[Path]:
    """`_generate` in a child interpreter that reports on its stdout, one JSON line per event; cancelling (or closing
    this generator) ends it. Where no interpreter can be started (a frozen bundle), it generates here."""
    try:
        if getattr(sys, "frozen", False):
            raise OSError("a frozen bundle")
        child = subprocess.Popen([sys.executable, "-c", _CHILD, str(Path(probescope.__file__).parents[1]), str(root),
                                  str(n_images), str(seed), str(first_batch)],
                                 stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True)
    except OSError:
        yield from _generate(root, n_images, seed, first_batch, progress, cancel)
        return
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:  # a thread, so the cancel flag is checked while the child says nothing
        for line in child.stdout:
            lines.put(line)

    reader = threading.Thread(target=read, daemon=True, name="probescope-demo-data-reader")
    reader.start()
    try:
        while True:
            check_cancel(cancel)
            try:
                event = json.loads(lines.get(timeout=0.05))
            except queue.Empty:
                if child.poll() is not None and not reader.is_alive() and lines.empty():
                    raise RuntimeError(f"the process writing the demo dataset ended early (exit code "
                                       f"{child.returncode})") from None
                continue
            kind, value = event["kind"], event.get("value")
            if kind == "progress":
                report(progress, *value)
            elif kind == "stage":
                yield Path(value)
            elif kind == "done":
                return
            elif kind == "input-error":
                raise InputError(*value)
            else:
                raise RuntimeError(f"writing the demo dataset failed in its process:\n{value}")
    finally:
        if child.poll() is None:
            child.kill()
        child.wait()
        reader.join()  # the pipe ends with the child
        child.stdout.close()


# The child imports the probescope of its parent (argv[1]: the folder holding it, put first unless on the path).
_CHILD = ("import sys; sys.argv[1] in sys.path or sys.path.insert(0, sys.argv[1]); "
          "from probescope.core.demo.dataset import child_main; child_main()")


def child_main() -> None:
    """The child process of `_generate_in_child` (argv after the package folder: root, images, seed, first batch):
    `_generate`, its progress, stages, end or failure written to stdout."""
    root, n_images, seed, first_batch = Path(sys.argv[2]), *map(int, sys.argv[3:6])

    def send(kind: str, value=None) -> None:
        print(json.dumps({"kind": kind, "value": value}), flush=True)

    try:
        for index in _generate(root, n_images, seed, first_batch, lambda f, m: send("progress", [f, m]), None):
            send("stage", str(index))
        send("done")
    except InputError as exc:
        message = str(exc).removeprefix(f"{exc.path}: ") if exc.path is not None else str(exc)
        send("input-error", [message, None if exc.path is None else str(exc.path)])
    except Exception:  # noqa: BLE001  (a bug in the child is reported to the parent with its traceback)
        send("error", traceback.format_exc())


def _files(root: Path, written: Iterable[WrittenImage]) -> Iterator[Path]:
    return (root / "images" / name for image in written for name in image.files())


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()
