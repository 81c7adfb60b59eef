"""Dissection engine: agreement with the mask reference, full width against a limited beam, how far each beam mode is
from the optimum, and a whole ADE20K-sized layer.

Three parts in one run, on synthetic Broden-like problems (label maps with ADE20K-like Zipf concept frequencies,
1,093 labels; units that answer planted formulas):

1. reference scale (--ref-images): the engine against the mask-based reference (every candidate formula evaluated as
   a full-dataset boolean mask, as the original code does) on --reference-units units, at full width, with the
   original code's beams (dedupe none) and with mask deduplication. The reference holds every concept's mask and
   scores every candidate by mask, so it only fits at a few hundred images: hence the small scale.
2. gap scale (--gap-images, --gap-units): each beam mode (limit 50 as the Detection Accuracy paper's code, every
   concept as Mu & Andreas's; each with and without mask deduplication) timed, and its answers compared with the
   optimal formula found by branch and bound (the optimality gap: optimal IoU minus the beam's).
3. full scale (--images, --units; default the ADE20K part of Broden, 22,210 images, and a 512-unit layer): the
   activations are written to a .npy and read memory-mapped, and a fresh process per mode runs the engine alone,
   at full width and at limit 50, reporting CPU seconds (user and system) and the peak memory the engine added.

Times are CPU seconds (time.process_time, getrusage) of single-threaded code (torch and BLAS threads = 1), so other
jobs on a shared machine do not distort them; run it with `nice`.

    python benchmarks/dissect_bench.py                                  # all three parts (about 40 CPU-minutes)
    python benchmarks/dissect_bench.py --images 2000 --units 64         # a small "full" scale (a few minutes)
    python benchmarks/dissect_bench.py --skip-full
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
    os.environ.setdefault(var, "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from probescope.core.dissection.engine import dissect  # noqa: E402
from probescope.core.dissection.labels import LabelStore  # noqa: E402
from probescope.core.dissection.optimal import search_space  # noqa: E402
from probescope.core.dissection.settings import DissectionSettings  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))  # the test oracles live with the tests
from oracles.mask_reference import MaskReference  # noqa: E402
from oracles.synthetic_broden import SyntheticBroden, SyntheticSpec, planted_formulas, synthetic_activations  # noqa: E402

MODES = {  # beam modes compared: (beam_limit, beam_dedupe)
    "limit 50, dedupe none (DA paper's code)": (50, "none"),
    "limit 50, dedupe mask": (50, "mask"),
    "all concepts, dedupe none (Mu & Andreas' code)": (0, "none"),
    "all concepts, dedupe mask": (0, "mask"),
}


def problem(images: int, units: int, seed: int) -> SyntheticBroden:
    return SyntheticBroden(SyntheticSpec(n_images=images, seg_size=112, feat_size=7, n_objects=518, n_parts=96,
                                         n_scenes=468, seed=seed))


def rss_mb() -> float:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


def peak_rss_mb() -> float:
    """This process's peak resident memory since it started (VmHWM: unlike getrusage's ru_maxrss, it does not carry
    over the RSS of the parent that forked it)."""
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmHWM")) / 1024


def cpu() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


def reference_part(a: argparse.Namespace) -> bool:
    ds = problem(a.ref_images, a.reference_units, a.seed)
    act = synthetic_activations(ds, planted_formulas(ds, a.reference_units, a.seed), noise=0.3, seed=a.seed)
    store = LabelStore.build(ds)
    ref = MaskReference(ds, a.min_samples, cache_masks=2048)
    print(f"\n1. reference scale: {a.ref_images} images 112x112, {a.reference_units} units, "
          f"{len(ref.concepts)} concepts (the mask reference holds every concept's mask: it fits at this scale, "
          f"not at ADE20K's)")
    ok = True
    for dedupe in ("none", "mask"):
        settings = DissectionSettings(beam_limit=0, beam_dedupe=dedupe, min_samples=a.min_samples)
        t0 = time.process_time()
        result = dissect(store, act, settings)
        t_engine = time.process_time() - t0
        t0 = time.process_time()
        same = 0
        for u in range(a.reference_units):
            threshold, mask = ref.unit_mask(act[:, u], settings.quantile)
            beams = ref.search(mask, settings.beam_size, 0, settings.max_length - 1, dedupe)
            r = result.units[u]
            agree = (threshold == r.threshold and all([(e.formula, e.iou, e.da) for e in r.trace[k]] == beams[k]
                                                      for k in range(settings.max_length)))
            same += agree
            if not agree:
                print(f"   MISMATCH unit {u}: engine {r.explanations['iou'].label}, reference "
                      f"{beams[-1][0][0].text(store.names)}")
        t_ref = time.process_time() - t0
        ok &= same == a.reference_units
        print(f"   full width, dedupe {dedupe}: {same}/{a.reference_units} units with identical beams, IoU and DA; "
              f"engine {1000 * t_engine / a.reference_units:.0f} ms/unit, reference {t_ref / a.reference_units:.1f} "
              f"s/unit: {t_ref / max(t_engine, 1e-9):.0f}x")
    return ok


def gap_part(a: argparse.Namespace) -> None:
    ds = problem(a.gap_images, a.gap_units, a.seed)
    act = synthetic_activations(ds, planted_formulas(ds, a.gap_units, a.seed), noise=0.3, seed=a.seed)
    store = LabelStore.build(ds)
    n_concepts = len(store.concepts(a.min_samples))
    print(f"\n2. gap scale: {a.gap_images} images, {a.gap_units} units, {n_concepts} concepts "
          f"({search_space(n_concepts, 3):.3g} formulas of up to 3 atoms)")
    t0 = time.process_time()
    optimal = dissect(store, act, DissectionSettings(beam_limit=0, searches=("iou", "optimal"),
                                                     min_samples=a.min_samples))
    t_opt = time.process_time() - t0
    best = {u: r.explanations["optimal"] for u, r in optimal.units.items()}
    evaluated = [r.optimal_evaluated for r in optimal.units.values()]
    print(f"   optimal (branch and bound): {t_opt / a.gap_units:.2f} s/unit including its beam search, "
          f"{np.mean(evaluated):,.0f} formulas scored per unit on average "
          f"({np.mean(evaluated) / search_space(n_concepts, 3):.2%} of brute force), mean IoU "
          f"{np.mean([e.iou for e in best.values() if e]):.4f}")
    times = {}
    for name, (limit, dedupe) in MODES.items():
        settings = DissectionSettings(beam_limit=limit, beam_dedupe=dedupe, min_samples=a.min_samples)
        t0 = time.process_time()
        result = dissect(store, act, settings)
        times[name] = time.process_time() - t0
        gaps = np.array([best[u].iou - r.explanations["iou"].iou for u, r in result.units.items() if best[u]])
        ious = [r.explanations["iou"].iou for r in result.units.values() if r.explanations["iou"]]
        print(f"   {name:48s} {1000 * times[name] / a.gap_units:6.1f} ms/unit, mean IoU {np.mean(ious):.4f}, "
              f"gap mean {gaps.mean():.4f} max {gaps.max():.4f}, optimum missed on {int((gaps > 0).sum())}/"
              f"{len(gaps)} units")
    full, limited = times["all concepts, dedupe mask"], times["limit 50, dedupe mask"]
    print(f"   full width / limit 50 time (dedupe mask): {full / limited:.2f}")


def full_part(a: argparse.Namespace) -> None:
    ds = problem(a.images, a.units, a.seed)
    with tempfile.TemporaryDirectory(dir=a.tmp) as tmp:
        path = Path(tmp) / "act.npy"
        t0 = time.process_time()
        out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(a.images, a.units, 7, 7))
        synthetic_activations(ds, planted_formulas(ds, a.units, a.seed), noise=0.3, seed=a.seed, out=out)
        out.flush()
        del out
        print(f"\n3. full scale: {a.images} images 112x112, {a.units} units 7x7 (activations "
              f"{path.stat().st_size / 2**30:.2f} GiB, generated in {time.process_time() - t0:.0f} s, read "
              f"memory-mapped by a fresh process)")
        runs = {}
        for name, limit in (("full", 0), ("limit50", 50)):  # each alone in a fresh process
            run = subprocess.run([sys.executable, __file__, "--child", str(path), "--images", str(a.images),
                                  "--units", str(a.units), "--seed", str(a.seed), "--min-samples", str(a.min_samples),
                                  "--child-limit", str(limit)], capture_output=True, text=True)
            if run.returncode:
                print(run.stderr)
                raise SystemExit(run.returncode)
            runs[name] = json.loads(run.stdout.strip().splitlines()[-1])
    m = runs["full"]
    print(f"   label store: {m['store_s']:.0f} CPU s (includes generating the label maps), {m['store_mb']:.0f} MiB, "
          f"{m['regions']:,} regions, {m['concepts']} concepts")
    for name, r in runs.items():
        total = r["process_user_s"] + r["process_sys_s"]
        print(f"   engine, {'all concepts' if name == 'full' else 'limit 50'} (dedupe mask): {r['cpu_s']:.0f} CPU s "
              f"({r['user_s']:.0f} user + {r['sys_s']:.0f} system), {1000 * r['cpu_s'] / a.units:.0f} ms/unit, "
              f"mean IoU {r['mean_iou']:.4f}\n      its process: {total:.0f} CPU s, {r['process_sys_s'] / total:.1%} "
              f"system time; RSS {r['rss_before_mb']:.0f} MiB before the label store and the engine (imports, "
              f"the memory-mapped activations opened), peak {r['peak_mb']:.0f} MiB: they added at most "
              f"{r['peak_mb'] - r['rss_before_mb']:.0f} MiB")
    print(f"   full width / limit 50 time: {runs['full']['cpu_s'] / runs['limit50']['cpu_s']:.2f}")


def child(a: argparse.Namespace) -> None:
    """One full-scale run alone in this process: the label store, then the engine with --child-limit."""
    torch.set_num_threads(1)
    act = np.load(a.child, mmap_mode="r")
    rss_before = rss_mb()
    t0 = time.process_time()
    store = LabelStore.build(problem(a.images, a.units, a.seed))
    out = {"store_s": time.process_time() - t0, "store_mb": store.nbytes / 2**20, "regions": store.n_regions,
           "concepts": len(store.concepts(a.min_samples)), "rss_before_mb": rss_before}
    u0, s0 = cpu()
    result = dissect(store, act, DissectionSettings(beam_limit=a.child_limit, min_samples=a.min_samples))
    u1, s1 = cpu()
    ious = [r.explanations["iou"].iou for r in result.units.values() if r.explanations["iou"]]
    out.update(cpu_s=u1 - u0 + s1 - s0, user_s=u1 - u0, sys_s=s1 - s0, mean_iou=float(np.mean(ious)),
               process_user_s=u1, process_sys_s=s1, peak_mb=peak_rss_mb())
    print(json.dumps(out))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--images", type=int, default=22210, help="full scale images (ADE20K: 22,210)")
    p.add_argument("--units", type=int, default=512, help="full scale units (ResNet-18 layer4: 512)")
    p.add_argument("--ref-images", type=int, default=150)
    p.add_argument("--reference-units", type=int, default=3, help="units the reference also runs (slow)")
    p.add_argument("--gap-images", type=int, default=2000)
    p.add_argument("--gap-units", type=int, default=32)
    p.add_argument("--min-samples", type=int, default=5)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--skip-reference", action="store_true")
    p.add_argument("--skip-gap", action="store_true")
    p.add_argument("--skip-full", action="store_true")
    p.add_argument("--tmp", help="folder for the full scale's activations file (default: the system's)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--child-limit", type=int, default=0, help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    if a.child:
        child(a)
        return 0
    ok = True
    if not a.skip_reference:
        ok = reference_part(a)
    if not a.skip_gap:
        gap_part(a)
    if not a.skip_full:
        full_part(a)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
