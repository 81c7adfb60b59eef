"""The scale drill's GUI steps: the real MainWindow, offscreen, opened as `probescope gui --dataset ... --model ...`
opens it, driven by a script that measures what a user waits for. Run by scale_drill.py, one process per step;
prints one JSON object as its last line.

    python benchmarks/scale_gui.py dissection --dataset D --model SPEC [--units 50] [--wait-units 56]
    python benchmarks/scale_gui.py similarity --judgments F --catalog C --image-root R
    python benchmarks/scale_gui.py gallery --samples S.npz
    python benchmarks/scale_gui.py dissection --compare [--fresh-dissection] ...   # before/after: see below

`--kernel thread|local` says where the window computes (default local, as `probescope gui`: a compute kernel
process). `--compare` runs the step twice in one run, as child processes: 'before' with the computation in the
window's own process (thread) and 'after' with the kernel, and prints the two side by side with the targets (the
longest GUI stall while the layer dissects < 50 ms, a unit switch < 100 ms, the Gallery's end-of-stream stall
< 50 ms) and the peak memory of each process (the window's; the kernel's, from its VmHWM). `--fresh-dissection`
removes the cache's saved dissections first, so the layer is dissected while the window is measured (its
activations stay cached).

The GUI thread's stalls are measured by a 5 ms timer that records how late each tick comes (as gui_bench.py does),
with the GUI thread's own CPU time during each gap (a long gap with little CPU is the machine or another thread
holding the GIL, not work done in the GUI thread); a watchdog thread samples the GUI thread's Python stack whenever a
tick is 40 ms late, so each long stall comes with where it happened. Stalls are reported per phase (what the script
was doing then). The first phase is the launch: the inputs opened and the window laid out and painted for the first
time, in the event loop's first turn, before the kernel has started or any task has run (measured: 53-60 ms on
the demo at 1600 x 1000; `gui_bench.py` measures the launch); the targets apply to the phases after it.
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
import traceback
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
T0 = time.perf_counter()

from probescope.app.window.launch import limit_blas_threads  # noqa: E402  (before NumPy, as the app)

limit_blas_threads()


LAUNCH = "launch: the inputs opened and the window's first layout and paint (no task has run yet)"


class StallProbe:
    """A 5 ms timer that records its own lateness per phase, and a watchdog that samples the GUI thread's stack
    during long gaps."""

    def __init__(self, interval_ms: int = 5, watch_s: float = 0.04):
        from PySide6.QtCore import QTimer

        self.interval = interval_ms / 1000
        self.watch_s = watch_s
        self.phase = LAUNCH
        self.ticks = 0  # timer ticks so far (the first one: the event loop has turned once)
        self.worst: dict[str, tuple[float, float]] = {}  # phase -> (longest gap, GUI-thread CPU during it)
        self.stacks: dict[str, list] = {}  # phase -> [(gap ms, GUI-thread CPU ms, stack)] of the longest stalls
        self._last = time.perf_counter()
        self._last_cpu = time.thread_time()
        self._sampled = False
        self._main = threading.get_ident()
        self.timer = QTimer()
        self.timer.setInterval(interval_ms)
        self.timer.timeout.connect(self._tick)
        self._stop = threading.Event()
        self._pending_stack: list[str] | None = None
        self._watch = threading.Thread(target=self._watchdog, daemon=True)

    def start(self) -> None:
        self._last, self._last_cpu = time.perf_counter(), time.thread_time()
        self.timer.start()
        self._watch.start()

    def set_phase(self, phase: str) -> None:
        self._tick()
        self.phase = phase

    def _tick(self) -> None:
        self.ticks += 1
        now, cpu = time.perf_counter(), time.thread_time()
        gap, used = now - self._last - self.interval, cpu - self._last_cpu
        self._last, self._last_cpu = now, cpu
        if gap > self.worst.get(self.phase, (-1.0, 0.0))[0]:
            self.worst[self.phase] = (gap, used)
        if self._pending_stack is not None and gap > 0.05:
            found = self.stacks.setdefault(self.phase, [])
            found.append((round(gap * 1000, 1), round(used * 1000, 1), self._pending_stack))
            found.sort(key=lambda x: -x[0])
            del found[5:]
        self._pending_stack = None
        self._sampled = False

    def _watchdog(self) -> None:
        while not self._stop.wait(0.01):
            if not self._sampled and time.perf_counter() - self._last > self.watch_s:
                frame = sys._current_frames().get(self._main)
                if frame is not None:
                    stack = traceback.extract_stack(frame)[-8:]
                    self._pending_stack = [f"{Path(f.filename).name}:{f.lineno} {f.name}" for f in stack]
                self._sampled = True

    def stop(self) -> None:
        self._tick()
        self.timer.stop()
        self._stop.set()

    def report(self) -> dict:
        return {"stall_ms": {k: round(v[0] * 1000, 1) for k, v in self.worst.items()},
                "stall_gui_cpu_ms": {k: round(v[1] * 1000, 1) for k, v in self.worst.items()},
                "max_stall_ms": round(max((v[0] for v in self.worst.values()), default=0.0) * 1000, 1),
                "stall_stacks": self.stacks}


def wait_for(condition, timeout: float = 3600.0) -> float:
    """Turn the event loop until `condition()` holds (or `timeout`); the seconds it took."""
    from PySide6.QtCore import QEventLoop, QTimer

    loop = QEventLoop()
    t0 = time.perf_counter()

    def poll() -> None:
        if condition() or time.perf_counter() - t0 > timeout:
            loop.quit()
        else:
            QTimer.singleShot(2, poll)

    QTimer.singleShot(0, poll)
    loop.exec()
    return time.perf_counter() - t0


def pause(seconds: float) -> None:
    wait_for(lambda: False, seconds)


def open_window(args: argparse.Namespace, workspace: str, size=(1600, 1000)):
    """The window as `probescope gui` opens it (same requests for the same flags); returns (app, window, probe)."""
    from probescope.app.compute.threads import keep_gui_responsive

    if args.kernel == "thread":  # as the app: torch before Qt, the thread count once
        import torch

        from probescope.app.compute.workers import compute_threads

        torch.set_num_threads(compute_threads())
    if args.fresh_dissection:
        from probescope.core.cache import cache_dir

        shutil.rmtree(cache_dir() / "dissection", ignore_errors=True)
    import tempfile

    from PySide6.QtWidgets import QApplication

    from probescope.app.window.launch import requests
    from probescope.app.window.main_window import MainWindow
    from probescope.app.window.saved_settings import Settings

    app = QApplication.instance() or QApplication([sys.argv[0]])
    from probescope.app.window.launch import add_arguments

    gui_parser = argparse.ArgumentParser()
    add_arguments(gui_parser)
    argv = [f"--{name.replace('_', '-')}={value}" for name in ("model", "dataset", "samples", "judgments", "catalog",
                                                              "image_root") if (value := getattr(args, name, None))]
    flags = gui_parser.parse_args(argv)  # the flags `probescope gui` would have, defaults included
    settings_dir = tempfile.mkdtemp(prefix="scale-gui-")
    window = MainWindow(Settings(Path(settings_dir) / "settings.ini"), device="cpu", kernel=args.kernel)
    keep_gui_responsive()
    window.resize(*size)
    window.set_workspace(workspace)
    probe = StallProbe()
    window.show()
    probe.start()
    window.pool.failed.connect(lambda _h, e: print(f"task failed: {e.message}", file=sys.stderr))
    for request in requests(flags):
        window.open(request)
    ticks = probe.ticks
    wait_for(lambda: probe.ticks > ticks)  # (launch: gui_bench.py measures it; the kernel is still starting)
    return app, window, probe


def rss_mb() -> float:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def kernel_traffic(window) -> dict[str, list[int]]:
    """What crossed to and from the compute kernel so far, per direction and message kind: [messages, bytes in
    the pickles, bytes through shared memory, bytes of memmaps sent by their file's name]."""
    kernel = window.pool.kernel
    if kernel is None:
        return {}
    return {f"{way} {kind}": [t.messages, t.in_band, t.out_of_band, t.mapped]
            for way, table in (("sent", kernel.sent), ("received", kernel.received)) for kind, t in table.items()}


def traffic_since(window, before: dict[str, list[int]]) -> dict[str, list[int]]:
    now = kernel_traffic(window)
    return {k: [a - b for a, b in zip(v, before.get(k, [0, 0, 0, 0]))] for k, v in now.items()
            if v != before.get(k)}


def memory(window) -> dict:
    """Peak resident memory of the window's process and of its compute kernel (None without one), MB."""
    kernel = window.pool.kernel
    peak = None
    if kernel is not None and kernel.pid is not None:
        with open(f"/proc/{kernel.pid}/status") as fh:
            peak = next(int(line.split()[1]) / 1024 for line in fh if line.startswith("VmHWM:"))
    return {"peak_rss_mb": rss_mb(), "kernel_peak_rss_mb": peak}


# ------------------------------------------------------------------------------------------------------- dissection
def dissection(args: argparse.Namespace) -> dict:
    from PySide6.QtCore import Qt
    from PySide6.QtTest import QTest

    app, window, probe = open_window(args, "dissection")
    ws = window.workspaces["dissection"]
    out: dict = {}
    t0 = time.perf_counter()
    probe.set_phase("open to first units")
    wait_for(lambda: ws.data is not None and ws.units.rowCount() > 0, args.timeout)
    out["first_rows_s"] = time.perf_counter() - t0
    wait_for(lambda: ws.unit >= 0 and ws.unit_images.ready, args.timeout)
    out["first_units_on_screen_s"] = time.perf_counter() - t0
    out["units_at_first_screen"] = len(ws.data.result.units) if ws.data else 0
    probe.set_phase("dissecting, waiting for units to browse")
    wait_for(lambda: ws.data is not None and (len(ws.data.result.units) >= args.wait_units or ws.data.result.complete),
             args.timeout)
    out["units_available_s"] = time.perf_counter() - t0
    out["units_available"] = len(ws.data.result.units)
    wait_for(lambda: ws.unit_images.ready and not ws.unit_images.prefetch_timer.isActive(), 120)
    probe.set_phase("unit switching (keyboard)")
    order = ws.units.visible_units()
    ws.units.select_unit(order[0])  # from the top of the table (sorted by compositional IoU), downwards
    wait_for(lambda: ws.unit == order[0] and ws.unit_images.ready, 120)
    pause(0.5)
    ws.units.setFocus()
    traffic = kernel_traffic(window)
    switches = []
    for _ in range(min(args.units, len(order) - 1)):
        before = ws.unit
        # (the table is sorted again when the layer completes, which may put the unit on its last row)
        last = ws.units.currentIndex().row() == ws.units.model().rowCount() - 1
        t = time.perf_counter()
        QTest.keyClick(ws.units, Qt.Key.Key_Up if last else Qt.Key.Key_Down)
        wait_for(lambda before=before: ws.unit != before and ws.unit_images.ready, 60)
        switches.append(time.perf_counter() - t)
        pause(0.3)  # the user looks at the unit; the neighbours are prefetched meanwhile
    switches.sort()
    out["switch_median_ms"] = switches[len(switches) // 2] * 1000 if switches else None
    out["switch_max_ms"] = switches[-1] * 1000 if switches else None
    out["switches"] = len(switches)
    out["kernel_traffic_while_switching"] = traffic_since(window, traffic)  # [messages, pickled, shm, mapped] B
    probe.set_phase("layer tab (plots of every unit)")
    t = time.perf_counter()
    ws.area.raise_panel("layer")
    app.processEvents()
    out["layer_tab_ms"] = (time.perf_counter() - t) * 1000
    out["layer_points"] = len(ws.data.result.units)
    pause(1.0)
    probe.set_phase("table sort")
    t = time.perf_counter()
    ws.units.sortByColumn(0, Qt.SortOrder.AscendingOrder)
    app.processEvents()
    out["table_sort_ms"] = (time.perf_counter() - t) * 1000
    out["table_rows"] = ws.units.rowCount()
    if args.screenshot:
        _screenshot(window, args.screenshot, probe)
    probe.stop()
    out.update(probe.report())
    out.update(memory(window))
    return out


def _screenshot(window, path: str, probe: StallProbe) -> None:
    from probescope.app.figures.export import render_image, write_png

    probe.set_phase("screenshot (the export's render: no user action)")

    window.set_workspace(window.current_workspace().name)
    write_png(render_image(window, scale=1.0), Path(path))


# ------------------------------------------------------------------------------------------------------- similarity
def similarity(args: argparse.Namespace) -> dict:
    from PySide6.QtCore import QPointF, Qt
    from PySide6.QtTest import QTest

    app, window, probe = open_window(args, "similarity")
    ws = window.workspaces["similarity"]
    shown = ws.shown  # the workspace's state: what is on show
    out: dict = {}
    t0 = time.perf_counter()
    probe.set_phase("open to trial list")
    wait_for(lambda: shown.trialset is not None and ws.trials.trial_list.list_model.rowCount() > 0
             and (shown.loaded is None or len(shown.loaded.value.trials) > 10_000), args.timeout)
    out["trial_list_s"] = time.perf_counter() - t0
    out["trial_rows"] = ws.trials.trial_list.list_model.rowCount()
    wait_for(lambda: shown.trial_shown, args.timeout)
    out["first_trial_s"] = time.perf_counter() - t0
    probe.set_phase("quick embedding")
    wait_for(lambda: shown.ensemble is not None, args.timeout)
    out["embedding_s"] = time.perf_counter() - t0
    wait_for(lambda: ws.is_initial_work_done, args.timeout)
    out["initial_work_s"] = time.perf_counter() - t0
    probe.set_phase("trial list: arrow keys")
    ws.trials.trial_list.setFocus()
    steps = []
    for _ in range(20):
        t = time.perf_counter()
        before = shown.trial
        QTest.keyClick(ws.trials.trial_list, Qt.Key.Key_Down)
        wait_for(lambda before=before: shown.trial != before, 30)
        steps.append(time.perf_counter() - t)
    out["trial_step_median_ms"] = sorted(steps)[len(steps) // 2] * 1000
    probe.set_phase("filters")
    filters = {}
    for name, action in (("grade: premium", lambda: ws.trials.grade_filter.setCurrentIndex(1)),
                         ("grade: all", lambda: ws.trials.grade_filter.setCurrentIndex(0)),
                         ("kept only", lambda: ws.trials.kept_only.setChecked(True)),
                         ("kept: all", lambda: ws.trials.kept_only.setChecked(False)),
                         ("sort by query", lambda: ws.trials.trial_list.sortByColumn(6, Qt.SortOrder.AscendingOrder)),
                         ("sort by #", lambda: ws.trials.trial_list.sortByColumn(0, Qt.SortOrder.AscendingOrder))):
        t = time.perf_counter()
        action()
        app.processEvents()
        filters[name] = round((time.perf_counter() - t) * 1000, 1)
    out["filter_ms"] = filters
    probe.set_phase("embedding scatter: hover")
    ws.area.raise_panel("embedding")
    pause(0.5)
    view = ws.embedding.view
    out["scatter_points"] = len(view._xy)
    plot = view.plot
    vb = plot.getPlotItem().vb
    hovers = []
    rng = __import__("numpy").random.default_rng(0)
    for _ in range(60):
        x, y = view._xy[rng.integers(len(view._xy))] if len(view._xy) else (0, 0)
        scene = vb.mapViewToScene(QPointF(float(x), float(y)))
        pos = plot.mapFromScene(scene)
        t = time.perf_counter()
        QTest.mouseMove(plot.viewport(), pos)
        app.processEvents()
        hovers.append(time.perf_counter() - t)
        pause(0.03)
    hovers.sort()
    out["hover_median_ms"] = hovers[len(hovers) // 2] * 1000
    out["hover_max_ms"] = hovers[-1] * 1000
    pause(0.5)
    if args.screenshot:
        ws.area.raise_panel("embedding")
        _screenshot(window, args.screenshot, probe)
    probe.stop()
    out.update(probe.report())
    out.update(memory(window))
    return out


# ---------------------------------------------------------------------------------------------------------- gallery
def gallery(args: argparse.Namespace) -> dict:
    from PySide6.QtCore import QTimer

    app, window, probe = open_window(args, "gallery")
    ws = window.workspaces["gallery"]
    out: dict = {}
    t0 = time.perf_counter()
    probe.set_phase("open to first screen")
    big = lambda: ws.samples_source is not None and (ws.samples_source.length or 0) > 10_000  # noqa: E731
    wait_for(lambda: big() and ws.scores.n > 0 and not ws.grid.missing_thumbnails(), args.timeout)
    out["first_screen_s"] = time.perf_counter() - t0
    probe.set_phase("scoring every sample (streaming)")
    traffic = kernel_traffic(window)
    wait_for(lambda: big() and not ws.streaming and ws.scores.n >= ws.samples_source.length, args.timeout)
    out["scored_s"] = time.perf_counter() - t0
    out["scored"] = ws.scores.n
    out["kernel_traffic_while_streaming"] = traffic_since(window, traffic)  # [messages, pickled, shm, mapped] B
    probe.set_phase("sort by KL")
    c = ws.controls
    t = time.perf_counter()
    c.sort.setCurrentIndex(c.sort.findData("kl"))
    app.processEvents()
    out["sort_kl_ms"] = (time.perf_counter() - t) * 1000
    wait_for(lambda: not ws.grid.missing_thumbnails(), 60)
    out["sorted_screen_ms"] = (time.perf_counter() - t) * 1000
    probe.set_phase("scroll top to bottom")
    bar = ws.grid.verticalScrollBar()
    frames, paint = 150, []
    step = [0]
    from PySide6.QtCore import QEventLoop

    loop = QEventLoop()

    def scroll() -> None:
        if step[0] > frames:
            loop.quit()
            return
        bar.setValue(round(bar.maximum() * step[0] / frames))
        t = time.perf_counter()
        ws.grid.viewport().repaint()
        paint.append(time.perf_counter() - t)
        step[0] += 1

    timer = QTimer()
    timer.setInterval(16)
    timer.timeout.connect(scroll)
    timer.start()
    loop.exec()
    timer.stop()
    paint.sort()
    out["scroll_paint_median_ms"] = paint[len(paint) // 2] * 1000
    out["scroll_paint_max_ms"] = paint[-1] * 1000
    wait_for(lambda: not ws.grid.missing_thumbnails(), 60)
    if args.screenshot:
        _screenshot(window, args.screenshot, probe)
    probe.stop()
    out.update(probe.report())
    out.update(memory(window))
    return out


FIGURES = {  # what the comparison prints for each step, with its target
    "dissection": [("first_units_on_screen_s", "first units on screen (s)", None),
                   ("dissecting_stall_ms", "longest GUI stall while the layer dissects (ms)", 50),
                   ("switch_median_ms", "unit switch while dissecting, median (ms)", None),
                   ("switch_max_ms", "unit switch while dissecting, max (ms)", 100),
                   ("max_stall_ms", "longest GUI stall, whole run (ms)", None)],
    "similarity": [("max_stall_ms", "longest GUI stall, whole run (ms)", 50)],
    "gallery": [("scored_s", "every sample scored (s)", None),
                ("stream_stall_ms", "longest GUI stall while streaming, end included (ms)", 50),
                ("max_stall_ms", "longest GUI stall, whole run (ms)", None)],
}


def compare(args: argparse.Namespace) -> int:
    """The step with the computation in the window's process (before) and in a kernel (after), side by side."""
    argv = [a for a in sys.argv[1:] if a != "--compare" and not a.startswith("--kernel")]
    runs = {}
    for kernel in ("thread", "local"):
        done = subprocess.run([sys.executable, __file__, *argv, f"--kernel={kernel}"], capture_output=True,
                              text=True, timeout=args.timeout + 120)
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            return 1
        runs[kernel] = json.loads(done.stdout.strip().splitlines()[-1])
        stalls = runs[kernel]["stall_ms"]
        runs[kernel]["dissecting_stall_ms"] = max((v for k, v in stalls.items() if "dissecting" in k or
                                                   "switching" in k or "first units" in k), default=None)
        runs[kernel]["stream_stall_ms"] = stalls.get("scoring every sample (streaming)")
    print(f"{args.workspace}: before (computation in the window's process) | after (compute kernel)")
    rows = [*FIGURES[args.workspace], ("peak_rss_mb", "peak memory, window process (MB)", None),
            ("kernel_peak_rss_mb", "peak memory, kernel process (MB)", None)]
    for key, label, target in rows:
        before, after = runs["thread"].get(key), runs["local"].get(key)
        verdict = "" if target is None or after is None else \
            f"  target < {target}: {'ok' if after < target else 'MISSED'}"
        print(f"  {label:<58} {_fmt(before):>9} | {_fmt(after):>9}{verdict}")
    print(json.dumps(runs))
    return 0


def _fmt(value) -> str:
    return "-" if value is None else f"{value:.1f}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("workspace", choices=("dissection", "similarity", "gallery"))
    parser.add_argument("--dataset")
    parser.add_argument("--model")
    parser.add_argument("--judgments")
    parser.add_argument("--catalog")
    parser.add_argument("--image-root")
    parser.add_argument("--samples")
    parser.add_argument("--units", type=int, default=50, help="units switched with the arrow key")
    parser.add_argument("--wait-units", type=int, default=56, help="units dissected before switching starts")
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("--screenshot")
    parser.add_argument("--kernel", choices=("thread", "local"), default="local")
    parser.add_argument("--fresh-dissection", action="store_true")
    parser.add_argument("--compare", action="store_true", help="before (thread) and after (local) in one run")
    args = parser.parse_args()
    if args.compare:
        return compare(args)
    result = {"dissection": dissection, "similarity": similarity, "gallery": gallery}[args.workspace](args)
    print(json.dumps(result))
    sys.stdout.flush()
    os._exit(0)  # the app's pool may still be dissecting: the measurement is done


if __name__ == "__main__":
    sys.exit(main())
