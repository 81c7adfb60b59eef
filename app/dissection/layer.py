"""Worker-side work of the Dissection workspace: the layer's dissection (cached on disk per model, layer, dataset and
settings, resumed where it stopped, delivered unit block by unit block), the per-image peak activations behind each
unit's top images, and the table rows. No widgets here: views get plain values.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from probescope.app.tasks import Partial, Progress, TaskContext
from probescope.core.dissection.inputs import dataset_identity, model_identity, predicted_classes
from probescope.core.dissection.results import DissectionResult, Explanation, UnitResult
from probescope.core.dissection.results import is_specialised as specialised
from probescope.core.dissection.settings import DissectionSettings

SEARCHES = ("iou", "da-select", "da-stop")
METHODS = ("netdissect", "iou", "da-select", "da-stop")  # every explanation a unit gets, in display order
METHOD_NAMES = {"netdissect": "NetDissect", "iou": "compositional", "da-select": "da-select", "da-stop": "da-stop"}
DEFAULT_SETTINGS = DissectionSettings(searches=SEARCHES, sweep_length=10)
INTERPRETABLE_IOU = 0.04


@dataclass
class LayerData:
    """A dissected (or partly dissected) layer and what the views need next to it."""

    key: str
    settings: DissectionSettings
    layer: str
    model_label: str
    dataset: object  # BrodenDataset: the images and labels behind the overlays
    store: object  # LabelStore
    activations: np.ndarray  # (images, units, h, w) memmap
    peaks: np.ndarray  # (images, units) float32: each unit's maximum activation per image
    result: DissectionResult
    origin: str = ""  # where a saved result was opened from (a batch job); "" for the loaded model's dissection

    def top_images(self, unit: int, k: int) -> np.ndarray:
        """The k images where `unit` peaks highest, highest first."""
        column = self.peaks[:, unit]
        k = min(k, len(column))
        top = np.argpartition(-column, k - 1)[:k]
        return top[np.argsort(-column[top], kind="stable")]


def identity(loaded_model, model, layer: str, dataset) -> tuple[dict, dict]:
    """(model_info, dataset_info): what the dissection depends on besides its settings (as `probescope dissect`
    records them, so the GUI's results and the command line's describe their inputs the same way)."""
    return model_identity(model, loaded_model.spec, layer), dataset_identity(dataset)


def result_path(cache: Path, model_info: dict, dataset_info: dict, settings: DissectionSettings) -> Path:
    """Where the dissection for these inputs and settings is kept."""
    text = json.dumps([model_info, dataset_info, settings.protocol()], sort_keys=True)
    return Path(cache) / "dissection" / f"{hashlib.sha256(text.encode()).hexdigest()[:32]}.json"


def unit_peaks(activations: np.ndarray, chunk: int = 256) -> np.ndarray:
    """(images, units) maximum of each unit's map per image, read through the memmap in image chunks."""
    n, units = activations.shape[:2]
    out = np.empty((n, units), np.float32)
    for lo in range(0, n, chunk):
        out[lo:lo + chunk] = np.asarray(activations[lo:lo + chunk]).reshape(min(chunk, n - lo), units, -1).max(2)
    return out


def settings_label(settings: DissectionSettings) -> str:
    return (f"q {settings.quantile:g} · beam {settings.beam_size} · limit {settings.beam_limit} · "
            f"length ≤{settings.max_length} · min {settings.min_samples} images")


def layer_task(loaded_model, layer: str, dataset, store, settings: DissectionSettings,
               ctx: TaskContext) -> Iterator[Progress | Partial]:
    """Dissect `layer` with `settings`; yields Partial(LayerData) after every block of units and returns the last.

    A finished dissection in the cache comes back at once; a partial one is resumed (only missing units run).
    """
    from probescope.core.cache import cache_dir
    from probescope.core.data.activations import extract_activations
    from probescope.core.dissection.labels import LabelStore
    from probescope.core.dissection.saved import dissect_in_blocks, resumable
    from probescope.core.errors import InputError

    model = loaded_model.value
    model.module.eval()
    yield Progress(0.0, f"activations of {layer}")
    activations = extract_activations(model, layer, dataset, cache_dir(), progress=ctx.progress,
                                      cancel=ctx.cancelled)
    if store is None:
        yield Progress(None, "reading the label maps")
        store = LabelStore.build(dataset, progress=ctx.progress, cancel=ctx.cancelled)
    yield Progress(None, "peak activation per image")
    peaks = unit_peaks(activations)
    model_info, dataset_info = identity(loaded_model, model, layer, dataset)
    head, correct = yield from _correct_predictions(model, dataset, store, ctx)
    if head is not None:
        model_info["predictions"] = head  # results with accuracies are kept apart from those without
    path = result_path(cache_dir(), model_info, dataset_info, settings)
    key = path.stem
    try:
        previous, _ = resumable(path, settings, dataset_info, model_info, int(activations.shape[1]))
    except InputError:
        previous = None  # a damaged cache entry is recomputed
    def layer_data(result: DissectionResult) -> LayerData:
        return LayerData(key, settings, layer, loaded_model.label, dataset, store, activations, peaks, result)

    if previous is not None and previous.complete:
        return layer_data(previous)

    def progress(fraction: float, message: str) -> None:
        ctx.progress(fraction, f"dissecting {layer}: {message}")

    result = previous
    for result in dissect_in_blocks(path, store, activations, settings, previous=previous, correct=correct,
                                    dataset_info=dataset_info, model_info=model_info, progress=progress,
                                    cancel=ctx.cancelled):
        yield Partial(layer_data(result))
    return layer_data(result)


def _correct_predictions(model, dataset, store, ctx: TaskContext) -> Iterator[Progress]:
    """(head layer name, int8 right/wrong/unknown per image) from the classifier head's outputs when the model names
    its classes and the dataset's scene labels name some of them; (None, None) otherwise."""
    from probescope.core.cache import cache_dir
    from probescope.core.dissection.correlation import correct_predictions, scene_truth

    if not getattr(model, "class_names", None) or not getattr(model, "hookable", False):
        return None, None
    yield Progress(None, "the model's predictions")
    predicted = predicted_classes(model, dataset, cache_dir(), progress=ctx.progress, cancel=ctx.cancelled)
    if predicted is None:
        return None, None
    head, predictions = predicted
    truth = scene_truth(store, model.class_names)
    if not (truth >= 0).any():
        return None, None
    return head, correct_predictions(predictions, truth)


# -- rows of the unit table --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class UnitRow:
    """One unit's line in the table: the explanations of every method (None where a search found nothing)."""

    unit: int
    category: str  # the NetDissect concept's category
    explanations: dict[str, Explanation | None]  # METHODS -> explanation

    def concepts(self) -> set[str]:
        return {e.label for e in self.explanations.values() if e is not None}

    def iou(self, method: str = "netdissect") -> float:
        e = self.explanations.get(method)
        return e.iou if e is not None else 0.0


def unit_row(result: DissectionResult, u: UnitResult) -> UnitRow:
    nd = u.netdissect
    category = result.labels.get(nd.formula.atoms[0], ("", ""))[1] if nd is not None else ""
    return UnitRow(u.unit, category, {"netdissect": nd, **{m: u.explanations.get(m) for m in SEARCHES}})


def is_interpretable(row: UnitRow, threshold: float = INTERPRETABLE_IOU) -> bool:
    """Network Dissection's criterion: the best single concept's IoU is above `threshold`."""
    return row.iou("netdissect") > threshold


def is_specialised(row: UnitRow) -> bool:
    """The seed's new specialised units: da-stop keeps one concept while the IoU search's explanation is longer."""
    return specialised(row.explanations)


@dataclass(frozen=True)
class LayerCounts:
    """What a layer's summary line (and a batch job's row) says: units, interpretable units, their distinct NetDissect
    concepts (label -> category), specialised units, and the mean IoU of NetDissect and the IoU search."""

    units: int
    interpretable: int
    concepts: dict[str, str]
    specialised: int
    mean_iou: float
    mean_comp_iou: float


def layer_counts(rows: list[UnitRow], threshold: float = INTERPRETABLE_IOU) -> LayerCounts:
    good = [r for r in rows if is_interpretable(r, threshold)]
    concepts = {r.explanations["netdissect"].label: r.category for r in good}

    def mean(values: list[float]) -> float:
        return float(np.mean(values)) if values else 0.0

    return LayerCounts(len(rows), len(good), concepts, sum(is_specialised(r) for r in rows),
                       mean([r.iou("netdissect") for r in rows]), mean([r.iou("iou") for r in rows]))


def summary(rows: list[UnitRow], threshold: float = INTERPRETABLE_IOU) -> str:
    """'N of M units interpretable (IoU > t), K distinct concepts: object 5, color 2, …'."""
    c = layer_counts(rows, threshold)
    per: dict[str, int] = {}
    for cat in c.concepts.values():
        per[cat] = per.get(cat, 0) + 1
    parts = ", ".join(f"{cat or 'other'} {n}" for cat, n in sorted(per.items(), key=lambda kv: (-kv[1], kv[0])))
    return (f"{c.interpretable} of {c.units} units interpretable (IoU > {threshold:g}); {len(c.concepts)} distinct "
            f"concepts" + (f" ({parts})" if parts else "") + f"; {c.specialised} specialised")


def length_histogram(result: DissectionResult, max_length: int) -> dict[str, tuple[list[int], list[int]]]:
    """Per search method: explanation lengths 1..max_length and how many units have each (the seed's figure 4)."""
    out = {}
    for m in SEARCHES:
        lengths = [u.explanations[m].length for u in result.units.values() if u.explanations.get(m) is not None]
        if lengths:
            top = max(max_length, max(lengths))
            out[METHOD_NAMES[m]] = (list(range(1, top + 1)), [lengths.count(k) for k in range(1, top + 1)])
    return out


# -- what each method picked from the beam-search trace ----------------------------------------------------------------
@dataclass(frozen=True)
class TracePicks:
    """Where in `UnitResult.trace` each method's explanation sits, as (step, position), and the step at which the
    DA-driven searches stopped (the first step that did not raise DA), when they stopped inside the trace."""

    picks: dict[str, tuple[int, int]]
    stops: dict[str, int]


def trace_picks(unit: UnitResult, max_length: int, da_limit: int) -> TracePicks:
    """Replays the searches' choices over the recorded beams (the same walk as core's search.py)."""
    trace = unit.trace
    picks: dict[str, tuple[int, int]] = {}
    stops: dict[str, int] = {}
    if not trace:
        return TracePicks(picks, stops)
    picks["netdissect"] = (0, 0)
    if max_length - 1 < len(trace):
        picks["iou"] = (max_length - 1, 0)

    def best_da(k: int) -> int:
        das = [e.da for e in trace[k]]
        return das.index(max(das))  # the first (best-ranked) on ties, like max()

    steps = min(da_limit, len(trace))
    if "da-select" in unit.explanations:
        best = (0, best_da(0))
        for k in range(1, steps):
            p = best_da(k)
            if trace[k][p].da <= trace[best[0]][best[1]].da:
                stops["da-select"] = k
                break
            best = (k, p)
        picks["da-select"] = best
    if "da-stop" in unit.explanations:
        previous = (0, 0)
        for k in range(1, steps):
            if trace[k][0].da <= trace[previous[0]][0].da:
                stops["da-stop"] = k
                break
            previous = (k, 0)
        picks["da-stop"] = previous
    return TracePicks(picks, stops)
