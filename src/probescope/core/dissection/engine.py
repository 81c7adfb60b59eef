"""Dissection of one layer: the entry point shared by the GUI, the command line and the benchmark.

    store = LabelStore.build(BrodenDataset.open(root))          # label maps read once
    result = dissect(store, activations, DissectionSettings(), progress=..., cancel=...)

`activations` is (images, units, h, w) in the dataset's row order (a memmap is fine: units are read in blocks).
Units are independent; `previous` results are kept and only missing units are computed, and `on_unit` is told of
every finished unit (the dissect-and-save driver records each one), so a stopped run resumes where it was.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from probescope.core.dissection.blocks import read_units
from probescope.core.dissection.counts import DatasetCounts, UnitScorer
from probescope.core.dissection.labels import LabelStore
from probescope.core.dissection.optimal import optimal_explanation
from probescope.core.dissection.results import DissectionResult, Explanation, UnitResult
from probescope.core.dissection.search import BeamSearch, Scored, da_select, da_stop, iou_explanation, length_sweep
from probescope.core.dissection.settings import DissectionSettings
from probescope.core.dissection.unitmasks import unit_mask_regions, unit_thresholds
from probescope.core.errors import InputError
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report

_BLOCK_BYTES = 128 << 20  # activations read per block of units


def dissect(store: LabelStore, activations: np.ndarray, settings: DissectionSettings = DissectionSettings(),
            units: Sequence[int] | None = None, *, correct: np.ndarray | None = None,
            previous: DissectionResult | None = None, dataset_info: dict | None = None,
            model_info: dict | None = None, progress: ProgressCallback | None = None, cancel: CancelCheck | None = None,
            on_unit: Callable[[DissectionResult, int], None] | None = None) -> DissectionResult:
    """Dissect `units` (default all) of a layer.

    `correct` (images,) int8: 1 = the model's top-1 prediction is right, 0 = wrong, -1 = no true label; when given,
    each unit gets the accuracies behind the accuracy-correlation experiment. `on_unit(result, unit)` runs after each
    unit is added to the partial result; on cancel, Cancelled is raised. `dataset_info` / `model_info` identify the
    inputs (JSON values only); a `previous` result's units are kept (and not recomputed) only when they and the
    protocol settings match.
    """
    if activations.ndim != 4:
        raise InputError(f"activations must be (images, units, h, w), got shape {activations.shape}")
    n, n_units = activations.shape[:2]
    if n != store.n_images:
        raise InputError(f"activations hold {n} images, the dataset index has {store.n_images} rows")
    units = list(range(n_units)) if units is None else [int(u) for u in units]
    bad = [u for u in units if not 0 <= u < n_units]
    if bad:
        raise InputError(f"unit(s) {', '.join(map(str, bad[:5]))} out of range (the layer has {n_units} units)")
    if correct is not None and len(correct) != n:
        raise InputError(f"predictions hold {len(correct)} images, the dataset index has {n} rows")
    concepts = store.concepts(settings.min_samples)
    result = DissectionResult(
        settings=settings.protocol(), dataset=dataset_info or {}, model=model_info or {},
        labels={int(c): (store.names.get(int(c), str(c)), store.categories.get(int(c), "")) for c in concepts},
        n_units=n_units)
    if previous is not None and previous.identity() == result.identity():
        result.units = dict(previous.units)  # kept even when not asked for this time: finished work stays
    todo = [u for u in units if u not in result.units]
    counts = DatasetCounts(store, settings.cache_bytes)
    per_block = max(1, _BLOCK_BYTES // max(1, activations[:1, :1].nbytes * n))
    done = 0
    for start in range(0, len(todo), per_block):
        block_units = todo[start:start + per_block]
        block = read_units(activations, block_units)
        finite = np.isfinite(block).reshape(n, len(block_units), -1).all(axis=(0, 2))
        if not finite.all():
            raise InputError(f"unit {block_units[int(np.argmin(finite))]} has non-finite activations")
        thresholds = unit_thresholds(block, settings.quantile)
        for j, u in enumerate(block_units):
            check_cancel(cancel)
            report(progress, done / max(1, len(todo)), f"unit {u} ({done + 1}/{len(todo)})")
            inside = unit_mask_regions(block[:, j], float(thresholds[j]), store, settings.device)
            result.units[u] = dissect_unit(counts, concepts, u, float(thresholds[j]), inside, settings,
                                           result.names, correct)
            done += 1
            if on_unit is not None:
                on_unit(result, u)
    result.complete = len(result.units) == n_units
    report(progress, 1.0, f"dissected {len(todo)} units")
    return result


def dissect_unit(counts: DatasetCounts, concepts: np.ndarray, unit: int, threshold: float, inside: np.ndarray,
                 settings: DissectionSettings, names: dict[int, str],
                 correct: np.ndarray | None = None) -> UnitResult:
    """One unit from its mask (`inside`: each region's pixels in it): NetDissect label, the chosen searches, trace
    and sweep."""
    scorer = UnitScorer(counts, inside, concepts, counts.category_scope if settings.iou_scope == "category" else None)
    search = BeamSearch(scorer, settings.beam_size, settings.beam_limit, settings.beam_dedupe)

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
        top_atoms=search.atom_ranking[:10], accuracy=accuracy, optimality_gap=gap, optimal_evaluated=evaluated)


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
