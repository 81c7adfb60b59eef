"""The Gallery's per-sample realism, nearest real images and copy flags (issue 28, part 3), what the window pays for
them per 1,000 samples at the demo's scale: the demo sampler streamed into the Gallery workspace against the demo
world's 1,500 images (the demo classifier's 128-d features, k = 3), offscreen.

Measured, per 1,000 samples: the GUI thread's time in `SampleRealism` (keeping in step, publishing each result to
the scores, the grid's copy tags and the panels, showing the selected sample), the worker time of the neighbours
jobs (I/O pool), a sort by realism (the grid re-ordered) and a selection (the Selected image panel's realism and
neighbours redrawn; the thumbnails then come from the pool). Every time is the CPU time of the thread that ran it
(time.thread_time), so a busy machine does not inflate it. Beside them, the naive way:
`sample_neighbours` of all samples in the GUI thread when the stream stops, the stall it would cause, against the
longest single GUI-thread call of the window's way. The core's own cost at the users' scale is in
benchmarks/per_image_bench.py (part 3).

    python benchmarks/gallery_realism_bench.py [--samples 1000] [--runs 3]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
HERE = Path(__file__).resolve().parent


class Clock:
    """GUI-thread CPU seconds (time.thread_time: other processes on a busy machine do not count) spent in the
    wrapped calls, a call made inside another wrapped one counted once, and the longest outermost call."""

    def __init__(self) -> None:
        self.total, self.longest, self.calls, self._depth = 0.0, 0.0, 0, 0

    def wrap(self, fn):
        def timed(*args, **kwargs):
            self._depth += 1
            start = time.thread_time()
            try:
                return fn(*args, **kwargs)
            finally:
                self._depth -= 1
                if self._depth == 0:
                    spent = time.thread_time() - start
                    self.total += spent
                    self.longest = max(self.longest, spent)
                    self.calls += 1
        return timed


def run_once(n: int) -> dict[str, float]:
    import numpy as np
    from gui_bench import wait_for
    from PySide6.QtWidgets import QApplication

    import probescope.app.gallery.realism as realism_module
    from probescope.app.compute.workers import WorkerPool
    from probescope.app.gallery.workspace import GalleryWorkspace
    from probescope.app.window.state import AppState
    from probescope.core.data.broden import BrodenDataset
    from probescope.core.demo.dataset import ensure_demo_dataset
    from probescope.core.demo.sampler import DemoSampler
    from probescope.core.scoring.realism import sample_neighbours
    from probescope.jobs.inputs import Loaded, OpenRequest, hold_model
    from probescope.jobs.scoring.neighbours import neighbours_job

    app = QApplication.instance() or QApplication([sys.argv[0]])
    worker = {"cpu": 0.0, "jobs": 0}

    def timed_job(ctx, **kwargs):
        start = time.thread_time()
        try:
            return neighbours_job(ctx, **kwargs)
        finally:
            worker["cpu"] += time.thread_time() - start
            worker["jobs"] += 1

    realism_module.neighbours_job = timed_job
    gui, whole = Clock(), Clock()
    pool, state = WorkerPool(), AppState()
    ws = GalleryWorkspace(pool)
    for name in ("update", "_publish", "show_sample"):
        setattr(ws.realism, name, gui.wrap(getattr(ws.realism, name)))
    ws.update_views = whole.wrap(ws.update_views)
    ws.resize(1400, 900)
    ws.show()
    ws.load_state(state)
    from probescope.core.models.loading import load_model

    model = load_model("demo")
    state.set(Loaded("dataset", "demo", "demo", BrodenDataset.open(ensure_demo_dataset())))
    info = hold_model(pool.session, OpenRequest("model", "demo"), "cpu", model)
    state.set(Loaded("model", "demo", model.name, info))
    start = time.perf_counter()
    state.set(Loaded("samples", "demo", "demo", DemoSampler(n)))
    wait_for(lambda: ws.scores.n == n and not ws.streaming and ws.gallery.realism.done == n)
    wall = time.perf_counter() - start
    c = ws.controls
    sort = Clock()
    ws.views.order_changed = sort.wrap(ws.views.order_changed)
    c.descending.setChecked(True)
    c.sort.setCurrentIndex(c.sort.findData("realism"))
    select = Clock()
    shown = select.wrap(ws.realism.show_sample)
    for i in range(0, n, max(1, n // 100)):
        shown(i)
    app.processEvents()
    live = ws.real.live
    features, reference = np.array(live.features), live.reference
    naive_start = time.thread_time()
    sample_neighbours(features, reference.features, live.prc_k)  # the radii computed too, as a first result would
    naive = time.thread_time() - naive_start
    copies = ws.gallery.realism.result.copies
    pool.shutdown()
    ws.close()
    per = 1000 / n
    return {"gui_ms": 1000 * gui.total * per, "gui_longest_ms": 1000 * gui.longest, "gui_calls": gui.calls,
            "views_ms": 1000 * whole.total * per, "worker_ms": 1000 * worker["cpu"] * per, "jobs": worker["jobs"],
            "sort_ms": 1000 * sort.longest, "select_ms": 1000 * select.total / select.calls,
            "naive_ms": 1000 * naive, "wall_s": wall, "copies": copies}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, str(HERE))
    runs = [run_once(args.samples) for _ in range(args.runs)]
    best = {key: min(r[key] for r in runs) for key in runs[0]}
    n = args.samples
    print(f"demo sampler, {n:,} samples streamed against the demo world's 1,500 images (128-d, k = 3); best of "
          f"{args.runs} runs; {best['copies']:.0f} possible copies flagged")
    print(f"  GUI thread in SampleRealism: {best['gui_ms']:.1f} ms per 1,000 samples ({best['gui_calls']:.0f} calls, "
          f"longest {best['gui_longest_ms']:.1f} ms); beside it, the workspace's redraws (update_views, "
          f"SampleRealism.update among them): {best['views_ms']:.0f} ms per 1,000 samples")
    print(f"  worker (I/O pool): {best['worker_ms']:.1f} ms CPU per 1,000 samples in {best['jobs']:.0f} jobs")
    print(f"  sort by realism: {best['sort_ms']:.1f} ms; a selection: {best['select_ms']:.2f} ms")
    print(f"  naive (sample_neighbours of every sample in the GUI thread): a {best['naive_ms']:.0f} ms stall, "
          f"{best['naive_ms'] / best['gui_longest_ms']:.1f}x the window's longest call")


if __name__ == "__main__":
    main()
