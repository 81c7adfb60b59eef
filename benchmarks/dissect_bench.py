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

4. unit kinds (--kinds-images, --kinds-units of each kind): the CPU time a unit costs by kind, sparse (planted
   formulas, masks of a few per mille), broad (T at a tie at their maximum: masks over half the pixels) and dead
   (ReLU units almost always 0: T = 0, the mask is every pixel), for the IoU search, with da-select, with da-stop,
   with the sweep to 10 atoms and with the window's defaults (all of them), by the engine as it is ("after") and as
   it was at --before (a git revision, extracted with `git archive`: the engine before it counted broad masks
   through their complement and ran on several processes), each in a fresh process.
5. whole layer (--layer-activations ACT.npy --layer-dataset BRODEN, e.g. the scale drill's random-weight ResNet-18
   layer4 from its activation cache; else a synthetic layer of --layer-units units, a quarter broad and a quarter
   dead): the window's defaults through the dissect-and-save driver, after with 1 and 2 processes, before with 1
   (on every --before-every-th unit, scaled up, as the old engine takes over an hour on the drill's layer): wall and
   CPU seconds of all processes, per-unit CPU of the units whose T sits at a tie against the others, and the peak
   memory of every process (the workers' peak RSS counts the pages they share, their private memory what they add).

Times are CPU seconds (time.process_time, getrusage) of single-threaded code (torch and BLAS threads = 1), so other
jobs on a shared machine do not distort them; run it with `nice`. Wall times are given for the whole layer, where
processes run side by side: on a shared machine they are noisy.

    python benchmarks/dissect_bench.py                                  # all five parts (over an hour)
    python benchmarks/dissect_bench.py --images 2000 --units 64         # a small "full" scale (a few minutes)
    python benchmarks/dissect_bench.py --skip-reference --skip-gap --skip-full      # parts 4 and 5 only
    python benchmarks/dissect_bench.py --only-layer --layer-activations DRILL/cache/activations/<key>.npy \
        --layer-dataset DRILL/broden                                    # the drill's layer4, before and after
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
from oracles.processes import children_of  # noqa: E402
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


# ------------------------------------------------------------------------------ parts 4 and 5: before and after
BASELINE = "75344cc"  # main before issue 27: one process, every count through the mask
WINDOW = {"searches": ["iou", "da-select", "da-stop"], "sweep_length": 10}  # the window's defaults
SEARCH_COSTS = {  # what each search adds, and the window's defaults (all of them share one sequence of beams)
    "IoU search (length 3)": {},
    "+ da-select": {"searches": ["iou", "da-select"]},
    "+ da-stop": {"searches": ["iou", "da-stop"]},
    "+ sweep to 10": {"sweep_length": 10},
    "window's defaults": WINDOW,
}
KINDS = ("sparse", "broad", "dead")


def kinds_activations(ds: SyntheticBroden, per_kind: int, seed: int, out: np.ndarray) -> None:
    """Units in KINDS order, `per_kind` of each, written into `out` (images, 3 * per_kind, 7, 7)."""
    n = ds.n_images
    planted = synthetic_activations(ds, planted_formulas(ds, per_kind, seed), noise=0.3, seed=seed)
    out[:, :per_kind] = planted
    out[:, per_kind:2 * per_kind] = np.minimum(1.0, 1.6 - planted)  # saturated at 1 away from the concepts
    rng = np.random.default_rng([seed, 5])
    fires = rng.random((n, per_kind, 7, 7)) < 0.002  # ReLU units firing on 0.2% of positions: T = 0
    dead = np.zeros((n, per_kind, 7, 7), np.float32)
    dead[fires] = rng.random(int(fires.sum())).astype(np.float32)
    out[:, 2 * per_kind:] = dead


def git_code(rev: str, into: Path) -> Path | None:
    """The package as it was at `rev` (git archive of src/), for the 'before' runs; None without git history."""
    repo = Path(__file__).resolve().parents[1]
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev, "src/probescope"], capture_output=True)
    if archive.returncode:
        print(f"   (no 'before': git archive {rev} failed: {archive.stderr.decode().strip()})")
        return None
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"


def run_child(code: Path, task: dict) -> dict:
    """This script's --child-task in a fresh process importing the package from `code`."""
    env = dict(os.environ, PYTHONPATH=str(code))
    run = subprocess.run([sys.executable, __file__, "--child-task", json.dumps(task)], capture_output=True, text=True,
                         env=env)
    if run.returncode:
        print(run.stderr[-3000:])
        raise SystemExit(run.returncode)
    return json.loads(run.stdout.strip().splitlines()[-1])


def kinds_part(a: argparse.Namespace, before: Path | None, after: Path) -> None:
    with tempfile.TemporaryDirectory(dir=a.tmp) as tmp:
        ds = problem(a.kinds_images, 0, a.seed)
        path = Path(tmp) / "kinds.npy"
        act = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32,
                                        shape=(a.kinds_images, 3 * a.kinds_units, 7, 7))
        kinds_activations(ds, a.kinds_units, a.seed, act)
        act.flush()
        del act
        print(f"\n4. unit kinds: {a.kinds_images} images 112x112, {len(ds.labels)} labels, {a.kinds_units} units of "
              f"each kind; CPU seconds a unit (the mean of a run over the kind's units, one process, fresh)")
        times = {}
        for label, code in (("before", before), ("after", after)):
            if code is None:
                continue
            for k, kind in enumerate(KINDS):
                units = list(range(k * a.kinds_units, (k + 1) * a.kinds_units))
                times[label, kind] = run_child(code, {"part": "kinds", "images": a.kinds_images, "seed": a.seed,
                                                      "activations": str(path), "units": units})
    shares = times["after", "sparse"]["mask_share"], times["after", "broad"]["mask_share"], \
        times["after", "dead"]["mask_share"]
    print("   mask share of the pixels: " + ", ".join(f"{kind} {s:.2%}" for kind, s in zip(KINDS, shares)))
    print(f"   {'':24s}" + "".join(f"{label + ' ' + kind:>15s}" for label in ("before", "after") for kind in KINDS))
    for name in SEARCH_COSTS:
        row = [times.get((label, kind), {}).get("cpu", {}).get(name) for label in ("before", "after") for kind in KINDS]
        print(f"   {name:24s}" + "".join(f"{x:15.3f}" if x is not None else f"{'-':>15s}" for x in row))
    for label in ("before", "after"):
        if (label, "dead") in times:
            w = {kind: times[label, kind]["cpu"]["window's defaults"] for kind in KINDS}
            print(f"   {label}, window's defaults: a dead unit costs {w['dead'] / w['sparse']:.2f}x a sparse one, a "
                  f"broad one {w['broad'] / w['sparse']:.2f}x")


def kinds_child(task: dict) -> dict:
    from probescope.core.dissection.settings import DissectionSettings

    store = LabelStore.build(problem(task["images"], 0, task["seed"]))
    act = np.load(task["activations"], mmap_mode="r")
    out: dict = {"cpu": {}}
    dissect(store, act, DissectionSettings(), task["units"][:1])  # the store's lazy tables, not a unit's cost
    for name, mapping in SEARCH_COSTS.items():
        t0 = time.process_time()
        result = dissect(store, act, DissectionSettings.from_mapping(mapping), task["units"])
        out["cpu"][name] = (time.process_time() - t0) / len(task["units"])
    out["mask_share"] = float(np.mean([u.mask_pixels for u in result.units.values()]) / store.n_pixels)
    return out


def layer_part(a: argparse.Namespace, before: Path | None, after: Path) -> None:
    with tempfile.TemporaryDirectory(dir=a.tmp) as tmp:
        if a.layer_activations:
            act_path, dataset = Path(a.layer_activations).resolve(), str(Path(a.layer_dataset).resolve())
            what = f"{a.layer_activations} on {a.layer_dataset}"
        else:
            ds = problem(a.layer_images, 0, a.seed)
            act_path, dataset = Path(tmp) / "layer.npy", None
            per = a.layer_units // 4
            act = np.lib.format.open_memmap(act_path, mode="w+", dtype=np.float32,
                                            shape=(a.layer_images, a.layer_units, 7, 7))
            kinds_activations(ds, per, a.seed, act[:, :3 * per])
            act[:, 3 * per:] = synthetic_activations(ds, planted_formulas(ds, a.layer_units - 3 * per, a.seed + 1),
                                                     noise=0.3, seed=a.seed + 1)
            act.flush()
            del act
            what = f"a synthetic layer at {a.layer_images} images: {per} broad, {per} dead, the rest sparse"
        act = np.load(act_path, mmap_mode="r")
        n_units = act.shape[1]
        print(f"\n5. whole layer, the window's defaults (IoU, da-select, da-stop, sweep to 10 atoms), through the "
              f"dissect-and-save driver: {what}, {act.shape[0]} images, {n_units} units; each run a fresh process, "
              f"label store from the cache")
        task = {"part": "layer", "activations": str(act_path), "dataset": dataset, "images": a.layer_images,
                "seed": a.seed, "cache": str(Path(tmp) / "cache")}
        runs = {}
        if dataset is not None:  # the label store into the cache first (its first build is not the engine's time)
            run_child(after, {**task, "units": [], "jobs": 1, "out": str(Path(tmp) / "warm")})
        for label, code, jobs, every in (("after", after, 1, 1), ("after", after, 2, 1),
                                         ("before", before, 1, a.before_every)):
            if code is None:
                continue
            units = list(range(0, n_units, every))
            runs[label, jobs] = run_child(code, {**task, "units": units, "jobs": jobs,
                                                 "out": str(Path(tmp) / f"{label}-{jobs}")})
            runs[label, jobs]["scale"] = n_units / len(units)
        ties = unit_ties(act, runs["after", 1]["thresholds"])
    tied = {u for u, share in ties.items() if share > 0.005}
    shares = [runs["after", 1]["mask_share"][str(u)] for u in tied] or [0.0]
    print(f"   units whose T sits at a tie (more activations equal T than the top 0.5%): {len(tied)} of {n_units}"
          f" (their masks hold a median {np.median(shares):.1%} of the pixels)")
    for (label, jobs), r in runs.items():
        scale = r["scale"]
        note = f" (ran {len(r['unit_cpu']) or r['units']} units, times x{scale:.0f})" if scale > 1 else ""
        print(f"   {label}, {jobs} process{'es' if jobs > 1 else ''}: {scale * r['wall_s']:.1f} s wall, "
              f"{scale * r['cpu_s']:.1f} CPU s in all processes{note}; peak memory: driver {r['peak_mb']:.0f} MiB"
              + "".join(f", worker {k + 1} {peak:.0f} MiB (its own {own:.0f})"
                        for k, (peak, own) in enumerate(r["children_mb"])))
        if r["unit_cpu"]:
            cpu = {int(u): t for u, t in r["unit_cpu"].items()}
            dead = [t for u, t in cpu.items() if u in tied]
            alive = [t for u, t in cpu.items() if u not in tied]
            print(f"      CPU a unit: T at a tie {np.mean(dead) if dead else 0:.3f} s ({len(dead)} units), the others "
                  f"{np.mean(alive) if alive else 0:.3f} s ({len(alive)}); all {np.mean(list(cpu.values())):.3f} s")
    if ("after", 2) in runs and ("after", 1) in runs:
        print(f"   2 processes / 1: wall {runs['after', 2]['wall_s'] / runs['after', 1]['wall_s']:.2f}, CPU "
              f"{runs['after', 2]['cpu_s'] / runs['after', 1]['cpu_s']:.2f}")
    if ("before", 1) in runs:
        b, s1 = runs["before", 1], runs["after", 1]
        print(f"   before / after (1 process, CPU): {b['scale'] * b['cpu_s'] / s1['cpu_s']:.1f}x")


def unit_ties(act: np.ndarray, thresholds: dict[str, float]) -> dict[int, float]:
    """Per unit: the share of its activations equal to its threshold."""
    from probescope.core.dissection.blocks import read_units

    out = {}
    units = sorted(int(u) for u in thresholds)
    for start in range(0, len(units), 32):
        chunk = units[start:start + 32]
        if chunk != list(range(chunk[0], chunk[0] + len(chunk))):
            chunk = units[start:start + 1]
        block = read_units(act, chunk)
        for j, u in enumerate(chunk):
            out[u] = float(np.count_nonzero(block[:, j] == np.float64(thresholds[str(u)])) / block[:, j].size)
    return out


def layer_child(task: dict) -> dict:
    """The dissect-and-save driver over `units` with the window's defaults, as the package at hand has it; CPU
    stamps of its per-unit progress (the engine before reported a unit as it began, after as it ends), the memory of
    this process and of its children (sampled)."""
    import threading

    from probescope.core.dissection import engine
    from probescope.core.dissection.saved import dissect_in_blocks
    from probescope.core.dissection.settings import DissectionSettings

    os.environ["PROBESCOPE_CACHE"] = task["cache"]
    if task["dataset"] is not None:
        from probescope.core.data.broden import BrodenDataset
        from probescope.core.dissection.label_cache import label_store

        store = label_store(BrodenDataset.open(Path(task["dataset"])), Path(task["cache"]))
    else:
        store = LabelStore.build(problem(task["images"], 0, task["seed"]))
    act = np.load(task["activations"], mmap_mode="r")
    from dataclasses import fields

    has_jobs = "jobs" in {f.name for f in fields(DissectionSettings)}  # before: one process, no such setting
    settings = DissectionSettings.from_mapping({**WINDOW, **({"jobs": task["jobs"]} if has_jobs else {})})
    children: dict[int, tuple[float, float]] = {}
    stop = threading.Event()

    def sample() -> None:
        from probescope.core.dissection.parallel import process_memory_mb

        while not stop.wait(0.5):
            for pid in children_of(os.getpid()):
                m = process_memory_mb(pid)
                if m is not None:
                    old = children.get(pid, (0.0, 0.0))
                    children[pid] = (max(old[0], m[0]), max(old[1], m[1]))

    if task["jobs"] > 1:
        threading.Thread(target=sample, daemon=True).start()
    stamps: list[tuple[float, str]] = []
    u0, s0 = cpu()
    t0 = time.perf_counter()
    if task["units"]:
        for _ in dissect_in_blocks(Path(task["out"]) / "dissection.json", store, act, settings, task["units"],
                                   dataset_info={}, model_info={},
                                   progress=lambda f, m: stamps.append((time.process_time(), m))):
            pass
    wall = time.perf_counter() - t0
    stop.set()
    u1, s1 = cpu()
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    done_when_told = hasattr(engine, "add_units")  # after: a unit is reported when done; before, as it starts
    unit_cpu: dict[int, float] = {}
    for k, (t, message) in enumerate(stamps):
        if task["jobs"] == 1 and message.startswith("unit "):
            if done_when_told and k > 0:
                unit_cpu[int(message.split()[1])] = t - stamps[k - 1][0]
            elif not done_when_told and k + 1 < len(stamps):
                unit_cpu[int(message.split()[1])] = stamps[k + 1][0] - t
    from probescope.core.dissection.results import DissectionResult

    result = DissectionResult.load(Path(task["out"]) / "dissection.json") if task["units"] else None
    return {"wall_s": wall, "cpu_s": u1 - u0 + s1 - s0 + kids.ru_utime + kids.ru_stime, "peak_mb": peak_rss_mb(),
            "children_mb": [children[p] for p in sorted(children) if children[p][1] > 50],
            "units": len(task["units"]), "unit_cpu": {str(u): t for u, t in unit_cpu.items()},
            "thresholds": {str(u): r.threshold for u, r in (result.units.items() if result else [])},
            "mask_share": {str(u): r.mask_pixels / store.n_pixels for u, r in (result.units.items() if result
                                                                             else [])}}


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
    p.add_argument("--skip-kinds", action="store_true")
    p.add_argument("--skip-layer", action="store_true")
    p.add_argument("--only-layer", action="store_true", help="part 5 alone")
    p.add_argument("--kinds-images", type=int, default=6000, help="images of part 4 (the issue measured 6,000)")
    p.add_argument("--kinds-units", type=int, default=8, help="units of each kind in part 4")
    p.add_argument("--layer-activations", help="part 5's layer: ACT.npy (images, units, h, w) of --layer-dataset")
    p.add_argument("--layer-dataset", help="part 5's Broden folder (with --layer-activations)")
    p.add_argument("--layer-images", type=int, default=6000, help="the synthetic layer's images (no --layer-*)")
    p.add_argument("--layer-units", type=int, default=64, help="the synthetic layer's units (no --layer-*)")
    p.add_argument("--before", default=BASELINE, help="git revision of the 'before' engine ('' for none)")
    p.add_argument("--before-every", type=int, default=8,
                   help="part 5's 'before' run dissects every N-th unit (scaled up by N)")
    p.add_argument("--child", help=argparse.SUPPRESS)
    p.add_argument("--child-limit", type=int, default=0, help=argparse.SUPPRESS)
    p.add_argument("--child-task", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    torch.set_num_threads(1)
    if a.child:
        child(a)
        return 0
    if a.child_task:
        task = json.loads(a.child_task)
        print(json.dumps((kinds_child if task["part"] == "kinds" else layer_child)(task)))
        return 0
    ok = True
    if a.only_layer:
        a.skip_reference = a.skip_gap = a.skip_full = a.skip_kinds = True
    if not a.skip_reference:
        ok = reference_part(a)
    if not a.skip_gap:
        gap_part(a)
    if not a.skip_full:
        full_part(a)
    if not (a.skip_kinds and a.skip_layer):
        with tempfile.TemporaryDirectory(dir=a.tmp) as code:
            before = git_code(a.before, Path(code)) if a.before else None
            after = Path(__file__).resolve().parents[1] / "src"
            if not a.skip_kinds:
                kinds_part(a, before, after)
            if not a.skip_layer:
                layer_part(a, before, after)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
