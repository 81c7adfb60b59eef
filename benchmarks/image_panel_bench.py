"""The Dissection workspace's Image panel, GUI side, offscreen: time from asking for an image (`show_image`) to its
view on screen (segmented in the I/O pool, then the picture and tables filled in the GUI thread), the GUI thread's
share of it (`_shown`, CPU time of the GUI thread, so other jobs on a shared machine do not distort it), and the
longest event-loop stall meanwhile (a 5 ms timer records its own lateness), against
running the same job in the GUI thread (the naive way: the stall is then the whole computation).

The demo world (the demo model's layer4, its dataset at --images images, the workspace's default settings, cached
after the first run). Run with `nice`:

    python benchmarks/image_panel_bench.py [--images 1500] [--requests 30]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--images", type=int, default=1500)
    parser.add_argument("--requests", type=int, default=30)
    args = parser.parse_args()

    import numpy as np
    from PySide6.QtCore import QElapsedTimer, QTimer
    from PySide6.QtWidgets import QApplication

    from probescope.app.compute.workers import WorkerPool
    from probescope.app.dissection.workspace import DissectionWorkspace
    from probescope.app.window.state import AppState
    from probescope.jobs import inputs
    from probescope.jobs.inputs import OpenRequest, open_task
    from probescope.jobs.per_image import DatasetRef, image_view_job
    from probescope.jobs.protocol import TaskContext

    app = QApplication.instance() or QApplication([])
    inputs.DEMO_DATASET_IMAGES = args.images
    pool, state = WorkerPool(), AppState()
    ws = DissectionWorkspace(pool)
    ws.resize(1600, 950)
    ws.show()
    ws.load_state(state)

    def wait(done, limit_s: float = 1800.0) -> None:
        end = time.monotonic() + limit_s
        while not done():
            app.processEvents()
            time.sleep(0.001)
            if time.monotonic() > end:
                raise TimeoutError("the benchmark's inputs did not load")

    for request in (OpenRequest("model", "demo"), OpenRequest("dataset", "demo")):
        pool.submit(open_task(request), name="open", on_result=state.set)
        wait(lambda: not pool.active())
    wait(lambda: ws.is_initial_work_done and not pool.active())
    panel, d = ws.image_view, ws.data
    ws.area.raise_panel("image")
    wait(lambda: not pool.active())
    gaps: list[float] = []
    clock = QElapsedTimer()
    timer = QTimer()
    timer.setInterval(5)

    def tick() -> None:
        gaps.append(clock.restart())

    timer.timeout.connect(tick)
    shown_ms: list[float] = []
    original = panel._shown

    def timed_shown(wanted, view) -> None:
        start = time.thread_time()
        original(wanted, view)
        panel.canvas.repaint()
        shown_ms.append(1000 * (time.thread_time() - start))

    panel._shown = timed_shown
    images = np.linspace(0, d.dataset.n_images - 1, args.requests).astype(int).tolist()
    totals = []
    clock.start()
    timer.start()
    for image in images:
        start = time.perf_counter()
        panel.show_image(image)
        wait(lambda i=image: panel.view is not None and panel.view.image == i and not pool.active())
        totals.append(1000 * (time.perf_counter() - start))
    timer.stop()
    stall = max(gaps) - 5 if gaps else 0.0
    units = np.mean([len(panel.view.segmentation.units)])
    # naive: the same job in the GUI thread
    naive = []
    for image in images:
        start = time.thread_time()
        view = image_view_job(TaskContext(session=pool.session), dataset=DatasetRef.of(d.dataset), result=d.result,
                              activations=np.asarray(d.activations[image]), image=image, method="iou",
                              min_iou=panel.min_iou.value())
        panel._shown = original
        panel._wanted = ("naive",)
        original(("naive",), view)
        panel.canvas.repaint()
        naive.append(1000 * (time.thread_time() - start))
    print(f"Image panel, demo world ({d.dataset.n_images} images, layer4, {len(images)} requests, ~{units:.0f} units "
          f"fire in the last):")
    print(f"  request to shown: median {np.median(totals):.1f} ms, max {max(totals):.1f} ms (pool)")
    print(f"  GUI thread's CPU per view (picture, tables, canvas painted): median {np.median(shown_ms):.1f} ms, "
          f"max {max(shown_ms):.1f} ms")
    print(f"  longest event-loop stall while requesting (wall; the machine's load shows in it): {stall:.1f} ms")
    print(f"  naive, the job in the GUI thread: median {np.median(naive):.1f} ms of its CPU per view, max "
          f"{max(naive):.1f} ms: {np.median(naive) / max(np.median(shown_ms), 1e-3):.1f}x the pool's GUI share")
    print(f"  (load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    pool.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
