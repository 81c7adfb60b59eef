"""Dissect a layer into a file, resumably: the one driver behind `probescope dissect` and the GUI's dissection (kept
in its cache folder), and the one writer of a layer's outputs, which a batch uses for its merged layers too.

    previous, why = resumable(path, settings, dataset_info, model_info, n_units)
    for result in dissect_in_blocks(path, store, activations, settings, previous=previous, ...):
        ...                                   # saved after every block of units; the last one is the whole layer
    write_layer(folder, result)               # dissection.json, tally.csv, correlation.csv

Every finished unit is appended at once to a journal beside the result (`dissection.journal.jsonl`: a header line
with the run's identity, then one JSON line per unit, flushed), so a killed run loses at most the units it was on
(one per process).
The journal is merged into the result file atomically after each block (blocks double in size, so the number of
rewrites grows with the log of the units) and when the run stops; `resumable` reads both.
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import replace
from pathlib import Path
from typing import IO

import numpy as np

from probescope.core.dissection.correlation import accuracy_correlation, write_correlation_csv
from probescope.core.dissection.engine import add_units, layer_result
from probescope.core.dissection.labels import LabelStore
from probescope.core.dissection.parallel import UnitWorkers, worker_count
from probescope.core.dissection.results import DissectionResult, UnitResult
from probescope.core.dissection.settings import DissectionSettings
from probescope.core.errors import InputError
from probescope.core.tasks import CancelCheck, ProgressCallback

FIRST_BLOCK = 8  # units in the first block; blocks then double, so the first units are saved (and shown) early
LAYER_OUTPUTS = ("dissection.json", "tally.csv", "correlation.csv")
JOURNAL_FORMAT = "probescope-dissection-journal/1"


def run_identity(settings: DissectionSettings, dataset_info: dict, model_info: dict, n_units: int) -> tuple:
    """The identity a result of these inputs has (see DissectionResult.identity)."""
    return (settings.protocol(), dataset_info, model_info, n_units)


def journal_path(path: Path) -> Path:
    """The journal of finished units kept beside a result file (`dissection.json` -> `dissection.journal.jsonl`)."""
    return path.with_name(f"{path.stem}.journal.jsonl")


class UnitJournal:
    """Append-only record of the units finished since the result file was last written."""

    def __init__(self, path: Path):
        self.path = journal_path(path)
        self._fh: IO[str] | None = None

    def append(self, result: DissectionResult, unit: int) -> None:
        """Record `result.units[unit]` (the first record of a journal writes `result`'s identity first)."""
        try:
            if self._fh is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fh = open(self.path, "w", encoding="utf-8")
                header = {k: v for k, v in result.to_json().items() if k not in ("units", "complete")}
                self._fh.write(json.dumps({**header, "format": JOURNAL_FORMAT}, allow_nan=False) + "\n")
            self._fh.write(json.dumps(result.units[unit].to_json(), allow_nan=False) + "\n")
            self._fh.flush()
        except OSError as exc:
            raise InputError(f"could not record unit {unit} ({exc.strerror or exc}); the units saved so far are "
                             "kept", self.path) from None

    def clear(self) -> None:
        """Forget the records (their units are in the result file now)."""
        self.close()
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.path)

    def close(self) -> None:
        fh, self._fh = self._fh, None
        if fh is not None:
            with contextlib.suppress(OSError):  # a write that failed said so (append's InputError); its retry too
                fh.close()


def read_journal(path: Path) -> DissectionResult | None:
    """The result a journal records (identity and units; a line cut short by a kill ends it), None if there is none
    or it is unreadable."""
    try:
        with open(journal_path(path), encoding="utf-8") as fh:
            header = json.loads(fh.readline())
            if header.get("format") != JOURNAL_FORMAT:
                return None
            result = DissectionResult.from_json({**header, "units": []})
            for line in fh:
                try:
                    unit = UnitResult.from_json(json.loads(line))
                except (ValueError, KeyError, TypeError, IndexError):
                    break  # the last record, cut short
                result.units[unit.unit] = unit
    except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError):
        return None
    return result


def resumable(path: Path, settings: DissectionSettings, dataset_info: dict, model_info: dict,
              n_units: int) -> tuple[DissectionResult | None, str]:
    """(the result saved at `path` and in its journal when it was dissected with the same settings and inputs, else
    None; and why not).

    A damaged result file raises InputError (it may be somebody's result: the caller decides whether to start
    over); a damaged journal is ignored (it only repeats work)."""
    identity = run_identity(settings, dataset_info, model_info, n_units)
    previous = DissectionResult.load(path) if path.exists() else None
    why = ""
    if previous is not None and previous.identity() != identity:
        previous, why = None, f"{path}: other settings, dataset or model; starting over"
    journal = read_journal(path)
    if journal is not None and journal.identity() == identity:
        if previous is None:
            previous, why = journal, ""
        else:
            previous.units.update(journal.units)
        previous.complete = len(previous.units) == n_units
    return previous, why


def dissect_in_blocks(path: Path, store: LabelStore, activations: np.ndarray, settings: DissectionSettings,
                      units: Sequence[int] | None = None, *, previous: DissectionResult | None = None,
                      correct: np.ndarray | None = None, dataset_info: dict, model_info: dict,
                      progress: ProgressCallback | None = None, cancel: CancelCheck | None = None,
                      spare_cores: int = 0) -> Iterator[DissectionResult]:
    """Dissect the asked `units` (default all) that `previous` lacks, in `settings.jobs` processes (parallel.py;
    one: in this one; automatic: one per core less `spare_cores`); every unit is journaled as it finishes, and after
    FIRST_BLOCK units, then after blocks twice as large, the result is saved atomically to `path` and a copy of it
    yielded (the last one is the whole run). A cancelled or failed run saves what it finished first, so the next run
    resumes there."""
    result, todo = layer_result(store, activations, settings, units, correct, previous, dataset_info, model_info)
    journal = UnitJournal(path)
    if journal.path.exists():  # a stopped run's units (in `previous` when resumable): into the result file first
        if previous is not None:
            previous.save(path)
        journal.clear()
    jobs = worker_count(settings.jobs, len(todo), store.n_images, spare_cores)
    unsaved = False
    try:
        with UnitWorkers(store, jobs) if jobs > 1 else contextlib.nullcontext() as workers:
            block = block_end = FIRST_BLOCK
            for done, unit in enumerate(add_units(result, todo, store, activations, settings, correct=correct,
                                                  progress=progress, cancel=cancel, workers=workers), 1):
                journal.append(result, unit)
                unsaved = True
                if done == block_end or done == len(todo):
                    result.save(path)
                    journal.clear()
                    unsaved = False
                    block *= 2
                    block_end += block
                    yield replace(result, units=dict(result.units))
        if not todo:
            result.save(path)
            yield replace(result, units=dict(result.units))
    except BaseException:
        if unsaved:  # merge what the unfinished block did; if this write fails too, the journal keeps it
            with contextlib.suppress(InputError):
                result.save(path)
                journal.clear()
        raise
    finally:
        journal.close()


def write_layer(folder: Path, result: DissectionResult) -> None:
    """dissection.json, tally.csv (with a column group per search the settings asked for) and, when the model's
    predictions were known, correlation.csv: a layer's outputs, as `probescope dissect` and a batch write them."""
    folder.mkdir(parents=True, exist_ok=True)
    result.save(folder / "dissection.json")
    result.write_tally(folder / "tally.csv", DissectionSettings.from_mapping(result.settings).searches)
    if any(u.accuracy is not None for u in result.units.values()):
        write_correlation_csv(folder / "correlation.csv", accuracy_correlation(result))
