"""The scale drill: every path of the app at the users' scale, through the real file formats and the real commands
and windows, with time, CPU time and peak memory per step.

    python benchmarks/scale_drill.py --make DIR      # once: the inputs (see scale_data.py), resumable; ~25 GB budget
    python benchmarks/scale_drill.py --run DIR [--steps 1,2,3,4,5] [--label after]
    python benchmarks/scale_drill.py --table DIR     # the measured table(s), as docs/scale.md shows them

Each step runs as child processes (`probescope ...` commands, or scale_gui.py driving the real MainWindow offscreen);
wall time, CPU seconds (user + system, children included) and peak RSS come from the kernel's accounting of each
child (wait4). Results are appended to DIR/drill.json under --label, so a step can be rerun alone and a 'before' and
an 'after' table sit side by side. The activation cache lives in DIR/cache (PROBESCOPE_CACHE), so its size on disk is
measured and a warm cache survives between runs.

Steps (targets from the issue, on 2 cores and 24 GB: no step over 8 GB RSS; GUI stalls under 50 ms; a unit switch
under 100 ms; first units of a cached layer on screen under 10 s; an embedding member at 50,000 stimuli under
15 minutes; sorting 50,000 samples by KL under 200 ms):
  1. probescope dissect of ResNet-18 layer4 (512 units, 7x7) and layer3 (256 units, 14x14), extraction included;
  2. probescope batch of both layers, killed in the middle and resumed;
  3. the Dissection workspace on the dataset and model (scale_gui.py dissection); 3b: DenseNet-161's 2,208-unit table;
  4. probescope similarity, embed (one member, fixed dimensionality), propose; the Similarity workspace;
  5. probescope score of the 50,000 samples with the demo classifier; the Gallery workspace.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def du(path: Path) -> int:
    """Bytes on disk under `path` (allocated blocks, as du counts them)."""
    if not path.exists():
        return 0
    if path.is_file():
        return path.stat().st_blocks * 512
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file() and not p.is_symlink())


# ------------------------------------------------------------------------------------------------------------- make
def make(root: Path) -> dict:
    import scale_data as data

    root.mkdir(parents=True, exist_ok=True)
    record_path = root / "make.json"
    record = json.loads(record_path.read_text()) if record_path.exists() else {}
    parts = [
        ("broden", lambda: data.make_broden(root / "broden", log), root / "broden"),
        ("checkpoints", lambda: data.make_checkpoints(root / "models", log), root / "models"),
        ("judgments", lambda: data.make_judgments(root / "judgments", log), root / "judgments"),
        ("samples", lambda: data.make_samples(root / "samples.npz", log), root / "samples.npz"),
    ]
    parts.insert(1, ("subsets", lambda: make_subsets(root), root / "broden-10pct"))
    for name, build, where in parts:
        t0, c0 = time.perf_counter(), time.process_time()
        build()
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        entry = record.get(name, {"wall_s": 0.0, "cpu_s": 0.0})
        if wall > 1.0:  # a resumed part adds its time to the earlier runs'
            entry = {"wall_s": entry["wall_s"] + wall, "cpu_s": entry["cpu_s"] + cpu}
        entry["bytes"] = du(where)
        record[name] = entry
        record_path.write_text(json.dumps(record, indent=1))
        log(f"{name}: {entry['bytes'] / 2**30:.2f} GiB on disk, {entry['wall_s']:.0f} s wall, "
            f"{entry['cpu_s']:.0f} s CPU")
    return record


# -------------------------------------------------------------------------------------------------------------- run
class Drill:
    """One run of the steps: runs children, measures them, appends results to DIR/drill.json under a label."""

    def __init__(self, root: Path, label: str, dataset: str, units4: str | None, units3: str | None,
                 code: Path | None = None):
        self.root = root.resolve()
        self.label = label
        self.dataset = self.root / dataset  # broden (22,210 images) or a subset folder made by --make
        self.units = {"layer4": units4, "layer3": units3}
        self.out = self.root / "out" / label
        self.cache = self.root / "cache"
        self.env = dict(os.environ, PROBESCOPE_CACHE=str(self.cache), XDG_CONFIG_HOME=str(self.root / "config"),
                        QT_QPA_PLATFORM="offscreen")
        if code is not None:  # another version of the package (e.g. main's, for the 'before' table)
            self.env["PYTHONPATH"] = str(code.resolve())
        self.record_path = self.root / "drill.json"
        self.spec18 = f"places365:resnet18:{self.root / 'models' / 'resnet18_places365.pth.tar'}"
        self.spec161 = f"places365:densenet161:{self.root / 'models' / 'densenet161_places365.pth.tar'}"

    def save(self, step: str, name: str, value: dict) -> None:
        record = json.loads(self.record_path.read_text()) if self.record_path.exists() else {}
        record.setdefault(self.label, {}).setdefault(step, {})[name] = value
        record[self.label]["_dataset"] = {"path": self.dataset.name}
        self.record_path.write_text(json.dumps(record, indent=1))
        log(f"{self.label} / step {step} / {name}: " + json.dumps(value)[:600])

    def measure(self, argv: list[str], *, watch=None, timeout: float | None = None) -> dict:
        """Run `argv` as a child; wall, CPU (user + system, its children included), peak RSS (the largest of the
        process tree's, from wait4), exit code, the progress phases it printed and its stdout's last line.
        `watch(proc)` is polled every 2 s (it may kill the child)."""
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=self.env, text=True,
                                errors="replace", cwd=self.root)  # not the checkout: --code must win the import
        phases: dict[str, list[float]] = {}
        tail: list[str] = []
        stdout: list[str] = []

        def read_err() -> None:
            buf = ""
            while True:
                ch = proc.stderr.read(1)
                if not ch:
                    break
                if ch in "\r\n":
                    line = buf.strip()
                    buf = ""
                    if line:
                        phase = phase_of(line)
                        now = time.perf_counter() - t0
                        phases.setdefault(phase, [now, now])[1] = now
                        tail.append(line)
                        del tail[:-30]
                else:
                    buf += ch

        readers = [threading.Thread(target=read_err, daemon=True),
                   threading.Thread(target=lambda: stdout.extend(proc.stdout), daemon=True)]
        for r in readers:
            r.start()
        status = rusage = None
        while status is None:
            pid, st, ru = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                status, rusage = st, ru
                break
            if watch is not None:
                watch(proc)
            if timeout is not None and time.perf_counter() - t0 > timeout:
                proc.kill()
            time.sleep(0.5)
        proc.returncode = os.waitstatus_to_exitcode(status)
        for r in readers:
            r.join(5)
        return {"wall_s": round(time.perf_counter() - t0, 1), "cpu_s": round(rusage.ru_utime + rusage.ru_stime, 1),
                "peak_rss_mb": round(rusage.ru_maxrss / 1024), "rc": proc.returncode,
                "phases_s": {k: [round(a, 1), round(b, 1)] for k, (a, b) in phases.items()},
                "stdout": stdout[-1].strip() if stdout else "", "stderr_tail": tail[-5:] if proc.returncode else []}

    def probescope(self, *args: str) -> list[str]:
        return [sys.executable, "-m", "probescope", *args]

    # -- steps -------------------------------------------------------------------------------------------------------
    def step1(self, keep_cache: bool) -> None:
        """probescope dissect of layer4 and layer3, extraction through the real path into the (cleared) cache."""
        acts = self.cache / "activations"
        if not keep_cache and acts.exists():
            shutil.rmtree(acts)
        for layer in ("layer4", "layer3"):
            if self.units[layer] == "skip":
                continue
            before = du(acts)
            argv = self.probescope("dissect", "--dataset", str(self.dataset), "--model", self.spec18, "--layer", layer,
                                   "--class-names", str(self.root / "models" / "categories_places365.txt"),
                                   "--out", str(self.out / "dissect" / layer), "--restart")
            if self.units[layer]:
                argv += ["--units", self.units[layer]]
            result = self.measure(argv)
            result["cache_added_bytes"] = du(acts) - before
            result["cache_files"] = sorted(p.name for p in acts.glob("*") if p.is_file()) if acts.exists() else []
            result["units"] = self.units[layer] or "all"
            self.save("1", f"dissect {layer}", result)

    def step2(self) -> None:
        """probescope batch of both layers, killed when half of its chunks are done, then resumed."""
        folder = self.out / "batch"
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        manifest = folder / "zoo.toml"
        manifest.write_text(f'[dataset]\npath = "{self.dataset}"\n\n[[models]]\nspec = "{self.spec18}"\n'
                            'layers = ["layer3", "layer4"]\nname = "resnet18"\n')
        status_file = folder / "zoo" / "status.json"
        killed = {}

        def watch(proc) -> None:
            try:
                status = json.loads(status_file.read_text())
            except (OSError, ValueError):
                return
            total = status.get("chunks_total") or 0
            if total and status["chunks_done"] >= total / 2 and not killed:
                killed.update(chunks_done=status["chunks_done"], chunks_total=total)
                proc.send_signal(signal.SIGKILL)

        argv = self.probescope("batch", str(manifest), "--out", str(folder / "zoo"))
        first = self.measure(argv, watch=watch)
        first.update(killed)
        self.save("2", "batch until killed", first)
        second = self.measure(argv)
        second["resumed_from"] = killed
        same = {}
        for layer in ("layer4", "layer3"):
            a = folder / "zoo" / "resnet18" / layer / "tally.csv"
            b = self.out / "dissect" / layer / "tally.csv"
            same[layer] = (a.read_bytes() == b.read_bytes()) if a.exists() and b.exists() else None
        second["tally_identical_to_step1"] = same
        self.save("2", "batch resumed", second)

    def step3(self, wait_units: int) -> None:
        """The Dissection workspace (first launch with the activation cache warm, then a second launch), and the
        DenseNet-161 table on its subset."""
        gui = [sys.executable, str(HERE / "scale_gui.py"), "dissection"]
        screens = self.root / "screens"
        screens.mkdir(exist_ok=True)
        for name in ("first launch", "second launch"):
            argv = gui + ["--dataset", str(self.dataset), "--model", self.spec18, "--wait-units", str(wait_units)]
            if name == "second launch":
                argv += ["--screenshot", str(screens / f"dissection-{self.label}.png")]
            self.save("3", f"resnet18 {name}", self.gui_result(self.measure(argv)))

    def step3b(self) -> None:
        """DenseNet-161's 2,208-unit table in the Dissection workspace, on the 301-image subset (its extraction alone
        takes 2.4 s an image here), dissected to the end by the workspace."""
        argv = [sys.executable, str(HERE / "scale_gui.py"), "dissection", "--dataset",
                str(self.root / "broden-densenet"), "--model", self.spec161, "--wait-units", "2208", "--units", "20"]
        self.save("3", "densenet161 table", self.gui_result(self.measure(argv)))

    def gui_result(self, measured: dict) -> dict:
        try:
            measured["gui"] = json.loads(measured.pop("stdout"))
        except ValueError:
            measured["gui"] = None
        return measured

    def step4(self) -> None:
        """similarity, embed (one member, fixed dimensionality), propose; the Similarity workspace."""
        j = self.root / "judgments"
        common = ["--judgments", str(j / "obs-drill.hdf5"), "--catalog", str(j / "catalog.hdf5"),
                  "--images", str(j / "images")]
        folder = self.out / "similarity"
        folder.mkdir(parents=True, exist_ok=True)
        emb = folder / "embedding.npz"
        self.save("4", "similarity", self.measure(self.probescope("similarity", *common, "--model", "demo",
                                                                  "--layer", "layer4", "--json")))
        self.save("4", "embed", self.measure(self.probescope("embed", *common, "--dims", "4", "--ensemble", "1",
                                                             "--out", str(emb), "--coarse",
                                                             str(j / "obs-drill-coarse.hdf5"))))
        self.save("4", "propose", self.measure(self.probescope("propose", *common, "--embedding", str(emb),
                                                               "--out", str(folder / "next.csv"))))
        argv = [sys.executable, str(HERE / "scale_gui.py"), "similarity", "--judgments", str(j / "obs-drill.hdf5"),
                "--catalog", str(j / "catalog.hdf5"), "--image-root", str(j / "images"),
                "--screenshot", str(self.root / "screens" / f"similarity-{self.label}.png")]
        self.save("4", "workspace", self.gui_result(self.measure(argv)))

    def step5(self) -> None:
        """score of the 50,000 samples with the demo classifier; the Gallery workspace."""
        samples = str(self.root / "samples.npz")
        self.save("5", "score", self.measure(self.probescope("score", "--images", samples, "--classifier", "demo",
                                                             "--json")))
        argv = [sys.executable, str(HERE / "scale_gui.py"), "gallery", "--samples", samples,
                "--screenshot", str(self.root / "screens" / f"gallery-{self.label}.png")]
        self.save("5", "workspace", self.gui_result(self.measure(argv)))


def phase_of(line: str) -> str:
    """The kind of work a progress line of the commands describes."""
    import re

    text = re.sub(r"^\s*(\S+\s+)?\d+(\.\d+)?%\s*", "", line)  # "[prefix] 12.5% message"
    for pattern, name in ((r"^(.+?): \d+/\d+ images", r"extract \1"), (r"reading label maps", "label maps"),
                          (r"^unit \d+|^dissect", "dissect"), (r"read cached activations", "cached activations")):
        m = re.search(pattern, text)
        if m:
            return m.expand(name)
    return text.split(" ")[0][:30]


SUBSETS = {"broden-10pct": 10, "broden-densenet": 74}  # every k-th row: 2,221 and 301 images


def make_subsets(root: Path) -> None:
    """Broden folders over every k-th row of the full index (images shared through a symlink): the before/after
    comparison of the extraction-bound steps, and DenseNet-161 (2.4 s an image on these CPUs) in the GUI."""
    full = root / "broden"
    lines = (full / "index.csv").read_text(encoding="utf-8").splitlines(keepends=True)
    for name, every in SUBSETS.items():
        sub = root / name
        if (sub / "index.csv").exists():
            continue
        sub.mkdir(exist_ok=True)
        if not (sub / "images").exists():
            (sub / "images").symlink_to(full / "images")
        for table_file in full.glob("*.csv"):
            if table_file.name.startswith("index"):
                continue
            shutil.copyfile(table_file, sub / table_file.name)
        (sub / "index.csv").write_text(lines[0] + "".join(lines[1::every]), encoding="utf-8")


def table(root: Path) -> str:
    """The measured steps as a Markdown table, one column group per run label."""
    record = json.loads((root / "drill.json").read_text())
    labels = list(record)
    rows = ["| step | " + " | ".join(f"{lb} ({record[lb].get('_dataset', {}).get('path', '')}): wall · CPU · peak RSS"
                                      for lb in labels) + " |",
            "|---|" + "---|" * len(labels)]
    names = []
    for lb in labels:
        for step, entries in record[lb].items():
            if step.startswith("_"):
                continue
            names += [(step, n) for n in entries if (step, n) not in names]
    for step, name in sorted(names, key=lambda x: x[0]):
        cells = []
        for lb in labels:
            m = record[lb].get(step, {}).get(name)
            if m is None:
                cells.append("–")
                continue
            text = f"{m['wall_s']:.0f} s · {m['cpu_s']:.0f} s · {m['peak_rss_mb'] / 1024:.1f} GB"
            if m.get("rc"):
                text += f" (exit {m['rc']})"
            cells.append(text)
        rows.append(f"| {step}. {name} | " + " | ".join(cells) + " |")
    return "\n".join(rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--make", type=Path, metavar="DIR")
    what.add_argument("--run", type=Path, metavar="DIR")
    what.add_argument("--table", type=Path, metavar="DIR")
    parser.add_argument("--steps", default="1,2,3,3b,4,5")
    parser.add_argument("--label", default="run", help="name of this run in DIR/drill.json (e.g. before, after)")
    parser.add_argument("--dataset", default="broden", help="dataset folder under DIR for steps 1-3 (broden, or "
                        "the 10%% subset broden-10pct)")
    parser.add_argument("--units4", help="layer4 units to dissect in step 1 (default all; 'skip': not layer4)")
    parser.add_argument("--units3", help="layer3 units to dissect in step 1 (default all; 'skip': not layer3)")
    parser.add_argument("--keep-cache", action="store_true", help="step 1 starts from the cached activations")
    parser.add_argument("--code", type=Path, help="a folder holding another `probescope` package to run instead of "
                        "this checkout's (its core/app/widgets/assets inside it)")
    parser.add_argument("--wait-units", type=int, default=56, help="units the GUI dissects before switching (step 3)")
    args = parser.parse_args()
    if args.make:
        make(args.make)
        return 0
    if args.table:
        print(table(args.table))
        return 0
    drill = Drill(args.run, args.label, args.dataset, args.units4, args.units3, args.code)
    for step in args.steps.split(","):
        log(f"step {step}")
        if step == "1":
            drill.step1(args.keep_cache)
        elif step == "3":
            drill.step3(args.wait_units)
        else:
            getattr(drill, f"step{step}")()
    print(table(args.run))
    return 0


if __name__ == "__main__":
    sys.exit(main())
