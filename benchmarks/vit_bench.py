"""A ViT-B/16 token layer dissected end to end (activation extraction + dissection with the window's defaults) beside
ResNet-18 layer4, on the demo world and on the scale drill's ADE20K-sized Broden dataset (22,210 images).

Models: torchvision's vit_b_16 and resnet18 with RANDOM weights (seeded state dicts written into --work), opened as
`vit_b_16:FILE` and `resnet18:FILE`. The ViT's layer (default encoder.layers.encoder_layer_11) is a 1 + 14x14 token
sequence of 768 units (images resized to 224x224); the activation cache holds its patch tokens as float32
(images, 768, 14, 14), a memory-mapped .npy (probescope.core.data.activations). ResNet-18 layer4: 512 units, 7x7 at
224 px (4x4 on the demo world's 128 px images).

Every measured run is `probescope dissect` in a fresh process (its worker processes included) with its own empty
activation cache: wall time, CPU seconds (user + system of the process and all its children, from wait4) and the peak
resident memory (VmHWM, polled from /proc) of the driver and of each worker (with the private memory it added). The
command's progress lines split a run into phases (start-up and model loading, extraction, label maps, dissection);
the CPU time of a phase is sampled from /proc (the process tree's utime + stime) when its first line appears.
Settings: the window's defaults (WINDOW_SETTINGS: searches iou, da-select, da-stop, sweep to 10 atoms; beam 5,
every concept, dedupe mask, quantile 0.005; jobs 0 = one process per core), or with --settings cli the command
line's (DissectionSettings() as it is: iou only, no sweep).

Parts:
- demo: the demo world (`probescope demo-data`, 1,500 images of 128 px), both models end to end; --demo-images N
  runs on the first N rows and --demo-units a subset of units; figures then extrapolated linearly (stated).
- scale: the scale drill's dataset (scale_data.make_broden into WORK/scale/broden, made once and kept; --scale-images
  M < 22,210 makes only the first M images and extrapolates every figure linearly to 22,210, stated):
  1. extraction on the first --subset N rows (a Broden folder of those rows), end to end through `probescope
     dissect --units 0`, the extraction phase extrapolated linearly to the full image count;
  2. the label store of the whole dataset, built from the label maps in a fresh process (cold label cache): every
     first dissection of the dataset pays it once, whatever the model;
  3. dissection at full size on synthetic activations of the right shape: the subset's real activations (from run 1's
     cache) tiled over all images into a float32 (images, units, h, w) .npy on disk, read memory-mapped through
     `probescope dissect --activations` (which first checks the whole file is finite) on --scale-units units (label
     store warm), the dissection phase extrapolated to all units. The file is written whole (13 GB for the ViT at
     22,210 images) when the disk has room; the tiled rows repeat N images' activations, so the units' masks are
     real ones in shape and size, not aligned to the new images' labels (a random-weight model's are not anyway).

    python benchmarks/vit_bench.py --quick                  # smoke run, about 3 minutes
    python benchmarks/vit_bench.py --parts demo             # both models end to end on the 1,500 demo images
    python benchmarks/vit_bench.py --parts scale --subset 200 --scale-units 16
    python benchmarks/vit_bench.py                          # everything (hours if --demo-units is all, see above)

Run it with `nice` on a quiet machine: the load average (1 minute, before -> after) is printed beside each figure.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

FULL_IMAGES = 22_210  # the scale drill's dataset (Broden's ADE20K rows)
MODELS = {  # name: (torchvision architecture, default layer)
    "vit": ("vit_b_16", "encoder.layers.encoder_layer_11"),
    "resnet18": ("resnet18", "layer4"),
}
WINDOW_ARGS = ["--search", "iou,da-select,da-stop", "--sweep-length", "10"]  # WINDOW_SETTINGS as options
TICK = os.sysconf("SC_CLK_TCK")


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------------------------------- processes
def _stat(pid: int) -> list[str] | None:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return None


def process_tree(root: int) -> list[int]:
    """`root` and every live descendant (from /proc)."""
    parent: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields:
                parent[int(entry)] = int(fields[1])
    tree, frontier = [root], [root]
    while frontier:
        frontier = [p for p, pp in parent.items() if pp in frontier]
        tree += frontier
    return tree


def tree_cpu(root: int, tree: list[int]) -> float:
    """CPU seconds (user + system) of the live processes of `tree` and of the children `root` has reaped."""
    total = 0.0
    for pid in tree:
        fields = _stat(pid)
        if fields:  # after ')': state ppid ... utime(11) stime(12) cutime(13) cstime(14)
            total += int(fields[11]) + int(fields[12]) + (int(fields[13]) + int(fields[14]) if pid == root else 0)
    return total / TICK


def phase_of(line: str, current: str) -> str:
    if " images" in line or "activation cache" in line or "predictions" in line:
        return "extract"
    if "label maps" in line or "packing regions" in line:
        return "labels"
    if "dissect" in line or line.lstrip("0123456789.% ").startswith("unit "):
        return "dissect"
    return current


def measure(argv: list[str], env: dict[str, str]) -> dict:
    """Run `argv` in a fresh process; wall, CPU (wait4: the process and its reaped children), the peak memory of it
    and of each child process (VmHWM and private memory, polled), the load average before and after, and the wall
    and CPU time of each phase its progress lines show."""
    from probescope.core.dissection.parallel import process_memory_mb

    load0 = os.getloadavg()[0]
    t0 = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
                            errors="replace")
    memory: dict[int, tuple[float, float]] = {}
    tree = [proc.pid]
    marks: list[tuple[str, float, float]] = [("start", 0.0, 0.0)]  # (phase, wall, cpu) at its first line
    tail: list[str] = []

    def read_err() -> None:
        for line in proc.stderr:
            line = line.strip()
            if not line:
                continue
            tail.append(line)
            del tail[:-20]
            phase = phase_of(line, marks[-1][0])
            if phase != marks[-1][0]:
                marks.append((phase, time.perf_counter() - t0, tree_cpu(proc.pid, process_tree(proc.pid))))

    readers = [threading.Thread(target=read_err, daemon=True),
               threading.Thread(target=proc.stdout.read, daemon=True)]
    for r in readers:
        r.start()
    while True:
        pid, status, rusage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        tree = process_tree(proc.pid)
        for p in tree:
            m = process_memory_mb(p)
            if m is not None:
                old = memory.get(p, (0.0, 0.0))
                memory[p] = (max(old[0], m[0]), max(old[1], m[1]))
        time.sleep(0.2)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    for r in readers:
        r.join(5)
    if proc.returncode:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}:\n" + "\n".join(tail))
    cpu = rusage.ru_utime + rusage.ru_stime
    phases: dict[str, dict[str, float]] = {}
    ends = marks[1:] + [("end", wall, cpu)]
    for (name, w, c), (_, w1, c1) in zip(marks, ends):
        entry = phases.setdefault(name, {"wall_s": 0.0, "cpu_s": 0.0})
        entry["wall_s"] += w1 - w
        entry["cpu_s"] += c1 - c
    driver = memory.get(proc.pid, (rusage.ru_maxrss / 1024, 0.0))
    workers = [memory[p] for p in sorted(memory) if p != proc.pid and memory[p][1] > 50]
    return {"wall_s": wall, "cpu_s": cpu, "peak_mb": driver[0], "own_mb": driver[1], "workers_mb": workers,
            "load": (load0, os.getloadavg()[0]), "phases": phases, "tail": tail[-3:]}


# ------------------------------------------------------------------------------------------------------- inputs
def checkpoints(work: Path) -> dict[str, Path]:
    """Random-weight (seeded) state dicts of the two models, written once."""
    out = {}
    for name, (arch, _) in MODELS.items():
        path = work / f"{arch}.pth"
        out[name] = path
        if not path.exists():
            import torch
            import torchvision

            torch.manual_seed(0)
            torch.save(torchvision.models.get_model(arch, weights=None).state_dict(), path.with_suffix(".part"))
            path.with_suffix(".part").rename(path)
    return out


def rows_subset(full: Path, folder: Path, n: int) -> Path:
    """A Broden folder over the first `n` rows of `full`'s index (images and label maps through a symlink)."""
    lines = (full / "index.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    if n >= len(lines) - 1:
        return full
    if (folder / "index.csv").exists() and len((folder / "index.csv").read_text().splitlines()) == n + 1:
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    if not (folder / "images").exists():
        (folder / "images").symlink_to(full / "images")
    for table in full.glob("*.csv"):
        if not table.name.startswith("index"):
            shutil.copyfile(table, folder / table.name)
    (folder / "index.csv").write_text("".join(lines[:n + 1]), encoding="utf-8")
    return folder


def demo_world(work: Path) -> Path:
    folder = work / "demo"
    if not (folder / "index.csv").exists():
        subprocess.run([sys.executable, "-m", "probescope", "demo-data", str(folder)], check=True,
                       capture_output=True)
    return folder


def scale_dataset(work: Path, images: int) -> tuple[Path, dict]:
    """The scale drill's Broden dataset (or its first `images` images), made once; how long making it took."""
    import scale_data

    root = work / "scale" / ("broden" if images >= FULL_IMAGES else f"broden-{images}")
    record = root.parent / f"{root.name}.make.json"
    if not (root / ".drill" / "done.json").exists():
        log(f"making {root} ({images} images; the full 22,210 take about 6 minutes on this machine)")
        t0, c0 = time.perf_counter(), time.process_time()
        scale_data.make_broden(root, log, limit=None if images >= FULL_IMAGES else images)
        record.write_text(json.dumps({"wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
                                      "load": os.getloadavg()[0]}))
    made = json.loads(record.read_text()) if record.exists() else {}
    return root, made


def fresh(folder: Path) -> Path:
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    return folder


def env_with(cache: Path) -> dict[str, str]:
    return dict(os.environ, PROBESCOPE_CACHE=str(cache), QT_QPA_PLATFORM="offscreen")


def dissect_argv(a: argparse.Namespace, dataset: Path, out: Path, units: str | None, *, model: str | None = None,
                 layer: str | None = None, activations: Path | None = None) -> list[str]:
    argv = [sys.executable, "-m", "probescope", "dissect", "--dataset", str(dataset), "--out", str(out), "--restart",
            "--jobs", str(a.jobs)]
    argv += ["--model", model, "--layer", layer] if model else ["--activations", str(activations)]
    argv += WINDOW_ARGS if a.settings == "window" else []
    return argv + (["--units", units] if units else [])


def n_units(text: str | None, total: int) -> int:
    if not text:
        return total
    count = 0
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        count += int(hi or lo) - int(lo) + 1
    return count


def cached_activations(cache: Path, images: int) -> Path:
    """The layer's activations in a run's cache (the (images, units, h, w) one, not the head's predictions)."""
    import numpy as np

    for path in sorted((cache / "activations").glob("*.npy")):
        arr = np.load(path, mmap_mode="r")
        if arr.ndim == 4 and arr.shape[0] == images:
            return path
    raise SystemExit(f"no (images, units, h, w) activations in {cache}")


def tiled(source: Path, path: Path, images: int) -> tuple[tuple[int, ...], float]:
    """`source`'s rows repeated over `images` rows into a float32 .npy at `path`; (shape, seconds)."""
    import numpy as np

    src = np.load(source, mmap_mode="r")
    shape = (images, *src.shape[1:])
    t0 = time.perf_counter()
    block = np.ascontiguousarray(src, dtype=np.float32)
    out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=shape)
    for start in range(0, images, len(block)):
        out[start:start + len(block)] = block[:images - start]
    out.flush()
    del out
    return shape, time.perf_counter() - t0


# ---------------------------------------------------------------------------------------------------------- rows
ROWS: list[dict] = []


def add(model: str, world: str, step: str, measured_on: str, m: dict | None, *, wall: float | None = None,
        cpu: float | None = None, scale: float = 1.0, to: str = "", note: str = "",
        x_wall: float | None = None, x_cpu: float | None = None) -> dict:
    """One table row: a measured run (or one of its phases: wall and cpu given) and its linear extrapolation."""
    wall = m["wall_s"] if wall is None else wall
    cpu = m["cpu_s"] if cpu is None else cpu
    row = {"model": model, "world": world, "step": step, "on": measured_on, "wall": wall, "cpu": cpu,
           "peak": (m["peak_mb"], m["own_mb"]) if m else None, "workers": m["workers_mb"] if m else [],
           "load": m["load"] if m else None, "to": to, "note": note,
           "x_wall": wall * scale if x_wall is None else x_wall, "x_cpu": cpu * scale if x_cpu is None else x_cpu}
    ROWS.append(row)
    return row


def print_table() -> None:
    head = (f"{'model':8s} {'world':5s} {'step':36s} {'measured on':22s} {'wall s':>7s} {'CPU s':>7s} "
            f"{'peak/own MiB':>12s} {'workers MiB':>16s} {'load 1m':>10s}   {'extrapolated to':20s} "
            f"{'wall s':>7s} {'CPU s':>7s}")
    print(head)
    print("-" * len(head))
    for r in ROWS:
        workers = ", ".join(f"{p:.0f}/{o:.0f}" for p, o in r["workers"]) or "-"
        peak = f"{r['peak'][0]:.0f}/{r['peak'][1]:.0f}" if r["peak"] else "-"
        load = f"{r['load'][0]:4.2f}->{r['load'][1]:4.2f}" if r["load"] else "(in run)"
        extra = f"{r['to'] or '(as measured)':20s} {r['x_wall']:7.0f} {r['x_cpu']:7.0f}"
        measured = f"{r['wall']:7.1f} {r['cpu']:7.1f}" if r["on"] != "sum of rows" else f"{'-':>7s} {'-':>7s}"
        print(f"{r['model']:8s} {r['world']:5s} {r['step']:36s} {r['on']:22s} {measured} "
              f"{peak:>12s} {workers:>16s} {load:>10s}   {extra}" + (f"   {r['note']}" if r["note"] else ""))


# --------------------------------------------------------------------------------------------------------- parts
ZERO = {"wall_s": 0.0, "cpu_s": 0.0}


def demo_part(a: argparse.Namespace, work: Path, ckpt: dict[str, Path]) -> None:
    import numpy as np

    full = demo_world(work)
    total = len((full / "index.csv").read_text().splitlines()) - 1
    n = min(a.demo_images or total, total)
    dataset = rows_subset(full, work / f"demo-{n}", n)
    for model in a.models:
        arch, layer = MODELS[model]
        layer = a.vit_layer if model == "vit" else layer
        cache = fresh(work / "runs" / f"demo-{model}" / "cache")
        log(f"demo world: {model} {layer} on {n} images, units {a.demo_units or 'all'}")
        m = measure(dissect_argv(a, dataset, cache.parent / "out", a.demo_units, model=f"{arch}:{ckpt[model]}",
                                 layer=layer), env_with(cache))
        shape = np.load(cached_activations(cache, n), mmap_mode="r").shape
        c = shape[1]
        k = n_units(a.demo_units, c)
        scales = {"start": 1.0, "extract": total / n, "labels": total / n, "dissect": total / n * c / k}
        partial = n < total or k < c
        rows = []
        for name, label in (("start", "start-up (imports, model)"), ("extract", "extraction"),
                            ("labels", "label maps"), ("dissect", "dissection")):
            ph = m["phases"].get(name, ZERO)
            on = f"{n} img" + (f", {k}/{c} units" if name == "dissect" else "")
            to = (f"{total} img" + (f", {c} units" if name == "dissect" else "")) if scales[name] != 1 else ""
            rows.append(add(model, "demo", f"  {label}", on, None, wall=ph["wall_s"], cpu=ph["cpu_s"],
                            scale=scales[name], to=to))
        add(model, "demo", f"end to end ({c} units {shape[2]}x{shape[3]})", f"{n} img, {k}/{c} units", m,
            to=f"{total} img, {c} units" if partial else "", x_wall=sum(r["x_wall"] for r in rows) if partial else None,
            x_cpu=sum(r["x_cpu"] for r in rows) if partial else None,
            note="(extrapolated: the phases' sum)" if partial else "")


def scale_part(a: argparse.Namespace, work: Path, ckpt: dict[str, Path]) -> None:
    import numpy as np

    images = min(a.scale_images, FULL_IMAGES)
    root, made = scale_dataset(work, images)
    to_full = FULL_IMAGES / images
    full_to = f"{FULL_IMAGES} img" if to_full != 1 else ""
    if made:
        ROWS.append({"model": "-", "world": "scale", "step": "make the dataset (once)", "on": f"{images} img",
                     "wall": made["wall_s"], "cpu": made["cpu_s"], "peak": None, "workers": [],
                     "load": (made.get("load", 0.0),) * 2, "to": full_to, "note": "(scale_data.make_broden)",
                     "x_wall": made["wall_s"] * to_full, "x_cpu": made["cpu_s"] * to_full})
    # the label store of the whole dataset, cold (every first dissection of the dataset pays it once)
    labels_cache = fresh(work / "runs" / "scale-labels")
    code = ("import sys; from pathlib import Path; from probescope.core.data.broden import BrodenDataset; "
            "from probescope.core.dissection.label_cache import label_store; "
            "label_store(BrodenDataset.open(Path(sys.argv[1])), Path(sys.argv[2]))")
    log(f"scale: label store of {images} images")
    m = measure([sys.executable, "-c", code, str(root), str(labels_cache)], env_with(labels_cache))
    label_row = add("-", "scale", "label store (cold, once)", f"{images} img", m, scale=to_full, to=full_to,
                    note="(fresh process: imports + LabelStore from the label maps)")
    for model in a.models:
        arch, layer = MODELS[model]
        layer = a.vit_layer if model == "vit" else layer
        n = min(a.subset, images)
        subset = rows_subset(root, work / "scale" / f"rows-{n}", n)
        cache = fresh(work / "runs" / f"scale-{model}-extract" / "cache")
        log(f"scale: {model} extraction on the first {n} rows")
        m = measure(dissect_argv(a, subset, cache.parent / "out", "0", model=f"{arch}:{ckpt[model]}", layer=layer),
                    env_with(cache))
        source = cached_activations(cache, n)
        start = m["phases"].get("start", ZERO)
        extract = m["phases"]["extract"]
        add(model, "scale", "  start-up (imports, model)", f"{n} img (--units 0)", None, wall=start["wall_s"],
            cpu=start["cpu_s"])
        start_row = ROWS[-1]
        extract_row = add(model, "scale", "extraction", f"first {n} img (--units 0)", m, wall=extract["wall_s"],
                          cpu=extract["cpu_s"], scale=FULL_IMAGES / n, to=f"{FULL_IMAGES} img",
                          note=f"(whole run {m['wall_s']:.0f} s wall, {m['cpu_s']:.0f} s CPU)")
        # dissection on the subset's activations tiled to the full shape
        src_shape = np.load(source, mmap_mode="r").shape
        need = images * int(np.prod(src_shape[1:])) * 4
        free = shutil.disk_usage(work).free
        if need > free - (2 << 30):
            raise SystemExit(f"{need / 2**30:.1f} GiB of activations do not fit in {free / 2**30:.1f} GiB free")
        act_path = work / "runs" / f"scale-{model}-act.npy"
        log(f"scale: writing {need / 2**30:.2f} GiB of tiled activations {(images, *src_shape[1:])}")
        shape, seconds = tiled(source, act_path, images)
        c = shape[1]
        units = f"0-{a.scale_units - 1}" if a.scale_units < c else None
        k = n_units(units, c)
        run_cache = work / "runs" / f"scale-{model}-dissect" / "cache"
        fresh(run_cache.parent)
        shutil.copytree(labels_cache, run_cache)  # the label store warm: its cold build is a row of its own
        log(f"scale: {model} dissection of {k}/{c} units on {images} images")
        m = measure(dissect_argv(a, root, run_cache.parent / "out", units, activations=act_path), env_with(run_cache))
        ph = m["phases"]
        geometry = f"{c} units {shape[2]}x{shape[3]}"
        check = ph.get("start", ZERO)
        check_row = add(model, "scale", f"  start + finite check of {need / 2**30:.1f} GiB", f"{images} img", None,
                        wall=check["wall_s"], cpu=check["cpu_s"], scale=to_full, to=full_to,
                        note="(imports, the .npy memory-mapped, every value checked finite)")
        warm = ph.get("labels", ZERO)
        add(model, "scale", "  label store (warm: cached)", f"{images} img", None, wall=warm["wall_s"],
            cpu=warm["cpu_s"], scale=to_full, to=full_to)
        dis_row = add(model, "scale", f"dissection ({geometry})", f"{images} img, {k}/{c} units", m,
                      wall=ph["dissect"]["wall_s"], cpu=ph["dissect"]["cpu_s"], scale=to_full * c / k,
                      to=f"{FULL_IMAGES} img, {c} units",
                      note=f"(tiled .npy written in {seconds:.0f} s; whole run {m['wall_s']:.0f} s wall, "
                      f"{m['cpu_s']:.0f} s CPU)")
        parts = (start_row, extract_row, label_row, check_row, dis_row)
        add(model, "scale", f"end to end, estimated ({geometry})", "sum of rows", None, wall=0.0, cpu=0.0,
            to=f"{FULL_IMAGES} img, {c} units", x_wall=sum(r["x_wall"] for r in parts),
            x_cpu=sum(r["x_cpu"] for r in parts),
            note="(start-up + extraction + label store cold + check + dissection, extrapolated as above)")
        act_path.unlink()


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, default=Path("/tmp/probescope-vit-bench"),
                   help="inputs (checkpoints, demo world, scale dataset: kept between runs) and runs' caches")
    p.add_argument("--parts", default="demo,scale", help="comma list of demo, scale")
    p.add_argument("--models", default="vit,resnet18", help="comma list of vit, resnet18")
    p.add_argument("--vit-layer", default=MODELS["vit"][1])
    p.add_argument("--settings", choices=("window", "cli"), default="window",
                   help="window: WINDOW_SETTINGS (the window's preset); cli: DissectionSettings() (iou only)")
    p.add_argument("--jobs", type=int, default=0, help="dissection processes (0 = one per core, as the defaults)")
    p.add_argument("--demo-images", type=int, default=0, help="demo world: the first N rows only (0 = all 1,500)")
    p.add_argument("--demo-units", help="demo world: units to dissect (e.g. 0-31; default all), extrapolated")
    p.add_argument("--subset", type=int, default=200, help="scale: extraction measured on the first N rows")
    p.add_argument("--scale-units", type=int, default=16, help="scale: units dissected (extrapolated to all)")
    p.add_argument("--scale-images", type=int, default=FULL_IMAGES,
                   help="scale: make and use only the first M images of the dataset (extrapolated to 22,210)")
    p.add_argument("--quick", action="store_true",
                   help="smoke run (~3 min): --demo-images 64 --demo-units 0-7 --subset 16 --scale-units 4 "
                   "--scale-images 1000")
    a = p.parse_args(argv)
    a.work = a.work.resolve()
    a.work.mkdir(parents=True, exist_ok=True)
    a.models = [m for m in a.models.split(",") if m]
    if a.quick:
        a.demo_images, a.demo_units, a.subset, a.scale_units = 64, "0-7", 16, 4
        a.scale_images = min(a.scale_images, 1000)
    print(f"vit_bench: {os.cpu_count()} cores, load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}; "
          f"settings {'the window preset (iou, da-select, da-stop, sweep 10)' if a.settings == 'window' else 'cli'}"
          f", --jobs {a.jobs}; work folder {a.work}", flush=True)
    ckpt = checkpoints(a.work)
    parts = a.parts.split(",")
    if "demo" in parts:
        demo_part(a, a.work, ckpt)
    if "scale" in parts:
        scale_part(a, a.work, ckpt)
    print()
    print("Workers: with --jobs 0 the command dissects in-process below AUTO_MIN_WORK (units x images), else one "
          "process per core (the window keeps a core for itself: one worker on 2 cores).")
    print("Each measured run is `probescope dissect` (or the label store's build) in a fresh process; CPU = user + "
          "system of it and its children; peak/own = the driver's VmHWM (memory-mapped file pages it touched "
          "counted) / its largest private memory (smaps_rollup, polled); workers: the same "
          "for each worker; load 1m = os.getloadavg()[0] before -> after the run. Indented rows are phases of the row "
          "above or below (split by the command's progress lines). 'extrapolated to' scales linearly in images "
          "and units; activations are float32 memory-mapped .npy files on disk (the cache, or the tiled file).")
    print("Caveat: a dissection of a few units extrapolated to the layer overstates it (the first unit pays the "
          "label store's lazy tables; few units over few images run in-process, a layer on a worker per core): on "
          "the full demo world the whole ViT layer took 32 CPU s where 16 units of 200 images extrapolated to 583.")
    print_table()
    return 0


if __name__ == "__main__":
    sys.exit(main())
