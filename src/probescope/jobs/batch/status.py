"""Batch progress: `status.json` in the output folder (rewritten atomically after every chunk, so the GUI or a
script can read it at any time) and one line per event on stderr.

    {"format": "probescope-batch/1", "state": "running" | "done" | "failed" | "stopped", "manifest": "...",
     "chunks_done": 12, "chunks_total": 40, "updated": 1764500000.0, "error": null,
     "jobs": [{"model": "demo", "layer": "layer4", "folder": "demo/layer4", "state": "waiting" | "extracting" |
               "running" | "done" | "failed", "units": 128, "chunks_done": 3, "chunks_total": 8}, ...]}
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

from probescope.core.atomic import write_json

FORMAT = "probescope-batch/1"
STATUS_FILE = "status.json"


def stderr_log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class BatchStatus:
    """Per-job and overall progress of a batch, mirrored to status.json and to `log` (stderr by default)."""

    def __init__(self, out: Path, manifest: Path, jobs: list[tuple[str, str, str]],
                 log: Callable[[str], None] | None = stderr_log):
        self.path = out / STATUS_FILE
        self.log = log
        self.doc: dict = {"format": FORMAT, "state": "running", "manifest": str(manifest.resolve()),
                          "chunks_done": 0, "chunks_total": 0, "updated": time.time(), "error": None,
                          "jobs": [{"model": m, "layer": layer, "folder": folder, "state": "waiting", "units": None,
                                    "chunks_done": 0, "chunks_total": 0} for m, layer, folder in jobs]}
        self._by_folder = {j["folder"]: j for j in self.doc["jobs"]}
        self.write()

    def job(self, folder: str) -> dict:
        return self._by_folder[folder]

    def set_state(self, folder: str, state: str) -> None:
        self.job(folder)["state"] = state
        self.write()

    def start_layer(self, folder: str, units: int, done: int, total: int) -> None:
        """A layer's chunks are known: `done` of `total` were finished by an earlier run."""
        job = self.job(folder)
        job.update(units=units, chunks_done=done, chunks_total=total, state="running")
        self.doc["chunks_done"] += done
        self.doc["chunks_total"] += total
        if done:
            self._say(f"{folder}: resuming, {done} of {total} chunks already done")
        self.write()

    def chunk_done(self, folder: str) -> None:
        job = self.job(folder)
        job["chunks_done"] += 1
        self.doc["chunks_done"] += 1
        self._say(f"{folder}: chunk {job['chunks_done']}/{job['chunks_total']} "
                  f"(all jobs: {self.doc['chunks_done']}/{self.doc['chunks_total']})")
        self.write()

    def finish(self, state: str, error: str | None = None) -> None:
        self.doc.update(state=state, error=error)
        self._say(f"batch {state}" + (f": {error}" if error else ""))
        self.write()

    def _say(self, message: str) -> None:
        if self.log is not None:
            total = max(1, self.doc["chunks_total"])
            self.log(f"[{100 * self.doc['chunks_done'] / total:5.1f}%] {message}")

    def write(self) -> None:
        self.doc["updated"] = time.time()
        write_json(self.path, self.doc)
