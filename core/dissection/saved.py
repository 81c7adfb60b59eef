"""Dissect a layer into a file, resumably: the one driver behind `probescope dissect` and the GUI's dissection (kept
in its cache folder), and the one writer of a layer's outputs, which a batch uses for its merged layers too.

    previous, why = resumable(path, settings, dataset_info, model_info, n_units)
    for result in dissect_in_blocks(path, store, activations, settings, previous=previous, ...):
        ...                                   # saved after every block of units; the last one is the whole layer
    write_layer(folder, result)               # dissection.json, tally.csv, correlation.csv
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np

from probescope.core.dissection.engine import dissect
from probescope.core.dissection.labels import LabelStore
from probescope.core.dissection.results import DissectionResult
from probescope.core.dissection.settings import DissectionSettings
from probescope.core.tasks import CancelCheck, ProgressCallback

FIRST_BLOCK = 8  # units in the first block; blocks then double, so the first units are saved (and shown) early
LAYER_OUTPUTS = ("dissection.json", "tally.csv", "correlation.csv")


def run_identity(settings: DissectionSettings, dataset_info: dict, model_info: dict, n_units: int) -> tuple:
    """The identity a result of these inputs has (see DissectionResult.identity)."""
    return (settings.protocol(), dataset_info, model_info, n_units)


def resumable(path: Path, settings: DissectionSettings, dataset_info: dict, model_info: dict,
              n_units: int) -> tuple[DissectionResult | None, str]:
    """(the result saved at `path` when it was dissected with the same settings and inputs, else None; and why not).

    A damaged file raises InputError (it may be somebody's result: the caller decides whether to start over)."""
    if not path.exists():
        return None, ""
    previous = DissectionResult.load(path)
    if previous.identity() != run_identity(settings, dataset_info, model_info, n_units):
        return None, f"{path}: other settings, dataset or model; starting over"
    return previous, ""


def dissect_in_blocks(path: Path, store: LabelStore, activations: np.ndarray, settings: DissectionSettings,
                      units: Sequence[int] | None = None, *, previous: DissectionResult | None = None,
                      correct: np.ndarray | None = None, dataset_info: dict, model_info: dict,
                      progress: ProgressCallback | None = None,
                      cancel: CancelCheck | None = None) -> Iterator[DissectionResult]:
    """Dissect the asked `units` (default all) that `previous` lacks, FIRST_BLOCK units first and then blocks twice
    as large; after every block the result is saved atomically to `path` and yielded. A cancelled or interrupted
    run saves what it finished first, so the next run resumes there."""
    n_units = int(activations.shape[1])
    asked = range(n_units) if units is None else units
    result = previous
    todo = [u for u in asked if result is None or u not in result.units]
    done, block = 0, FIRST_BLOCK
    while done < len(todo) or result is None:
        chunk = todo[done:done + block]

        def block_progress(fraction: float, message: str, _n: int = len(chunk), _done: int = done) -> None:
            if progress is not None:
                progress((_done + fraction * _n) / max(1, len(todo)), message)

        result = dissect(store, activations, settings, chunk, correct=correct, previous=result,
                         dataset_info=dataset_info, model_info=model_info, progress=block_progress, cancel=cancel,
                         checkpoint=lambda r: r.save(path))
        result.save(path)
        done += len(chunk)
        block *= 2
        yield result


def write_layer(folder: Path, result: DissectionResult) -> None:
    """dissection.json, tally.csv (with a column group per search the settings asked for) and, when the model's
    predictions were known, correlation.csv: a layer's outputs, as `probescope dissect` and a batch write them."""
    from probescope.core.dissection.correlation import accuracy_correlation, write_correlation_csv

    folder.mkdir(parents=True, exist_ok=True)
    result.save(folder / "dissection.json")
    result.write_tally(folder / "tally.csv", DissectionSettings.from_mapping(result.settings).searches)
    if any(u.accuracy is not None for u in result.units.values()):
        write_correlation_csv(folder / "correlation.csv", accuracy_correlation(result))
