"""How the activation cache should be laid out on disk, measured on a real cached layer (the scale drill's ResNet-18
layer3: 22,210 images x 256 units x 14 x 14, 4.4 GB as float32).

Three candidates, read the ways the app reads them:
- image-major float32 (images, units, h, w): what extraction writes batch by batch (the current cache);
- unit-major float32 (units, images, h, w): each unit's values contiguous (a transposed copy);
- image-major float16: half the bytes, but the values change (rounded to 11 significant bits).
Reads: the dissection engine's blocks of units (256 MB at a time), each unit's exact threshold, the GUI's per-image
peaks of every unit (the whole file), and one unit's top-k images (the overlays). Each read is timed warm (file in the
page cache) and cold (the file's pages dropped with posix_fadvise(DONTNEED) first: what a machine with less free
memory than the cache, or a first read after a reboot, sees). For float16, the thresholds and unit masks it would give
are compared with float32's on a sample of units.

    python benchmarks/activation_layout.py CACHE.npy [--units 16] [--scratch DIR]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np


def drop(path: Path) -> None:
    """Drop the file's pages from the page cache (clean pages only: written files are flushed first)."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def timed(fn) -> tuple[float, float]:
    t, c = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - t, time.process_time() - c


def engine_blocks(act: np.ndarray, unit_axis: int, units: int) -> None:
    """The engine's read: blocks of units, 256 MB each, as float32 (images, block, h, w)."""
    n = act.shape[1 - unit_axis]
    per_unit = n * act.shape[2] * act.shape[3] * 4
    step = max(1, (256 << 20) // per_unit)
    for lo in range(0, units, step):
        block = act[:, lo:lo + step] if unit_axis == 1 else np.moveaxis(act[lo:lo + step], 0, 1)
        np.asarray(block, dtype=np.float32).sum()


def peaks(act: np.ndarray, unit_axis: int) -> None:
    if unit_axis == 1:
        for lo in range(0, act.shape[0], 256):
            np.asarray(act[lo:lo + 256]).reshape(min(256, act.shape[0] - lo), act.shape[1], -1).max(2)
    else:
        for u in range(act.shape[0]):
            np.asarray(act[u]).reshape(act.shape[1], -1).max(1)


def top_images(act: np.ndarray, unit_axis: int, unit: int, images: np.ndarray) -> None:
    for i in images:
        np.asarray(act[i, unit] if unit_axis == 1 else act[unit, i]).max()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("cache", type=Path)
    parser.add_argument("--units", type=int, default=16, help="units compared for float16 thresholds and masks")
    parser.add_argument("--scratch", type=Path, help="folder for the transposed and float16 copies (default: beside)")
    args = parser.parse_args()
    src = np.load(args.cache, mmap_mode="r")
    n, u, h, w = src.shape
    scratch = args.scratch or args.cache.parent
    unit_major = scratch / "layout_unit_major.npy"
    half = scratch / "layout_float16.npy"
    if not unit_major.exists():
        out = np.lib.format.open_memmap(unit_major, mode="w+", dtype=np.float32, shape=(u, n, h, w))
        for lo in range(0, u, 16):
            out[lo:lo + 16] = np.moveaxis(np.asarray(src[:, lo:lo + 16]), 1, 0)
        out.flush()
        del out
    if not half.exists():
        out = np.lib.format.open_memmap(half, mode="w+", dtype=np.float16, shape=src.shape)
        for lo in range(0, n, 512):
            out[lo:lo + 512] = src[lo:lo + 512]
        out.flush()
        del out
    layouts = {"image-major float32": (args.cache, 1), "unit-major float32": (unit_major, 0),
               "image-major float16": (half, 1)}
    rng = np.random.default_rng(0)
    top = np.sort(rng.choice(n, 24, replace=False))
    print(f"{args.cache.name}: {n} images x {u} units x {h}x{w}")
    for name, (path, axis) in layouts.items():
        size = path.stat().st_size / 2**30
        cells = []
        for what, fn in (("engine blocks (all units)", lambda a, x=axis: engine_blocks(a, x, u)),
                         ("per-image peaks", lambda a, x=axis: peaks(a, x)),
                         ("top 24 images of a unit", lambda a, x=axis: top_images(a, x, 7, top))):
            drop(path)  # (a page still mapped by this process would stay: every read maps the file afresh)
            cold = timed(lambda f=fn, p=path: f(np.load(p, mmap_mode="r")))
            warm = timed(lambda f=fn, p=path: f(np.load(p, mmap_mode="r")))
            cells.append(f"{what}: cold {cold[0]:.1f} s ({cold[1]:.1f} s CPU), warm {warm[0]:.2f} s")
        print(f"{name} ({size:.2f} GiB): " + "; ".join(cells))
    from probescope.core.dissection.unitmasks import unit_thresholds, upsample

    full = np.load(args.cache, mmap_mode="r")
    halved = np.load(half, mmap_mode="r")
    units = np.sort(rng.choice(u, min(args.units, u), replace=False))
    t32 = unit_thresholds(full[:, units], 0.005)
    t16 = unit_thresholds(np.asarray(halved[:, units], dtype=np.float32), 0.005)
    changed, total = 0, 0
    for j, unit in enumerate(units):
        for lo in range(0, n, 1024):
            a = upsample(np.asarray(full[lo:lo + 1024, unit]), (112, 112))  # the ADE20K segmentation size
            b = upsample(np.asarray(halved[lo:lo + 1024, unit], dtype=np.float32), (112, 112))
            ma, mb = (a >= t32[j]).numpy(), (b >= t16[j]).numpy()
            changed += int((ma != mb).sum())
            total += int(ma.sum())
    rel = np.abs(t16 - t32) / np.abs(t32)
    print(f"float16 vs float32 on {len(units)} units: thresholds differ by {np.median(rel):.2e} (median relative), "
          f"max {rel.max():.2e}; unit-mask pixels that change: {changed} of {total} mask pixels "
          f"({changed / max(total, 1):.3%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
