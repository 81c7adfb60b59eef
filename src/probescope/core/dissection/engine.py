"""Dissection of one layer: the entry point shared by the GUI, the command line and the benchmark.

    store = LabelStore.build(BrodenDataset.open(root))          # label maps read once
    result = dissect(store, activations, DissectionSettings(), progress=..., cancel=...)

`activations` is (images, units, h, w) in the dataset's row order (a memmap is fine: units are read in blocks).
Units are independent; `previous` results are kept and only missing units are computed, and `add_units` hands over
every finished unit (the dissect-and-save driver records each one), so a stopped run resumes where it was. Units
run in this process or, given a `parallel.UnitWorkers` pool, in its processes, with the same results.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np

from probescope.core.dissection.blocks import read_units
from probescope.core.dissection.counts import DatasetCounts
from probescope.core.dissection.labels import LabelStore
from probescope.core.dissection.optimal import optimal_explanation
from probescope.core.dissection.results import DissectionResult, Explanation, UnitResult
from probescope.core.dissection.search import BeamSearch, Scored, da_select, da_stop, iou_explanation, length_sweep
from probescope.core.dissection.settings import DissectionSettings
from probescope.core.dissection.unit_scorer import UnitScorer
from probescope.core.dissection.unitmasks import unit_mask_regions, unit_thresholds
from probescope.core.errors import InputError
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report

if TYPE_CHECKING:
    from probescope.core.dissection.parallel import UnitWorkers

_BLOCK_BYTES = 128 << 20  # activations read per block of units


def dissect(store: LabelStore, activations: np.ndarray, settings: DissectionSettings = DissectionSettings(),
            units: Sequence[int] | None = None, *, correct: np.ndarray | None = None,
            previous: DissectionResult | None = None, dataset_info: dict | None = None,
            model_info: dict | None = None, progress: ProgressCallback | None = None, cancel: CancelCheck | None = None,
            workers: UnitWorkers | None = None) -> DissectionResult:
    """Dissect `units` (default all) of a layer.

    `correct` (images,) int8: 1 = the model's top-1 prediction is right, 0 = wrong, -1 = no true label; when given,
    each unit gets the accuracies behind the accuracy-correlation experiment. On cancel, Cancelled is raised.
    `dataset_info` / `model_info` identify the inputs (JSON values only); a `previous` result's units are kept (and
    not recomputed) only when they and the protocol settings match. With `workers` (a UnitWorkers pool), the units
    are dissected in its processes; the result is the same.
    """
    result, todo = layer_result(store, activations, settings, units, correct, previous, dataset_info, model_info)
    for _unit in add_units(result, todo, store, activations, settings, correct=correct, progress=progress,
                           cancel=cancel, workers=workers):
        pass
    return result


def add_units(result: DissectionResult, todo: Sequence[int], store: LabelStore, activations: np.ndarray,
              settings: DissectionSettings, *, correct: np.ndarray | None = None,
              progress: ProgressCallback | None = None, cancel: CancelCheck | None = None,
              workers: UnitWorkers | None = None) -> Iterator[int]:
    """Dissect the units `todo` into `result` (from `layer_result`), yielding each unit once it is in; with
    `workers`, they come in the order they finish."""
    report(progress, 0.0, f"dissecting {len(todo)} units")
    found = (workers.run(activations, settings, todo, correct, cancel) if workers is not None
             else unit_results(store, activations, settings, todo, correct=correct, cancel=cancel))
    for done, unit in enumerate(found, 1):
        result.units[unit.unit] = unit
        result.complete = len(result.units) == result.n_units
        report(progress, done / len(todo), f"unit {unit.unit} ({done}/{len(todo)})")
        yield unit.unit
    report(progress, 1.0, f"dissected {len(todo)} units")


def layer_result(store: LabelStore, activations: np.ndarray, settings: DissectionSettings,
                 units: Sequence[int] | None, correct: np.ndarray | None, previous: DissectionResult | None,
                 dataset_info: dict | None, model_info: dict | None) -> tuple[DissectionResult, list[int]]:
    """The inputs checked; a result holding `previous`'s units when they match, and the asked units it lacks."""
    source = getattr(activations, "filename", None)  # an ACT.npy file, memory-mapped: named when it is at fault
    if activations.ndim != 4:
        raise InputError(f"activations must be (images, units, h, w), got shape {activations.shape}", source)
    n, n_units = activations.shape[:2]
    if n != store.n_images:
        raise InputError(f"activations hold {n} images, the dataset index has {store.n_images} rows", source)
    units = list(range(n_units)) if units is None else [int(u) for u in units]
    bad = [u for u in units if not 0 <= u < n_units]
    if bad:
        raise InputError(f"unit(s) {', '.join(map(str, bad[:5]))} out of range (the layer has {n_units} units)")
    if correct is not None and len(correct) != n:
        raise InputError(f"predictions hold {len(correct)} images, the dataset index has {n} rows")
    concepts = store.concepts(settings.min_samples)
    result = DissectionResult(settings=settings.protocol(), dataset=dataset_info or {}, model=model_info or {},
                              labels=concept_labels(store, concepts), n_units=n_units)
    if previous is not None and previous.identity() == result.identity():
        result.units = dict(previous.units)  # kept even when not asked for this time: finished work stays
    result.complete = len(result.units) == n_units
    return result, [u for u in units if u not in result.units]


def concept_labels(store: LabelStore, concepts: np.ndarray) -> dict[int, tuple[str, str]]:
    """(name, category) of each concept, as results record them."""
    return {int(c): (store.names.get(int(c), str(c)), store.categories.get(int(c), "")) for c in concepts}


def unit_results(store: LabelStore, activations: np.ndarray, settings: DissectionSettings, units: Sequence[int], *,
                 correct: np.ndarray | None = None, counts: DatasetCounts | None = None,
                 cancel: CancelCheck | None = None) -> Iterator[UnitResult]:
    """Dissect `units` in this process, in order, reading their activations a block of units at a time; `counts`
    (the dataset-side counts, cached per formula) may be kept from an earlier call on the same store."""
    source = getattr(activations, "filename", None)
    counts = DatasetCounts(store, settings.cache_bytes) if counts is None else counts
    concepts = store.concepts(settings.min_samples)
    names = {k: v[0] for k, v in concept_labels(store, concepts).items()}
    n = activations.shape[0]
    per_block = max(1, _BLOCK_BYTES // max(1, activations[:1, :1].nbytes * n))
    for start in range(0, len(units), per_block):
        block_units = list(units[start:start + per_block])
        block = read_units(activations, block_units)
        finite = np.isfinite(block).reshape(n, len(block_units), -1).all(axis=(0, 2))
        if not finite.all():
            raise InputError(f"unit {block_units[int(np.argmin(finite))]} has non-finite activations", source)
        thresholds = unit_thresholds(block, settings.quantile)
        for j, u in enumerate(block_units):
            check_cancel(cancel)
            t = float(thresholds[j])
            inside = unit_mask_regions(block[:, j], t, store, settings.device)
            ties = float(np.count_nonzero(block[:, j] == np.float64(t)) / block[:, j].size)
            yield dissect_unit(counts, concepts, u, t, inside, settings, names, correct, ties)


def dissect_unit(counts: DatasetCounts, concepts: np.ndarray, unit: int, threshold: float, inside: np.ndarray,
                 settings: DissectionSettings, names: dict[int, str], correct: np.ndarray | None = None,
                 ties: float | None = None) -> UnitResult:
    """One unit from its mask (`inside`: each region's pixels in it): NetDissect label, the chosen searches, trace
    and sweep; `ties` is the share of its activations equal to `threshold`."""
    scorer = UnitScorer(counts, inside, concepts, counts.category_scope if settings.iou_scope == "category" else None)
    search = BeamSearch(scorer, settings)

    def explain(s: Scored | None) -> Explanation | None:
        return None if s is None else Explanation(s.formula, s.formula.text(names), s.iou, s.da)

    found: dict[str, Scored | None] = {"iou": iou_explanation(search, settings.max_length)}
    if "da-select" in settings.searches:
        found["da-select"] = da_select(search, settings.da_limit)
    if "da-stop" in settings.searches:
        found["da-stop"] = da_stop(search, settings.da_limit)
    gap = evaluated = None
    if "optimal" in settings.searches:
        beam = found["iou"]
        optimum = optimal_explanation(scorer, settings.max_length, beam.iou if beam is not None else 0.0)
        found["optimal"] = optimum.best
        evaluated = optimum.evaluated
        gap = 0.0 if beam is None else optimum.best.iou - beam.iou
    sweep = length_sweep(search, settings.sweep_length)
    netdissect = None if search.empty else search.beam(0)[0]
    fired = scorer.fired_images()
    accuracy = None
    if correct is not None:
        chosen = {"netdissect": netdissect, **found}
        chosen.update({f"length-{k + 1}": s for k, s in enumerate(sweep)})
        accuracy = {name: _set_accuracies(correct, fired, counts.record(s.formula).images)
                    for name, s in chosen.items() if s is not None}
    return UnitResult(
        unit=unit, threshold=threshold, mask_pixels=scorer.n_mask, fired_images=len(fired),
        netdissect=explain(netdissect), explanations={k: explain(v) for k, v in found.items()},
        trace=[[explain(s) for s in beam] for beam in search.computed], sweep=[explain(s) for s in sweep],
        top_atoms=search.atom_ranking[:10], accuracy=accuracy, optimality_gap=gap, optimal_evaluated=evaluated,
        threshold_ties=ties)


def _set_accuracies(correct: np.ndarray, fired: np.ndarray, present: np.ndarray) -> dict[str, list]:
    """Top-1 accuracy (over images with a true label) on the fired / explanation / union / intersection sets."""
    sets = {"fired": fired, "explanation": present, "union": np.union1d(fired, present),
            "intersection": np.intersect1d(fired, present, assume_unique=True)}
    out = {}
    for name, images in sets.items():
        c = correct[images]
        c = c[c >= 0]
        out[name] = [float(c.mean()) if len(c) else None, int(len(c))]
    return out
