"""GUI responsiveness, offscreen.

1. Launch: time from process start to an interactive window (shown, event loop turning) and to every workspace
   showing its first content, with the demo world already cached, the longest GUI stall meanwhile and the peak
   memory of each process: before (the computation in the window's process, --kernel thread) and after (a
   compute kernel process, the default) in one run. Targets: interactive under 1.5 s, stalls under 50 ms.
   Fresh launch (--fresh): the same from an empty cache folder, as on a fresh install (the demo dataset is
   rendered, its activations, label store and dissection computed): time to the Dissection's first units on
   screen (target < 10 s on an idle 2-core machine), to its whole-dataset result and to every workspace done, with
   the CPU time (the process, all threads, and its child processes) and how busy the machine was meanwhile; for the
   package at --before (a git revision, extracted with `git archive`) and this one, alternating, in one run.
2. Stall: the longest gap of the GUI event loop (a 5 ms timer records its own lateness) while a heavy task runs
   in the worker pool (the demo model over rendered images in the compute thread while the I/O pool decodes
   dataset thumbnails). Target: under 50 ms. The same work run in the GUI thread is the naive baseline; the ratio
   says how much the pool saves.

3. Gallery (--gallery): while the demo sampler streams into the Gallery workspace, how often the live IS and the
   FID/KID against the demo dataset redraw (target >= 10 per second each) and the longest GUI stall (target
   < 50 ms), against classifying the same batches in the GUI thread; then a gallery of --gallery-images (50,000)
   scored samples: time to a complete first screen (thumbnails rendered lazily in the pool) against rendering
   every thumbnail up front, and a scroll top to bottom: paint time per frame and the longest stall.

4. Dissection (--dissection): switching units in the Dissection workspace on the demo world: time until the
   unit's top images with overlays are on screen (target < 100 ms), with the neighbours prefetched in the pool,
   for a unit seen before, and built on demand (the naive baseline).

5. Batch (--batch): a `probescope batch` of the demo model's layer3 and layer4 over --batch-images demo images (the
   workspace's default settings), then browsed in the Dissection workspace: time from opening the folder to the
   first layer on screen and from clicking the other layer to it, and the longest GUI stall meanwhile, against
   dissecting that layer in the workspace (the naive way to see it, activations already cached).

Usage: python benchmarks/gui_bench.py [--runs 3] [--images 512] [--gallery [--stream 400] [--gallery-images 50000]]
       [--dissection [--units 10]] [--batch [--batch-images 1500]] [--fresh [--fresh-runs 1] [--before 75344cc]]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

T0 = time.perf_counter()
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
from probescope.app.window.launch import limit_blas_threads  # noqa: E402  (before NumPy, as the app)

limit_blas_threads()


def launch_child(kernel: str, first_units_only: bool = False) -> None:
    """Runs in a fresh interpreter: start the app on the demo world (computing where `kernel` says) and report when
    it is usable (with `first_units_only`, stop once the Dissection's first units are on screen). A 'before'
    version runs as its own `probescope gui` did: what it lacks (an early kernel) it does not do."""
    try:
        from probescope.app.compute.threads import keep_gui_responsive
    except ImportError:  # (a version before the threads module had it in the pool's: by name, as it is not now)
        keep_gui_responsive = importlib.import_module("probescope.app.compute.workers").keep_gui_responsive

    torch_s = torch_cpu_s = 0.0
    if kernel == "thread":  # as the app then: torch before Qt
        import torch

        from probescope.app.compute.workers import compute_threads

        torch_s = time.perf_counter() - T0
        torch.set_num_threads(compute_threads())
        torch_cpu_s = time.process_time()
    elif kernel == "local":  # as the app then: the kernel started before Qt is imported, where it is
        with contextlib.suppress(ImportError):
            from probescope.jobs.kernel import local

            local.start_early()
    import tempfile

    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    from probescope.app.window.main_window import MainWindow
    from probescope.app.window.saved_settings import Settings

    app = QApplication([sys.argv[0]])
    times: dict[str, float] = {"torch_import_s": torch_s, "torch_import_cpu_s": torch_cpu_s}
    with tempfile.TemporaryDirectory() as tmp:
        where = {} if kernel == "thread" else {"kernel": kernel}  # (a 'before' package may have no kernels)
        window = MainWindow(Settings(os.path.join(tmp, "s.ini")), device="cpu", **where)
        keep_gui_responsive()  # as `probescope gui` does
        window.open_demo_world()
        window.show()

        probe = LatencyProbe()

        def first_turn() -> None:  # the first event-loop turn after show(): the window answers input from here
            times["interactive_s"] = time.perf_counter() - T0
            times["interactive_cpu_s"] = time.process_time()  # all threads: less sensitive to a busy machine
            probe.start()

        def check() -> None:
            if all(ws.is_initial_work_done for ws in window.workspaces.values()) and not window.pool.active():
                times["all_workspaces_s"] = time.perf_counter() - T0
                times["all_workspaces_cpu_s"] = cpu_with_children()
                times["longest_stall_s"] = probe.stop()  # from the first turn until every workspace is done
                from scale_gui import memory  # (this folder: the window's and its kernel's peak memory)

                times.update(memory(window))
                times["torch_in_window"] = "torch" in sys.modules
                app.quit()

        dissection = window.workspaces["dissection"]

        def watch_dissection() -> None:  # every 10 ms: the first units in the table, then the whole result
            if "first_units_s" not in times and dissection.units.rowCount() > 0:
                times["first_units_s"] = time.perf_counter() - T0
                times["first_units_cpu_s"] = time.process_time()  # this process; its children run beside it
                times["first_units_images"] = dissection.data.dataset.n_images
                times["first_units_header"] = dissection.header.text()
                if first_units_only:
                    app.quit()
                    return
            if dissection.is_initial_work_done:
                times["dissection_done_s"] = time.perf_counter() - T0
                times["dissection_done_images"] = dissection.data.dataset.n_images
            else:
                QTimer.singleShot(10, watch_dissection)

        QTimer.singleShot(0, watch_dissection)
        QTimer.singleShot(0, first_turn)
        window.pool.finished.connect(check)
        for ws in window.workspaces.values():
            ws.initial_work_done.connect(check)
        window.pool.failed.connect(lambda _h, e: (print(e.details, file=sys.stderr), app.exit(1)))
        code = app.exec()
        window.close()
    print(json.dumps(times))
    sys.exit(code)


def cpu_with_children() -> float:
    """CPU seconds of this process (all threads) and of its child processes that have ended."""
    import resource

    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + children.ru_utime + children.ru_stime


def machine_jiffies() -> tuple[int, int]:
    """(busy, total) CPU time of the whole machine so far, in clock ticks (Linux /proc/stat; zeros elsewhere)."""
    try:
        fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return 0, 0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
    return sum(fields) - idle, sum(fields)


def package_at(rev: str, into: Path) -> Path | None:
    """src/ of the package at git revision `rev` (for the 'before' runs); None when git cannot give it."""
    repo = Path(__file__).resolve().parents[1]
    archive = subprocess.run(["git", "-C", str(repo), "archive", rev, "src"], capture_output=True)
    if archive.returncode:
        print(f"(no 'before': git archive {rev} failed: {archive.stderr.decode().strip()})")
        return None
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive.stdout, check=True)
    return into / "src"


def measure_fresh(runs: int, before: str, load: int = 0, first_units_only: bool = False) -> dict[str, list[dict]]:
    """Launches on an empty cache folder, the package at `before` and this one alternating: each run's times (see
    `launch_child`), its CPU with its children, the machine's load average and how busy its cores were; with `load`
    that many CPU-bound processes (`sh -c 'while :; do :; done'`, as a training run would) run meanwhile."""

    results: dict[str, list[dict]] = {"before": [], "after": []}
    hogs = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(load)]
    try:
        return _fresh_runs(runs, before, results, first_units_only)
    finally:
        for hog in hogs:
            hog.kill()
            hog.wait()


def _fresh_runs(runs: int, before: str, results: dict[str, list[dict]],
                first_units_only: bool) -> dict[str, list[dict]]:
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        old_src = package_at(before, Path(tmp))
        here = Path(__file__).resolve().parents[1] / "src"
        versions = [("before", old_src)] if old_src is not None else []
        for _ in range(runs):
            for name, src in [*versions, ("after", here)]:
                cache = Path(tempfile.mkdtemp(dir=tmp, prefix="cache-"))
                env = dict(os.environ, PROBESCOPE_CACHE=str(cache),
                           PYTHONPATH=os.pathsep.join([str(src), os.environ.get("PYTHONPATH", "")]))
                load, (busy0, total0) = os.getloadavg()[0], machine_jiffies()
                # each version as `probescope gui` runs it: in a kernel process where the version has one
                kernel = "local" if (src / "probescope" / "jobs" / "kernel" / "process.py").is_file() else "thread"
                only = ["--first-units-only"] if first_units_only else []
                out = subprocess.run([sys.executable, __file__, "--child", "--kernel", kernel, *only],
                                     capture_output=True, text=True, timeout=900, env=env)
                if out.returncode != 0:
                    raise SystemExit(f"fresh launch ({name}) failed:\n{out.stderr[-3000:]}")
                busy1, total1 = machine_jiffies()
                run = json.loads(out.stdout.strip().splitlines()[-1])
                run.update(load_before=load, load_after=os.getloadavg()[0],
                           machine_busy=(busy1 - busy0) / max(1, total1 - total0))
                results[name].append(run)
                shutil.rmtree(cache, ignore_errors=True)
    return results


def report_fresh(runs: int, before: str, load: int, first_units_only: bool = False) -> None:
    results = measure_fresh(runs, before, load, first_units_only)
    cores = os.cpu_count() or 1
    print(f"fresh launch (empty cache folder), {runs} run(s) each, alternating; {cores} cores; {load} other CPU-bound "
          "process(es) running meanwhile:")
    for name in ("before", "after"):
        label = f"{before} (before)" if name == "before" else "this tree (after)"
        for r in results[name]:
            target = "ok" if r["first_units_s"] < 10 else "MISSED"
            print(f"  {label}: first units on screen {r['first_units_s']:5.1f} s (target < 10 s: {target}; "
                  f"{r['first_units_images']:,} images, process CPU {r['first_units_cpu_s']:.1f} s)"
                  + ("" if first_units_only else "; whole "), end="")
            if first_units_only:
                print(f"; load average {r['load_before']:.1f} before, {r['load_after']:.1f} after, cores "
                      f"{r['machine_busy']:.0%} busy")
                continue
            print(f"dissection {r['dissection_done_s']:5.1f} s ({r['dissection_done_images']:,} images); every "
                  f"workspace {r['all_workspaces_s']:5.1f} s, CPU {r['all_workspaces_cpu_s']:.1f} s with children")
            print(f"    longest GUI stall {r['longest_stall_s'] * 1000:.0f} ms; machine meanwhile: load average "
                  f"{r['load_before']:.1f} before, {r['load_after']:.1f} after, cores {r['machine_busy']:.0%} busy "
                  f"(this run's share of all cores: {r['all_workspaces_cpu_s'] / (r['all_workspaces_s'] * cores):.0%})")
    if results["before"] and results["after"] and not first_units_only:
        def median(name: str, key: str) -> float:
            values = sorted(r[key] for r in results[name])
            return values[len(values) // 2]

        for key, what in (("first_units_s", "first units"), ("dissection_done_s", "whole dissection"),
                          ("all_workspaces_s", "every workspace"), ("all_workspaces_cpu_s", "CPU in all")):
            print(f"  ratio before / after, {what}: {median('before', key) / median('after', key):.1f}x")
    header = results["after"][-1]["first_units_header"]
    print(f"  the first units' header (after): {header}")


def measure_launch(runs: int, kernel: str) -> list[dict[str, float]]:
    results = []
    for _ in range(runs + 1):  # the first run fills the demo caches and is not counted
        out = subprocess.run([sys.executable, __file__, "--child", "--kernel", kernel], capture_output=True,
                             text=True, timeout=900)
        if out.returncode != 0:
            raise SystemExit(f"launch failed:\n{out.stderr[-3000:]}")
        results.append(json.loads(out.stdout.strip().splitlines()[-1]))
    return results[1:]


class LatencyProbe:
    """A repeating timer that records how late each tick comes: the GUI thread's stalls."""

    def __init__(self, interval_ms: int = 5):
        from PySide6.QtCore import QTimer

        self.interval = interval_ms / 1000
        self.gaps: list[float] = []
        self._last = time.perf_counter()
        self.timer = QTimer()
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)

    def _tick(self) -> None:
        now = time.perf_counter()
        self.gaps.append(now - self._last - self.interval)
        self._last = now

    def start(self) -> None:
        self._last = time.perf_counter()
        self.timer.start()

    def stop(self) -> float:
        self.timer.stop()
        return max(self.gaps, default=0.0)


def wait_for(condition) -> float:
    """Turn the event loop until `condition()` holds; the seconds it took."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    t0 = time.perf_counter()

    def poll() -> None:
        if condition():
            loop.quit()
        else:
            QTimer.singleShot(1, poll)

    QTimer.singleShot(0, poll)
    loop.exec()
    return time.perf_counter() - t0


def heavy_batches(n_images: int, batch: int = 32):
    """The heavy work: render demo images and run the demo model on them, batch by batch."""
    from probescope.core.demo.sampler import DemoSampler
    from probescope.core.models.loading import load_model

    model = load_model("demo")
    sampler = DemoSampler(n_images)
    for images in sampler.batches(batch):
        model.module(model.preprocess(images))
        yield


def decode_thumbnails(dataset, images, ctx) -> None:
    """The I/O-side work: decode dataset images and scale them to thumbnails."""
    from PIL import Image

    for i in images:
        ctx.check()
        with Image.open(dataset.image_path(i)) as image:
            image.convert("RGB").resize((96, 96))


def measure_idle(seconds: float) -> float:
    """Longest gap of an idle event loop: the machine's own scheduling noise, the floor under any stall."""
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    QApplication.instance() or QApplication([sys.argv[0]])
    probe = LatencyProbe()
    loop = QEventLoop()
    probe.start()
    QTimer.singleShot(int(seconds * 1000), loop.quit)
    loop.exec()
    return probe.stop()


def measure_stall(n_images: int) -> tuple[float, float, float]:
    """(longest stall with the pool, longest stall with the same work in the GUI thread, pool wall time)."""
    import torch
    from PySide6.QtCore import QEventLoop
    from PySide6.QtWidgets import QApplication

    from probescope.app.compute.threads import keep_gui_responsive
    from probescope.app.compute.workers import WorkerPool, compute_threads
    from probescope.jobs.inputs import OpenRequest, open_task
    from probescope.jobs.protocol import IO

    torch.set_num_threads(compute_threads())  # as the app does: one core stays free for the GUI thread
    app = QApplication.instance() or QApplication([sys.argv[0]])
    pool = WorkerPool()
    loop = QEventLoop()
    dataset: list = []
    pool.submit(open_task(OpenRequest("dataset", "demo")), name="dataset", executor=IO,
                on_result=lambda loaded: (dataset.append(loaded.value), loop.quit()))
    loop.exec()

    keep_gui_responsive()  # as `probescope gui` does after startup
    probe = LatencyProbe()
    probe.start()
    t0 = time.perf_counter()
    pending = [2]

    def done(_result=None) -> None:
        pending[0] -= 1
        if pending[0] == 0:
            loop.quit()

    pool.submit(lambda ctx: heavy_batches(n_images), name="heavy", on_result=done)
    pool.submit(lambda ctx: decode_thumbnails(dataset[0], range(min(300, dataset[0].n_images)), ctx),
                name="thumbnails", executor=IO, on_result=done)
    loop.exec()
    pooled_wall = time.perf_counter() - t0
    pooled = probe.stop()
    pool.shutdown()

    probe = LatencyProbe()
    probe.start()

    def naive() -> None:  # the same model work, in the GUI thread
        with torch.inference_mode():
            for _ in heavy_batches(n_images):
                pass
        loop.quit()

    from PySide6.QtCore import QTimer

    QTimer.singleShot(20, naive)
    loop.exec()
    app.processEvents()
    naive_stall = probe.stop()
    return pooled, naive_stall, pooled_wall


def measure_gallery_stream(n_images: int) -> dict[str, float]:
    """Stream `n_images` demo samples into the Gallery workspace: IS redraws per second and the longest stall."""
    import torch
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from probescope.app.compute.threads import keep_gui_responsive
    from probescope.app.compute.workers import WorkerPool, compute_threads
    from probescope.app.gallery.workspace import GalleryWorkspace
    from probescope.app.window.state import AppState, Loaded
    from probescope.core.data.broden import BrodenDataset
    from probescope.core.demo.dataset import ensure_demo_dataset
    from probescope.core.demo.sampler import DemoSampler
    from probescope.core.models.loading import load_model
    from probescope.core.scoring.classifiers import classifier_of_model
    from probescope.core.scoring.settings import WINDOW

    torch.set_num_threads(compute_threads())
    app = QApplication.instance() or QApplication([sys.argv[0]])
    model = load_model("demo")
    pool, state = WorkerPool(), AppState()
    ws = GalleryWorkspace(pool)
    ws.resize(1400, 900)
    ws.show()
    ws.load_state(state)
    state.set(Loaded("dataset", "demo", "demo", BrodenDataset.open(ensure_demo_dataset())))  # FID's reference
    state.set(Loaded("model", "demo", "demo", model))
    loop = QEventLoop()
    ws.initial_work_done.connect(loop.quit)
    keep_gui_responsive()
    readings: set[int] = set()  # the N of each FID/KID reading shown while streaming
    show = ws.real.panel.show_readout
    ws.real.panel.show_readout = lambda fast, *a: (fast is None or readings.add(fast.n), show(fast, *a))
    probe = LatencyProbe()
    probe.start()
    t0 = time.perf_counter()
    state.set(Loaded("samples", "demo", "demo", DemoSampler(n_images)))
    loop.exec()
    wall = time.perf_counter() - t0
    stall = probe.stop()
    updates = ws.score_updates
    fid = ws.real.fast.values.get("FID") if ws.real.fast is not None else None
    pool.shutdown()
    ws.close()

    classifier = classifier_of_model(model)
    sampler = DemoSampler(n_images)
    probe = LatencyProbe()
    probe.start()

    def naive() -> None:  # the same rendering and classification, in the GUI thread
        with torch.inference_mode():
            for images in sampler.batches(WINDOW.batch_size):
                classifier.classify(images)
        loop.quit()

    QTimer.singleShot(20, naive)
    loop.exec()
    app.processEvents()
    return {"wall_s": wall, "updates_per_s": updates / wall, "stall_s": stall, "naive_stall_s": probe.stop(),
            "images_per_s": n_images / wall, "fid_per_s": len(readings) / wall, "fid": fid}


def measure_gallery_scroll(n_items: int, frames: int = 150) -> dict[str, float]:
    """A gallery of `n_items` scored demo samples (thumbnails rendered lazily in the pool): time until the first
    screen is complete, then a scroll top to bottom in `frames` jumps (paint time per frame, longest stall).
    The naive way renders every thumbnail up front; its cost is measured on 100 images and scaled to `n_items`."""
    import numpy as np
    from PySide6.QtCore import QEventLoop, QTimer
    from PySide6.QtWidgets import QApplication

    from probescope.app.compute.workers import WorkerPool
    from probescope.app.gallery.thumbnails import thumbnail_task
    from probescope.core.demo.sampler import DemoSampler
    from probescope.jobs.protocol import IO
    from probescope.jobs.scoring.samples import GalleryScores
    from probescope.jobs.scoring.stream import fit_thumbnail
    from probescope.widgets.gallery.grid import GalleryGrid
    from probescope.widgets.images import to_qimage

    app = QApplication.instance() or QApplication([sys.argv[0]])
    rng = np.random.default_rng(0)
    scores = GalleryScores()
    for _ in range(0, n_items, 5000):
        scores.add_logits(rng.normal(size=(5000, 14)) * 4)
    pool = WorkerPool()
    sampler = DemoSampler(n_items)
    grid = GalleryGrid(96)
    grid.resize(900, 800)
    grid.show()

    def load(wanted: list[int]) -> None:
        pool.submit(lambda ctx: thumbnail_task([(k, lambda k=k: sampler.sample(k)[0]) for k in wanted], ctx),
                    name="thumbs", key="thumbs", executor=IO,
                    on_partial=lambda images: (grid.thumbnails.add_thumbnails(images), grid.viewport().update()))

    grid.thumbnails_wanted.connect(load)
    loop = QEventLoop()
    t0 = time.perf_counter()
    grid.thumbnails.set_items(scores.order("kl", True), scores.top_classes, scores.top_probs,
                              [f"class {k}" for k in range(14)], scores.kl(), "KL")
    app.processEvents()
    shown = time.perf_counter() - t0

    def complete() -> None:
        if not grid.missing_thumbnails():
            loop.quit()
        else:
            QTimer.singleShot(5, complete)

    QTimer.singleShot(5, complete)
    loop.exec()
    first_screen = time.perf_counter() - t0
    bar = grid.verticalScrollBar()
    paint_times: list[float] = []
    probe = LatencyProbe()
    step = [0]

    def scroll() -> None:
        if step[0] > frames:
            loop.quit()
            return
        bar.setValue(round(bar.maximum() * step[0] / frames))
        t = time.perf_counter()
        grid.viewport().repaint()
        paint_times.append(time.perf_counter() - t)
        step[0] += 1

    timer = QTimer()
    timer.setInterval(16)
    timer.timeout.connect(scroll)
    probe.start()
    timer.start()
    loop.exec()
    timer.stop()
    stall = probe.stop()
    grid.thumbnails_wanted.disconnect(load)
    pool.shutdown()
    grid.close()

    t0 = time.perf_counter()
    for k in range(100):  # the naive way: every thumbnail rendered before the grid shows
        to_qimage(fit_thumbnail(sampler.sample(k)[0]))
    eager = (time.perf_counter() - t0) / 100 * n_items
    paint = sorted(paint_times)
    return {"shown_s": shown, "first_screen_s": first_screen, "eager_s": eager,
            "paint_median_s": paint[len(paint) // 2], "paint_max_s": paint[-1], "stall_s": stall}


def report_gallery(n_stream: int, n_items: int) -> None:
    idle = measure_idle(2.0)
    print(f"longest GUI stall, idle event loop (noise floor of this machine now): {idle * 1000:.1f} ms")
    s = measure_gallery_stream(n_stream)
    print(f"gallery stream of {n_stream} demo samples: {s['images_per_s']:.0f} images/s, live IS redrawn "
          f"{s['updates_per_s']:.1f} times/s (target >= 10: {'ok' if s['updates_per_s'] >= 10 else 'MISSED'})")
    print(f"  FID and KID against the demo dataset's 1,500 images redrawn {s['fid_per_s']:.1f} times/s (target >= "
          f"10: {'ok' if s['fid_per_s'] >= 10 else 'MISSED'}); final FID {s['fid']:.3f}")
    print(f"  longest GUI stall while streaming:              {s['stall_s'] * 1000:.1f} ms  (target < 50 ms: "
          f"{'ok' if s['stall_s'] < 0.05 else 'MISSED'})")
    print(f"  same batches classified in the GUI thread:      {s['naive_stall_s'] * 1000:.0f} ms stall "
          f"(ratio naive / pool {s['naive_stall_s'] / max(s['stall_s'], 1e-6):.0f}x)")
    g = measure_gallery_scroll(n_items)
    print(f"gallery of {n_items:,} scored samples: grid shown in {g['shown_s'] * 1000:.0f} ms, first screen of "
          f"thumbnails complete in {g['first_screen_s'] * 1000:.0f} ms; rendering every thumbnail up front would "
          f"take {g['eager_s']:.0f} s (ratio {g['eager_s'] / g['first_screen_s']:.0f}x)")
    print(f"  scrolling top to bottom in jumps: paint per frame median {g['paint_median_s'] * 1000:.1f} ms, max "
          f"{g['paint_max_s'] * 1000:.1f} ms; longest stall {g['stall_s'] * 1000:.1f} ms (target < 50 ms: "
          f"{'ok' if g['stall_s'] < 0.05 else 'MISSED'})")


def measure_dissection_switch(n_units: int) -> dict[str, float]:
    """Dissection workspace on the demo world (layer dissected, from the cache after the first run): time from
    selecting a unit to its top images with overlays on screen, for units whose overlays were prefetched (arrow
    keys: the table's neighbours are built in the pool while the user looks), revisited (cached) and cold (built
    on demand: the naive way, without prefetch or cache)."""
    from probescope.jobs.inputs import OpenRequest, open_task

    ws, pool, state = dissection_workspace()
    wait = wait_for
    for kind in ("model", "dataset"):
        pool.submit(open_task(OpenRequest(kind, "demo")), name="open", on_result=state.set)
        wait(lambda kind=kind: state.get(kind) is not None)
    wait(lambda: ws.is_initial_work_done and not pool.active())
    wait(lambda: not pool.active() and not ws.unit_images.prefetch_timer.isActive())
    order = ws.units.visible_units()
    start = order.index(ws.unit)
    steps = order[start + 1:start + 1 + n_units]
    prefetched, revisited, cold = [], [], []
    for _ in steps:  # arrow key down, then a pause while the prefetch of the neighbours runs
        t0 = time.perf_counter()
        ws.step(1)
        wait(lambda: ws.unit_images.ready)
        prefetched.append(time.perf_counter() - t0)
        wait(lambda: not pool.active() and not ws.unit_images.prefetch_timer.isActive())
    for u in reversed(steps):
        t0 = time.perf_counter()
        ws.units.select_unit(u)
        wait(lambda: ws.unit_images.ready)
        revisited.append(time.perf_counter() - t0)
    far = order[-n_units:]
    ws.unit_images.prefetch_timer.timeout.disconnect()
    for u in far:  # cold: no cache, no prefetch
        ws.unit_images.forget()
        wait(lambda: not pool.active())
        t0 = time.perf_counter()
        ws.units.select_unit(u)
        wait(lambda: ws.unit_images.ready)
        cold.append(time.perf_counter() - t0)
    pool.shutdown()
    ws.close()

    def med(x: list[float]) -> float:
        return sorted(x)[len(x) // 2]

    return {"prefetched_s": med(prefetched), "prefetched_max_s": max(prefetched), "revisited_s": med(revisited),
            "cold_s": med(cold), "cold_max_s": max(cold), "k": ws.view.controls.k.value()}


def dissection_workspace():
    """(workspace, pool, state): a shown Dissection workspace bound to an empty state."""
    from PySide6.QtWidgets import QApplication

    from probescope.app.compute.threads import keep_gui_responsive
    from probescope.app.compute.workers import WorkerPool
    from probescope.app.dissection.workspace import DissectionWorkspace
    from probescope.app.window.state import AppState

    QApplication.instance() or QApplication([sys.argv[0]])
    pool = WorkerPool()
    state = AppState()
    ws = DissectionWorkspace(pool)
    ws.resize(1600, 1000)
    ws.show()
    ws.load_state(state)
    keep_gui_responsive()  # as `probescope gui` does
    return ws, pool, state


BATCH_MANIFEST = """[dataset]
path = "data"

[settings]
searches = {searches}
sweep_length = {sweep}

[[models]]
spec = "demo"
layers = ["layer3", "layer4"]
"""


def measure_batch_browse(n_images: int) -> dict[str, float]:
    """Run a batch, then browse it in the workspace; then dissect its second layer live (the naive way)."""
    import tempfile

    from probescope.app.dissection.workspace import DissectionWorkspace
    from probescope.core.demo.dataset import write_demo_dataset
    from probescope.jobs.inputs import OpenRequest, open_task

    s = DissectionWorkspace.default_settings
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["PROBESCOPE_CACHE"] = str(root / "cache")
        write_demo_dataset(root / "data", n_images=n_images)
        (root / "zoo.toml").write_text(BATCH_MANIFEST.format(searches=json.dumps(list(s.searches)),
                                                             sweep=s.sweep_length))
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-m", "probescope", "batch", str(root / "zoo.toml"), "--out",
                        str(root / "zoo")], check=True, stderr=subprocess.DEVNULL)
        out["batch_s"] = time.perf_counter() - t0
        ws, pool, state = dissection_workspace()
        probe = LatencyProbe()
        probe.start()
        ws.open_batch(root / "zoo")
        out["open_s"] = wait_for(lambda: ws.is_initial_work_done and not pool.active())
        t0 = time.perf_counter()
        ws.show_job(1)
        wait_for(lambda: ws.data.layer == "layer4" and ws.unit_images.ready)
        out["switch_s"] = time.perf_counter() - t0
        out["stall_s"] = probe.stop()
        saved = ws.data.result
        pool.submit(open_task(OpenRequest("dataset", str(root / "data"))), name="open", on_result=state.set)
        wait_for(lambda: state.dataset is not None)
        t0 = time.perf_counter()
        probe = LatencyProbe()
        probe.start()
        pool.submit(open_task(OpenRequest("model", "demo")), name="open", on_result=state.set)  # layer4: its default
        wait_for(lambda: ws.data.origin == "" and ws.data.result.complete and ws.unit_images.ready
                 and not pool.active())
        out["live_s"] = time.perf_counter() - t0
        out["live_stall_s"] = probe.stop()
        assert ws.data.result.units.keys() == saved.units.keys()
        out["same"] = float(all(ws.data.result.units[u].to_json() == saved.units[u].to_json() for u in saved.units))
        pool.shutdown()
        ws.close()
    return out


def report_batch(n_images: int) -> None:
    d = measure_batch_browse(n_images)
    print(f"batch browsing (demo model layer3 + layer4, {n_images} images, the workspace's default settings):")
    print(f"  probescope batch, sequential:                    {d['batch_s']:.1f} s")
    print(f"  open the folder to the first layer on screen:    {d['open_s']:.2f} s")
    print(f"  click the other layer to it on screen:           {d['switch_s']:.2f} s")
    print(f"  longest GUI stall meanwhile:                     {d['stall_s'] * 1000:.0f} ms (target < 50 ms: "
          f"{'ok' if d['stall_s'] < 0.05 else 'MISSED'})")
    print(f"  naive: dissect layer4 in the workspace:          {d['live_s']:.1f} s (ratio naive / saved "
          f"{d['live_s'] / max(d['switch_s'], 1e-6):.0f}x; same units: {'yes' if d['same'] else 'NO'}); longest "
          f"GUI stall {d['live_stall_s'] * 1000:.0f} ms")


def report_dissection(n_units: int) -> None:
    d = measure_dissection_switch(n_units)
    print(f"dissection workspace, switching units ({d['k']} top images with overlays, median of {n_units}):")
    print(f"  arrow keys (neighbours prefetched in the pool): {d['prefetched_s'] * 1000:.1f} ms, max "
          f"{d['prefetched_max_s'] * 1000:.1f} ms (target < 100 ms: "
          f"{'ok' if d['prefetched_max_s'] < 0.1 else 'MISSED'})")
    print(f"  back to a unit seen before (cached):            {d['revisited_s'] * 1000:.1f} ms")
    print(f"  naive (built on demand, no cache):              {d['cold_s'] * 1000:.1f} ms, max "
          f"{d['cold_max_s'] * 1000:.1f} ms "
          f"(ratio naive / prefetched {d['cold_s'] / max(d['prefetched_s'], 1e-6):.0f}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--images", type=int, default=512, help="images the heavy task classifies")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kernel", default="thread", help=argparse.SUPPRESS)  # the child's
    parser.add_argument("--gallery", action="store_true", help="measure only the Gallery workspace (stream, scroll)")
    parser.add_argument("--stream", type=int, default=400, help="demo samples the gallery benchmark streams")
    parser.add_argument("--gallery-images", type=int, default=50_000, help="scored samples the gallery scrolls")
    parser.add_argument("--dissection", action="store_true",
                        help="measure only the Dissection workspace (unit switching with overlays)")
    parser.add_argument("--units", type=int, default=10, help="units the dissection benchmark switches through")
    parser.add_argument("--batch", action="store_true", help="measure only browsing a batch output folder")
    parser.add_argument("--batch-images", type=int, default=600, help="demo images the batch benchmark dissects")
    parser.add_argument("--fresh", action="store_true", help="measure only launches on an empty cache folder")
    parser.add_argument("--fresh-runs", type=int, default=1, help="fresh launches of each version")
    parser.add_argument("--before", default="75344cc", help="git revision of the fresh launch's 'before'")
    parser.add_argument("--first-units-only", action="store_true", help="with --fresh: each launch ends once the "
                        "Dissection's first units are on screen")
    parser.add_argument("--load", type=int, default=0, help="CPU-bound processes run during the fresh launches "
                        "(2: the issue's busy machine)")
    args = parser.parse_args()
    if args.child:
        launch_child(args.kernel, args.first_units_only)
        return
    if args.fresh:
        report_fresh(args.fresh_runs, args.before, args.load, args.first_units_only)
        return
    if args.gallery:
        report_gallery(args.stream, args.gallery_images)
        return
    if args.dissection:
        report_dissection(args.units)
        return
    if args.batch:
        report_batch(args.batch_images)
        return
    launches = {kernel: measure_launch(args.runs, kernel) for kernel in ("thread", "local")}

    def median(kernel: str, key: str) -> float:
        values = sorted(r[key] for r in launches[kernel] if r.get(key) is not None)
        return values[len(values) // 2] if values else float("nan")

    print(f"launch on the demo world (cached), median of {args.runs}: before = the computation in the window's "
          f"process (--kernel thread) | after = a compute kernel (--kernel local, the default)")
    rows = [("interactive_s", "to an interactive window (s)", 1.5), ("torch_import_s", "  of which importing torch (s)",
            None), ("interactive_cpu_s", "  CPU time to interactive, window process (s)", None),
            ("all_workspaces_s", "to every workspace loaded (s)", None),
            ("longest_stall_s", "longest GUI stall until then (s)", 0.05),
            ("peak_rss_mb", "peak memory, window process (MB)", None),
            ("kernel_peak_rss_mb", "peak memory, kernel process (MB)", None)]
    for key, label, target in rows:
        before, after = median("thread", key), median("local", key)
        verdict = "" if target is None else f"  (target < {target:g}: {'ok' if after < target else 'MISSED'})"
        print(f"  {label:<48} {before:9.3f} | {after:9.3f}{verdict}")
    print(f"  torch in the window's process: {launches['thread'][0]['torch_in_window']} | "
          f"{launches['local'][0]['torch_in_window']}")
    idle = measure_idle(3.0)
    pooled, naive, wall = measure_stall(args.images)
    print(f"longest GUI stall, heavy task in the pool:       {pooled * 1000:.1f} ms  (target < 50 ms: "
          f"{'ok' if pooled < 0.05 else 'MISSED'}; task took {wall:.1f} s)")
    print(f"longest GUI stall, idle event loop (noise floor): {idle * 1000:.1f} ms")
    print(f"longest GUI stall, same work in the GUI thread:  {naive * 1000:.0f} ms")
    print(f"ratio naive / pool:                              {naive / max(pooled, 1e-6):.0f}x")


if __name__ == "__main__":
    main()
