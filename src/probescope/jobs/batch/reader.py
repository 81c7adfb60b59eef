"""Reading a batch's output folder back (for the GUI's dissection workspace and scripts): status.json's overview of
every job, and where each finished layer's dissection.json is."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from probescope.core.errors import InputError
from probescope.jobs.batch.status import FORMAT, STATUS_FILE


@dataclass(frozen=True)
class BatchJob:
    """One (model, layer) of a batch as status.json last described it; `result` is its dissection.json, which
    exists once the layer is merged."""

    model: str
    layer: str
    folder: str  # relative to the batch folder
    state: str  # waiting, extracting, running, done, failed
    units: int | None
    chunks_done: int
    chunks_total: int
    result: Path

    @property
    def finished(self) -> bool:
        return self.result.is_file()


@dataclass(frozen=True)
class BatchOverview:
    """A batch folder's status: overall state (running, done, failed, stopped), chunk counts, the error that stopped
    it, when status.json was last written (seconds since the epoch) and every job in manifest order."""

    folder: Path
    state: str
    manifest: str
    chunks_done: int
    chunks_total: int
    error: str | None
    updated: float
    jobs: tuple[BatchJob, ...]


def is_batch_folder(path: str | Path) -> bool:
    return (Path(path) / STATUS_FILE).is_file()


def read_batch(out: str | Path) -> BatchOverview:
    """The overview of the batch in `out`; InputError (naming the file) when there is no or a damaged status.json."""
    out = Path(out)
    path = out / STATUS_FILE
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
        if not isinstance(doc, dict) or doc.get("format") != FORMAT:
            raise InputError("not a probescope batch status", path)
        jobs = tuple(BatchJob(str(j["model"]), str(j["layer"]), str(j["folder"]), str(j["state"]),
                              None if j["units"] is None else int(j["units"]), int(j["chunks_done"]),
                              int(j["chunks_total"]), out / str(j["folder"]) / "dissection.json")
                     for j in doc["jobs"])
        return BatchOverview(out, str(doc["state"]), str(doc["manifest"]), int(doc["chunks_done"]),
                             int(doc["chunks_total"]), None if doc["error"] is None else str(doc["error"]),
                             float(doc["updated"]), jobs)
    except FileNotFoundError:
        if not out.is_dir():
            raise InputError("no such folder", out) from None
        raise InputError("not a batch output folder (no status.json)", out) from None
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"damaged batch status ({type(exc).__name__}: {exc})", path) from None


def open_batch(out: str | Path) -> list[tuple[str, str, Path]]:
    """(model, layer, dissection.json path) of every merged layer in a batch output folder, in manifest order
    (layers still running are left out; `read_batch` says how far they are)."""
    return [(j.model, j.layer, j.result) for j in read_batch(out).jobs if j.finished]
