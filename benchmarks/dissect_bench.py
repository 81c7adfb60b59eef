"""Dissection engine vs the straightforward mask-based reference, on a synthetic Broden-like problem.

Builds a synthetic problem at the chosen scale (label maps with ADE20K-like Zipf concept frequencies; units that
answer planted formulas), runs the engine on every unit and the reference on `--reference-units` of them in the same
run, checks that both find the same beams, explanations and scores, and prints times, the speed ratio and memory.

    python benchmarks/dissect_bench.py                       # about a minute on one core
    python benchmarks/dissect_bench.py --images 2000 --units 64 --reference-units 2

Both sides run single-threaded (torch and BLAS threads = 1), so the ratio compares algorithms, not cores. Times are
CPU seconds of this process (time.process_time), so other jobs on a shared machine do not distort them.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from probescope.core.dissection.counts import DatasetCounts  # noqa: E402
from probescope.core.dissection.engine import dissect_unit  # noqa: E402
from probescope.core.dissection.formula import Formula  # noqa: E402
from probescope.core.dissection.labels import LabelStore  # noqa: E402
from probescope.core.dissection.settings import DissectionSettings  # noqa: E402
from probescope.core.dissection.unitmasks import unit_pixels, unit_thresholds  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test oracles live with the tests
from oracles.mask_reference import MaskReference  # noqa: E402
from oracles.synthetic_broden import SyntheticBroden, SyntheticSpec, planted_formulas, synthetic_activations  # noqa: E402


def peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=300)
    p.add_argument("--seg", type=int, default=112, help="segmentation size (ADE20K: 112)")
    p.add_argument("--feat", type=int, default=7, help="feature-map size (ResNet-18 layer4 at 224: 7)")
    p.add_argument("--objects", type=int, default=518)
    p.add_argument("--parts", type=int, default=96)
    p.add_argument("--scenes", type=int, default=468)
    p.add_argument("--units", type=int, default=32)
    p.add_argument("--reference-units", type=int, default=3, help="units the reference also runs (slow)")
    p.add_argument("--beam-size", type=int, default=5)
    p.add_argument("--beam-limit", type=int, default=50)
    p.add_argument("--max-length", type=int, default=3)
    p.add_argument("--min-samples", type=int, default=5)
    p.add_argument("--sweep-length", type=int, default=0, help="also run the length sweep (engine only)")
    p.add_argument("--cache-mb", type=int, default=1024, help="engine's formula pixel-set cache")
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    torch.set_num_threads(1)

    spec = SyntheticSpec(n_images=a.images, seg_size=a.seg, feat_size=a.feat, n_objects=a.objects,
                         n_parts=a.parts, n_scenes=a.scenes, seed=a.seed)
    ds = SyntheticBroden(spec)
    t0 = time.process_time()
    act = synthetic_activations(ds, planted_formulas(ds, a.units, a.seed), noise=0.3, seed=a.seed)
    t_act = time.process_time() - t0
    print(f"problem: {a.images} images {a.seg}x{a.seg}, {len(ds.labels)} labels, {a.units} units "
          f"{a.feat}x{a.feat}, max length {a.max_length}, beam {a.beam_size}, limit {a.beam_limit}")
    print(f"  synthetic activations generated in {t_act:.1f} s")

    rss_before = rss_mb()
    t0 = time.process_time()
    store = LabelStore.build(ds)
    t_store = time.process_time() - t0
    concepts = store.concepts(a.min_samples)
    print(f"engine: label store {t_store:.2f} s (includes generating the maps), {store.nbytes / 2**20:.1f} MiB, "
          f"{store.n_regions} regions ({store.n_regions / store.n_images:.0f} per image), "
          f"{len(concepts)} concepts kept")

    settings = DissectionSettings(beam_size=a.beam_size, beam_limit=a.beam_limit, max_length=a.max_length,
                                  min_samples=a.min_samples, sweep_length=a.sweep_length, cache_mb=a.cache_mb)
    counts = DatasetCounts(store, settings.cache_bytes)
    t0 = time.process_time()
    counts.cooc(Formula.atom(int(concepts[0])))  # builds the label co-occurrence matrix, once per dataset
    t_cooc = time.process_time() - t0
    t0 = time.process_time()
    thresholds = unit_thresholds(act, settings.quantile)
    t_masks = time.process_time() - t0
    t_search = 0.0
    results, mask_sizes = [], []
    for u in range(a.units):  # as the engine does it: one unit's mask at a time
        t0 = time.process_time()
        mask = unit_pixels(act[:, u], float(thresholds[u]), store.offsets, store.seg_shapes)
        t1 = time.process_time()
        results.append(dissect_unit(counts, concepts, u, float(thresholds[u]), mask, settings, store.names))
        t_masks += t1 - t0
        t_search += time.process_time() - t1
        mask_sizes.append(len(mask))
    rss_engine = peak_rss_mb()
    n_ref = min(a.reference_units, a.units)

    per_unit_engine = t_search / a.units
    print(f"  label co-occurrence matrix (once per dataset) {t_cooc:.2f} s")
    print(f"  thresholds + masks {t_masks:.2f} s ({1000 * t_masks / a.units:.1f} ms/unit); "
          f"beam search {t_search:.2f} s ({1000 * per_unit_engine:.1f} ms/unit; "
          f"{counts.cached_formulas} distinct formulas cached)")
    print(f"  mean mask share {np.mean(mask_sizes) / store.n_pixels:.4f}")

    print(f"memory: RSS {rss_before:.0f} MiB before the engine (imports, activations {act.nbytes / 2**20:.0f} MiB), "
          f"peak RSS {rss_engine:.0f} MiB by its end: the engine added at most {rss_engine - rss_before:.0f} MiB")
    agree = 0
    if n_ref:
        t0 = time.process_time()
        ref = MaskReference(ds, a.min_samples, cache_masks=64)
        t_ref_setup = time.process_time() - t0
        t_ref_masks = t_ref_search = 0.0
        for u in range(n_ref):
            t0 = time.process_time()
            threshold, mask = ref.unit_mask(act[:, u], settings.quantile)
            t_ref_masks += time.process_time() - t0
            t0 = time.process_time()
            beams = ref.search(mask, a.beam_size, a.beam_limit, a.max_length - 1)
            t_ref_search += time.process_time() - t0
            r = results[u]
            same = (threshold == r.threshold and int(mask.sum()) == r.mask_pixels
                    and all([(e.formula, e.iou, e.da) for e in r.trace[k]] == beams[k] for k in range(a.max_length)))
            agree += same
            if not same:
                print(f"  MISMATCH unit {u}: engine {r.explanations['iou'].label} vs reference "
                      f"{beams[-1][0][0].text(store.names)}")
        per_unit_ref = t_ref_search / n_ref
        print(f"reference: setup {t_ref_setup:.2f} s, masks {1000 * t_ref_masks / n_ref:.0f} ms/unit, "
              f"beam search {per_unit_ref:.2f} s/unit over {n_ref} units")
        print(f"agreement: {agree}/{n_ref} units identical (beams, IoU, DA, explanations)")
        print(f"speed ratio, beam search per unit: {per_unit_ref / per_unit_engine:.0f}x")
        print(f"speed ratio, masks + search per unit: "
              f"{(t_ref_masks + t_ref_search) / n_ref / ((t_masks + t_search) / a.units):.0f}x")
        print(f"peak RSS after the reference: {peak_rss_mb():.0f} MiB")
    for r in results[: min(8, a.units)]:
        e = r.explanations["iou"]
        print(f"  unit {r.unit}: {e.label}  IoU {e.iou:.3f} DA {e.da:.3f}")
    return 0 if agree == n_ref else 1


if __name__ == "__main__":
    sys.exit(main())
