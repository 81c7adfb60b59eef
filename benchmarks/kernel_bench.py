"""The compute kernel (probescope.jobs.kernel) against running in the window's own threads, in one run.

1. Start: spawn to ready of a kernel without torch and with it, against starting a bare interpreter.
2. Round trip of a tiny Job through the pool: submit to its result in the GUI thread, kernel 'local' against
   'thread' (the same Job in this process's compute thread); medians.
3. A 16 MB and a 64 MB float32 array from one process to the other: out of band (shared-memory files the receiver
   maps) against in band (the same pickle with the array inside it, as a plain Connection.send does); and a 64 MB
   memmap of a cache file, which travels as its name. Medians of request to array in hand.
4. Cancel: from `cancel()` to the task's `finished` for a task inside a 60 s C call (the kernel is restarted), and
   for a task that yields every 5 ms (it stops at its next step); and the restart's cost, to the next result.
5. Bytes each way per message kind (in the pickles, through shared memory, as memmaps' names) for the runs above.

Usage: python benchmarks/kernel_bench.py [--runs 50]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from probescope.jobs.kernel.transport import Channel
from probescope.jobs.protocol import Job, Progress, TaskContext


def tiny(ctx: TaskContext) -> int:
    return 1


def array(ctx: TaskContext, mb: int) -> np.ndarray:
    return np.ones(mb * (1 << 20) // 4, dtype=np.float32)


def sleep_in_c(ctx: TaskContext, seconds: float):
    yield Progress(0.0, "sleeping")
    time.sleep(seconds)
    return "woke"


def steps(ctx: TaskContext, n: int):
    for i in range(n):
        time.sleep(0.005)
        yield Progress(i / n)
    return n


def _serve_arrays(conn, out_of_band: bool, mapped_path: str) -> None:
    """The other process of part 3: answers each request (kind, mb) with that array, through a Channel (out of
    band) or a plain Connection.send (in band, the baseline)."""
    channel = Channel(conn)
    arrays = {mb: np.ones(mb * (1 << 20) // 4, dtype=np.float32) for mb in (16, 64)}
    mapped = np.load(mapped_path, mmap_mode="r")
    while True:
        try:
            kind, mb = conn.recv()
        except EOFError:
            return
        if out_of_band:
            channel.send(("result", mb, mapped if kind == "mapped" else arrays[mb]))
        else:
            conn.send(arrays[mb])


def _median_ms(times: list[float]) -> float:
    return 1000 * statistics.median(times)


def start_times(runs: int) -> None:
    from probescope.jobs.kernel.process import KernelConfig, main

    context = multiprocessing.get_context("spawn")
    rows = {}
    for label, config in (("kernel without torch", KernelConfig(torch=False)), ("kernel with torch", KernelConfig())):
        times = []
        for _ in range(runs):
            ours, theirs = context.Pipe()
            t0 = time.perf_counter()
            process = context.Process(target=main, args=(theirs, config), daemon=True)
            process.start()
            theirs.close()
            channel = Channel(ours)
            assert channel.receive()[0] == "ready"
            times.append(time.perf_counter() - t0)
            channel.send(("stop", 0, None))
            process.join()
        rows[label] = _median_ms(times)
    bare = []
    for _ in range(runs):
        t0 = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        bare.append(time.perf_counter() - t0)
    rows["bare interpreter"] = _median_ms(bare)
    print(f"1. start, median of {runs}:")
    for label, ms in rows.items():
        print(f"   {label:24s} {ms:8.1f} ms   x{ms / rows['bare interpreter']:.1f} of a bare interpreter")


def transfer(runs: int) -> None:
    context = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory() as folder:
        mapped_path = str(Path(folder) / "act.npy")
        np.save(mapped_path, np.ones((64, 1 << 18), dtype=np.float32))  # 64 MB
        results: dict[tuple[str, int], float] = {}
        for out_of_band in (True, False):
            ours, theirs = context.Pipe()
            process = context.Process(target=_serve_arrays, args=(theirs, out_of_band, mapped_path), daemon=True)
            process.start()
            theirs.close()
            channel = Channel(ours)
            requests = [("array", 16), ("array", 64)] + ([("mapped", 64)] if out_of_band else [])
            for kind, mb in requests:
                times = []
                for _ in range(runs + 1):
                    t0 = time.perf_counter()
                    ours.send((kind, mb))
                    value = channel.receive()[2] if out_of_band else ours.recv()
                    float(value.reshape(-1)[-1])  # in hand: its last page read
                    times.append(time.perf_counter() - t0)
                    del value
                label = "memmap by name" if kind == "mapped" else ("out of band" if out_of_band else "in band")
                results[(label, mb)] = _median_ms(times[1:])
            ours.close()
            process.join()
    print(f"3. an array from the other process, median of {runs}:")
    for (label, mb), ms in results.items():
        ratio = results[("in band", mb)] / ms
        print(f"   {mb:3d} MB {label:16s} {ms:8.2f} ms  {mb / 1024 / (ms / 1000):6.2f} GB/s   x{ratio:.1f} faster "
              "than in band")


def through_the_pool(runs: int) -> None:
    from PySide6.QtCore import QCoreApplication, QEventLoop

    from probescope.app.compute.workers import WorkerPool
    from probescope.jobs.kernel.process import KernelConfig

    app = QCoreApplication.instance() or QCoreApplication([])  # noqa: F841  (kept: the pools need it)

    def wait(pool, job, cancel: bool = False) -> float:
        """Seconds from submit (with `cancel`: from the cancel, at the task's first progress) to its finished."""
        loop, got = QEventLoop(), {}

        def progressed(handle, _progress):
            if cancel and handle is got["handle"] and "t0" not in got:
                got["t0"] = time.perf_counter()
                handle.cancel()

        def finished(handle):
            if handle is got["handle"]:
                got["t1"] = time.perf_counter()
                loop.quit()

        pool.progress.connect(progressed)
        pool.finished.connect(finished)
        t0 = time.perf_counter()
        got["handle"] = pool.submit(job, name="job")
        loop.exec()
        pool.progress.disconnect(progressed)
        pool.finished.disconnect(finished)
        return got["t1"] - got.get("t0", t0)

    rows = {}
    pools = {kernel: WorkerPool(kernel=kernel, kernel_config=KernelConfig(torch=False)) for kernel in ("thread",
                                                                                                        "local")}
    for kernel, pool in pools.items():
        wait(pool, Job(tiny))  # started: threads, kernel process
        rows[("tiny Job", kernel)] = _median_ms([wait(pool, Job(tiny)) for _ in range(runs)])
        for mb in (16, 64):
            rows[(f"{mb} MB result", kernel)] = _median_ms([wait(pool, Job(array, {"mb": mb}))
                                                            for _ in range(max(3, runs // 5))])
    print(f"2. submit to result in the GUI thread, median of {runs} (arrays: {max(3, runs // 5)}):")
    for what in ("tiny Job", "16 MB result", "64 MB result"):
        local, thread = rows[(what, "local")], rows[(what, "thread")]
        print(f"   {what:14s} kernel {local:8.2f} ms   thread {thread:8.2f} ms   x{local / thread:.1f}")

    pool = pools["local"]
    stuck, yielding, after = [], [], []
    for _ in range(max(3, runs // 10)):
        stuck.append(wait(pool, Job(sleep_in_c, {"seconds": 60}), cancel=True))
        after.append(wait(pool, Job(tiny)))
        yielding.append(wait(pool, Job(steps, {"n": 10_000}), cancel=True))
    print(f"4. cancel to finished, median of {len(stuck)} (deadline {1000 * pool.kernel.cancel_deadline_s:.0f} ms):")
    print(f"   inside a 60 s C call       {_median_ms(stuck):8.1f} ms (kernel restarted: {pool.kernel.restarts})")
    print(f"   a task yielding every 5 ms {_median_ms(yielding):8.1f} ms")
    warm = rows[("tiny Job", "local")]
    print(f"   the next tiny Job after a restart {_median_ms(after):8.1f} ms   x{_median_ms(after) / warm:.0f} of a "
          "warm kernel's")
    print("5. bytes the window received from its kernels, per message kind:")
    for kind, traffic in sorted(pool.kernel.received.items()):
        print(f"   {kind:10s} {traffic.messages:6d} messages  in band {traffic.in_band / traffic.messages:10.0f} B "
              f"each  out of band {traffic.out_of_band / traffic.messages / (1 << 20):8.2f} MB each")
    sent = pool.kernel.sent["submit"]
    print(f"   (sent: {sent.messages} submits, {sent.in_band / sent.messages:.0f} B each in band)")
    for pool in pools.values():
        pool.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=50)
    args = parser.parse_args()
    os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    start_times(max(3, args.runs // 10))
    through_the_pool(args.runs)
    transfer(max(5, args.runs // 5))


if __name__ == "__main__":
    main()
