"""GUI responsiveness, offscreen.

1. Launch: time from process start to an interactive window (shown, event loop turning) and to every workspace
   showing its first content, with the demo world already cached. Target: interactive under 3 s.
2. Stall: the longest gap of the GUI event loop (a 5 ms timer records its own lateness) while a heavy task runs
   in the worker pool (the demo model over rendered images in the compute thread while the I/O pool decodes
   dataset thumbnails). Target: under 50 ms. The same work run in the GUI thread is the naive baseline; the ratio
   says how much the pool saves.

Usage: python benchmarks/gui_bench.py [--runs 3] [--images 512]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

T0 = time.perf_counter()
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def launch_child() -> None:
    """Runs in a fresh interpreter: start the app on the demo world and report when it is usable."""
    import torch  # as the app: torch before Qt

    torch_s = time.perf_counter() - T0
    from probescope.app.workers import compute_threads

    torch.set_num_threads(compute_threads())
    torch_cpu_s = time.process_time()
    from PySide6.QtCore import QTimer
    from PySide6.QtWidgets import QApplication

    import tempfile

    from probescope.app.main_window import MainWindow
    from probescope.app.settings import Settings

    app = QApplication([sys.argv[0]])
    times: dict[str, float] = {"torch_import_s": torch_s, "torch_import_cpu_s": torch_cpu_s}
    with tempfile.TemporaryDirectory() as tmp:
        window = MainWindow(Settings(os.path.join(tmp, "s.ini")), device="cpu")
        window.open_demo_world()
        window.show()

        def first_turn() -> None:  # the first event-loop turn after show(): the window answers input from here
            times["interactive_s"] = time.perf_counter() - T0
            times["interactive_cpu_s"] = time.process_time()  # all threads: less sensitive to a busy machine

        def check() -> None:
            if all(ws.is_initial_work_done for ws in window.workspaces.values()) and not window.pool.active():
                times["all_workspaces_s"] = time.perf_counter() - T0
                app.quit()

        QTimer.singleShot(0, first_turn)
        window.pool.finished.connect(check)
        for ws in window.workspaces.values():
            ws.initial_work_done.connect(check)
        window.pool.failed.connect(lambda _h, e: (print(e.details, file=sys.stderr), app.exit(1)))
        code = app.exec()
        window.close()
    print(json.dumps(times))
    sys.exit(code)


def measure_launch(runs: int) -> list[dict[str, float]]:
    results = []
    for _ in range(runs + 1):  # the first run fills the demo caches and is not counted
        out = subprocess.run([sys.executable, __file__, "--child"], capture_output=True, text=True, timeout=900)
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


def heavy_batches(n_images: int, batch: int = 32):
    """The heavy work: render demo images and run the demo model on them, batch by batch."""
    from probescope.core.demo.sampler import DemoSampler
    from probescope.core.models import load_model

    model = load_model("demo")
    sampler = DemoSampler(n_images)
    for images in sampler.batches(batch):
        model.module(model.preprocess(images))
        yield


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

    from probescope.app.workers import IO, WorkerPool
    from probescope.app.ws_dissection import overlay_thumbnails
    from probescope.app.sources import OpenRequest, open_task

    from probescope.app.workers import compute_threads

    torch.set_num_threads(compute_threads())  # as the app does: one core stays free for the GUI thread
    app = QApplication.instance() or QApplication([sys.argv[0]])
    pool = WorkerPool()
    loop = QEventLoop()
    dataset: list = []
    pool.submit(open_task(OpenRequest("dataset", "demo")), name="dataset", executor=IO,
                on_result=lambda loaded: (dataset.append(loaded.value), loop.quit()))
    loop.exec()

    probe = LatencyProbe()
    probe.start()
    t0 = time.perf_counter()
    pending = [2]

    def done(_result=None) -> None:
        pending[0] -= 1
        if pending[0] == 0:
            loop.quit()

    pool.submit(lambda ctx: heavy_batches(n_images), name="heavy", on_result=done)
    pool.submit(lambda ctx: overlay_thumbnails(dataset[0], list(range(min(300, dataset[0].n_images))), ctx),
                name="thumbnails", executor=IO, on_partial=lambda items: None, on_result=done)
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--images", type=int, default=512, help="images the heavy task classifies")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        launch_child()
        return
    launches = measure_launch(args.runs)
    def median(key: str) -> float:
        return sorted(r[key] for r in launches)[len(launches) // 2]

    interactive = median("interactive_s")
    print(f"launch to interactive window (median of {args.runs}): {interactive:.2f} s  (target < 3 s: "
          f"{'ok' if interactive < 3 else 'MISSED'})")
    print(f"  of which importing torch (before Qt):          {median('torch_import_s'):.2f} s")
    print(f"  CPU time to interactive (process, all threads): {median('interactive_cpu_s'):.2f} s, of which torch "
          f"import {median('torch_import_cpu_s'):.2f} s")
    print(f"launch to every workspace loaded (median):      {median('all_workspaces_s'):.2f} s")
    idle = measure_idle(3.0)
    pooled, naive, wall = measure_stall(args.images)
    print(f"longest GUI stall, heavy task in the pool:       {pooled * 1000:.1f} ms  (target < 50 ms: "
          f"{'ok' if pooled < 0.05 else 'MISSED'}; task took {wall:.1f} s)")
    print(f"longest GUI stall, idle event loop (noise floor): {idle * 1000:.1f} ms")
    print(f"longest GUI stall, same work in the GUI thread:  {naive * 1000:.0f} ms")
    print(f"ratio naive / pool:                              {naive / max(pooled, 1e-6):.0f}x")


if __name__ == "__main__":
    main()
