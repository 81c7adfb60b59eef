"""What the activation cache's integrity costs: the per-block CRC-32 computed while the cache is written, and the
check (CRC-32 and finiteness of every block) before a cached array is used, against reading the array once, which
every consumer of a cache does anyway (the dissection engine reads every unit, the GUI every image's peak).

    python benchmarks/cache_bench.py                 # a 256 MiB cache
    python benchmarks/cache_bench.py --mib 1024

Times are wall seconds with the file in the page cache (written just before), the case where the check's cost shows
most; from a cold disk the read dominates both sides.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np
import torch
from torch import nn

from probescope.core.data.activation_cache import BlockChecksums, cache_path
from probescope.core.data.activations import extract_activations
from probescope.core.data.preprocess import CLASSIC
from probescope.core.models.loading import LoadedModel


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mib", type=int, default=256, help="cache size in MiB (default 256)")
    args = parser.parse_args()
    side, channels = 64, 64
    n = max(1, args.mib * 2**20 // (side * side * channels * 4))
    torch.manual_seed(0)
    model = LoadedModel(nn.Sequential(nn.Conv2d(3, channels, 1)).eval(), "conv", "test", CLASSIC, None,
                        (side, side), None, "bench", None)
    images = np.random.default_rng(0).integers(0, 256, (n, side, side, 3), dtype=np.uint8)
    with tempfile.TemporaryDirectory() as tmp:
        cache = Path(tmp)
        start = time.perf_counter()
        extract_activations(model, "0", images, cache, batch_size=32)
        written = time.perf_counter() - start
        path = cache_path(model, "0", images, cache)
        array = np.load(path, mmap_mode="r")
        size = path.stat().st_size

        start = time.perf_counter()
        sums = BlockChecksums(array[0].nbytes)
        for first in range(0, n, 32):
            sums.add(first, array[first:first + 32])
        crc_cost = time.perf_counter() - start

        start = time.perf_counter()
        plain = float(np.asarray(array).sum(dtype=np.float64))  # reading it all once, as a consumer does
        read = time.perf_counter() - start

        start = time.perf_counter()
        checked = extract_activations(model, "0", images, cache)  # the sidecar matches: the check, then the memmap
        check = time.perf_counter() - start
        assert float(np.asarray(checked).sum(dtype=np.float64)) == plain
    print(f"cache: {n} images x {channels} units x {side}x{side} = {size / 2**20:.0f} MiB")
    print(f"write (extraction included): {written:.2f} s, of which the block checksums {crc_cost:.2f} s "
          f"({crc_cost / written:.1%})")
    print(f"read once: {read:.3f} s ({size / 2**30 / read:.2f} GiB/s); check before use: {check:.3f} s "
          f"({size / 2**30 / check:.2f} GiB/s); check / read = {check / read:.2f}x")


if __name__ == "__main__":
    main()
