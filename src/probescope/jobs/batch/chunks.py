"""Per-chunk results of a layer and their merge into the layer's dissection.json / tally.csv.

A chunk is a run of units dissected by one task. Its result is written atomically as
`<layer folder>/chunks/units-<first>-<last>.json`, in the dissection.json format (a partial result), so a stopped
batch keeps every finished chunk; a chunk counts only when its settings, dataset and model identity match the job's.
Merging takes the units of all matching chunks; the merged file equals what `probescope dissect` writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from probescope.core.atomic import write_json
from probescope.core.dissection.engine import dissect
from probescope.core.dissection.labels import LabelStore
from probescope.core.dissection.results import DissectionResult
from probescope.core.dissection.saved import LAYER_OUTPUTS
from probescope.core.dissection.settings import DissectionSettings
from probescope.core.errors import InputError

CHUNK_DIR = "chunks"


def dissect_chunk(store: LabelStore, activations: np.ndarray, settings: DissectionSettings, units: list[int],
                  correct: np.ndarray | None, dataset_info: dict, model_info: dict) -> dict:
    """Dissect `units` of a layer; the partial result as dissection.json data (the task body, local or remote)."""
    return dissect(store, activations, settings, units, correct=correct, dataset_info=dataset_info,
                   model_info=model_info).to_json()


def plan_chunks(units: Sequence[int], size: int) -> list[list[int]]:
    """Consecutive runs of at most `size` units."""
    units = list(units)
    return [units[i:i + size] for i in range(0, len(units), size)]


def chunk_path(folder: Path, units: Sequence[int]) -> Path:
    return folder / CHUNK_DIR / f"units-{units[0]:06d}-{units[-1]:06d}.json"


def write_chunk(folder: Path, units: Sequence[int], result_json: dict) -> Path:
    """Write a chunk's result atomically (a crash never leaves half a chunk)."""
    path = chunk_path(folder, units)
    write_json(path, result_json, indent=None)
    return path


def finished_chunks(folder: Path, key: tuple) -> list[DissectionResult]:
    """The chunk results in `folder` that belong to the job identified by `key` (others are ignored: they came from
    other settings or inputs and are overwritten when their units are redone)."""
    out = []
    for path in sorted((folder / CHUNK_DIR).glob("units-*.json")):
        try:
            chunk = DissectionResult.load(path)
        except InputError:
            continue  # damaged (never by us: writes are atomic); its units are simply redone
        if chunk.identity() == key:
            out.append(chunk)
    return out


def merge_chunks(chunks: Sequence[DissectionResult]) -> DissectionResult:
    """One layer's result from its chunks (complete when every unit is present)."""
    if not chunks:
        raise ValueError("no chunks to merge")
    first = chunks[0]
    merged = DissectionResult(settings=first.settings, dataset=first.dataset, model=first.model,
                              labels=first.labels, n_units=first.n_units)
    for chunk in chunks:
        merged.units.update(chunk.units)
    merged.complete = len(merged.units) == merged.n_units
    return merged


def remove_layer_outputs(folder: Path) -> None:
    """Remove a layer's merged files (before its missing chunks are computed, so stale ones never show)."""
    for name in LAYER_OUTPUTS:
        (folder / name).unlink(missing_ok=True)
