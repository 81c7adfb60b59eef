"""What the Dissection workspace's views say about units, computed from a dissection result: the table's rows, the
layer's summary and counts (Network Dissection's interpretable units, the seed's specialised units), explanation
lengths, and where in the beam-search trace each method's explanation sits. Plain values, no Qt.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from probescope.core.dissection.results import DissectionResult, Explanation, UnitResult
from probescope.core.dissection.results import is_specialised as specialised
from probescope.core.dissection.settings import WINDOW_SETTINGS

SEARCHES = WINDOW_SETTINGS.searches  # the searches the window runs by default
METHODS = ("netdissect", *SEARCHES, "optimal")  # every explanation a unit may get, in display order
METHOD_NAMES = {"netdissect": "NetDissect", "iou": "compositional", "da-select": "da-select", "da-stop": "da-stop",
                "optimal": "optimal"}
# Okabe-Ito colours, one per method in every view (bars, lengths): apart for colour-blind readers too
METHOD_COLORS = {"netdissect": "#0072b2", "iou": "#e69f00", "da-select": "#009e73", "da-stop": "#d55e00",
                 "optimal": "#cc79a7"}
METHOD_SHORT = {"netdissect": "ND", "iou": "comp", "da-select": "select", "da-stop": "stop",
                "optimal": "opt"}  # narrow columns
INTERPRETABLE_IOU = 0.04


# -- rows of the unit table --------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class UnitRow:
    """One unit's line in the table: the explanations of every method (None where a search found nothing)."""

    unit: int
    category: str  # the NetDissect concept's category
    explanations: dict[str, Explanation | None]  # METHODS -> explanation
    gap: float | None = None  # the optimal formula's IoU above the compositional one (None: not searched)
    mask_share: float | None = None  # the share of the dataset's pixels in the unit's mask (None: not known)
    at_tie: bool = False  # T sits at a tie: a dead unit (see UnitResult.at_tie)

    def concepts(self) -> set[str]:
        return {e.label for e in self.explanations.values() if e is not None}

    def iou(self, method: str = "netdissect") -> float:
        e = self.explanations.get(method)
        return e.iou if e is not None else 0.0


def unit_row(result: DissectionResult, u: UnitResult, n_pixels: int | None = None) -> UnitRow:
    """The unit's row; `n_pixels`, the dataset's pixels, gives its mask's share."""
    nd = u.netdissect
    category = result.labels.get(nd.formula.atoms[0], ("", ""))[1] if nd is not None else ""
    return UnitRow(u.unit, category, {"netdissect": nd, **{m: u.explanations.get(m) for m in METHODS[1:]}},
                   u.optimality_gap, u.mask_pixels / n_pixels if n_pixels else None,
                   bool(u.at_tie(result.settings.get("quantile", 0.005))))


def tie_note(result: DissectionResult, u: UnitResult, n_pixels: int | None = None) -> str:
    """What the unit view says when T sits at a tie (plain text), else ''."""
    quantile = result.settings.get("quantile", 0.005)
    if not u.at_tie(quantile):
        return ""
    share = f"{u.mask_pixels / n_pixels:.1%} of the pixels" if n_pixels else f"{u.mask_pixels:,} pixels"
    return (f"T = {u.threshold:.3g} sits at a tie: {u.threshold_ties:.1%} of the unit's activations equal it, so its "
            f"mask (A >= T) holds {share} where the protocol's top quantile holds {quantile:.2%}. A dead unit: "
            "its explanations say which concepts are largest, not what it detects.")


def is_interpretable(row: UnitRow, threshold: float = INTERPRETABLE_IOU) -> bool:
    """Network Dissection's criterion: the best single concept's IoU is above `threshold`."""
    return row.iou("netdissect") > threshold


def is_specialised(row: UnitRow) -> bool:
    """The seed's new specialised units: da-stop keeps one concept while the IoU search's explanation is longer."""
    return specialised(row.explanations)


def filtered(rows: dict[int, UnitRow], text: str, category: str | None, interpretable_above: float | None,
             specialised_only: bool, hide_ties: bool = False) -> set[int]:
    """The units the table shows: an explanation naming `text` (any case), of `category` (None: all), interpretable
    above an IoU (None: any), specialised (when asked), not dead (T at a tie; when asked)."""
    text = text.strip().lower()
    return {u for u, row in rows.items()
            if (not text or any(text in c.lower() for c in row.concepts()))
            and (category is None or row.category == category)
            and (interpretable_above is None or is_interpretable(row, interpretable_above))
            and (not specialised_only or is_specialised(row))
            and not (hide_ties and row.at_tie)}


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
            f"concepts" + (f" ({parts})" if parts else "") + f"; {c.specialised} specialised" + gap_summary(rows))


def gap_summary(rows: list[UnitRow]) -> str:
    """'; the beam found the optimum for K of M units (mean gap g, largest G at unit u)', or '' without gaps."""
    gaps = [(r.gap, r.unit) for r in rows if r.gap is not None]
    if not gaps:
        return ""
    worst, unit = max(gaps)
    optimal = sum(g <= 1e-12 for g, _ in gaps)
    return (f"; the beam found the optimum for {optimal} of {len(gaps)} units (mean gap "
            f"{float(np.mean([g for g, _ in gaps])):.4f}" + (f", largest {worst:.4f} at unit {unit})" if worst > 0
                                                              else ")"))


def length_histogram(result: DissectionResult, max_length: int) -> dict[str, tuple[list[int], list[int]]]:
    """Per search method: explanation lengths 1..max_length and how many units have each (the seed's figure 4)."""
    out = {}
    for m in METHODS[1:]:
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


def explanation_of(unit: UnitResult, method: str) -> Explanation | None:
    """A unit's explanation by one of METHODS (None where the search found nothing)."""
    return unit.netdissect if method == "netdissect" else unit.explanations.get(method)
