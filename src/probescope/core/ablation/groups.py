"""Sets of units to ablate together: single units, a hand-picked list, every unit whose explanation names a concept,
the specialised units of a dissection, and the units whose removal hurts a class most.

A concept counts as named by an explanation when it is one of the formula's asserted atoms: `snow`, `(snow OR ice)`
and `((tree AND snow) AND NOT sky)` name snow; `(tree AND NOT snow)` describes a unit that fires where snow is absent,
so it does not.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from probescope.core.dissection.formula import AND_NOT, Formula
from probescope.core.dissection.results import DissectionResult, Explanation, is_specialised
from probescope.core.errors import InputError

if TYPE_CHECKING:
    from probescope.core.ablation.results import AblationResult


@dataclass(frozen=True)
class UnitGroup:
    """Units ablated together, under the name reports show ('unit 17', 'concept snow', 'units 0-9,17')."""

    name: str
    units: tuple[int, ...]


def format_units(units: Iterable[int]) -> str:
    """[0, 1, 2, 3, 17] -> '0-3,17' (the text `--units` reads)."""
    units = sorted(set(int(u) for u in units))
    runs: list[str] = []
    k = 0
    while k < len(units):
        j = k
        while j + 1 < len(units) and units[j + 1] == units[j] + 1:
            j += 1
        runs.append(str(units[k]) if j == k else f"{units[k]}-{units[j]}")
        k = j + 1
    return ",".join(runs)


def each_unit(units: Iterable[int]) -> list[UnitGroup]:
    """One group per unit: the layer's units x classes view."""
    return [UnitGroup(f"unit {u}", (int(u),)) for u in units]


def hand_picked(units: Iterable[int], name: str = "") -> UnitGroup:
    """A chosen set of units (a table selection), named after its units unless a name is given."""
    chosen = tuple(sorted(set(int(u) for u in units)))
    if not chosen:
        raise InputError("no units chosen to ablate")
    return UnitGroup(name or f"units {format_units(chosen)}", chosen)


def asserted_atoms(formula: Formula) -> set[int]:
    """The labels a formula says are present: every atom except those added with AND NOT."""
    return {formula.atoms[0]} | {a for op, a in zip(formula.ops, formula.atoms[1:]) if op != AND_NOT}


def unit_explanations(result: DissectionResult, unit: int) -> list[Explanation]:
    """A unit's explanations of every method: NetDissect's, then each search's (iou, da-select, da-stop)."""
    r = result.units[unit]
    return [e for e in (r.netdissect, *r.explanations.values()) if e is not None]


def concept_units(result: DissectionResult, concept: str, min_iou: float = 0.0) -> UnitGroup:
    """Every unit with an explanation (any method) that names `concept`, with IoU above `min_iou`."""
    numbers = {k for k, (name, _) in result.labels.items() if name == concept}
    if not numbers:
        raise InputError(f"no concept {concept!r} in the dissection's labels (e.g. "
                         f"{', '.join(sorted(n for n, _ in result.labels.values())[:8])})")
    units = [u for u in sorted(result.units)
             if any(numbers & asserted_atoms(e.formula) and e.iou > min_iou for e in unit_explanations(result, u))]
    if not units:
        above = f" with IoU above {min_iou:g}" if min_iou else ""
        raise InputError(f"no unit's explanation names {concept!r}{above}")
    return UnitGroup(f"concept {concept}", tuple(units))


def specialised_units(result: DissectionResult) -> UnitGroup:
    """The specialised units (da-stop keeps one concept while the IoU search's explanation is longer)."""
    units = tuple(u for u in sorted(result.units) if is_specialised(result.units[u].explanations))
    if not units:
        raise InputError("the dissection has no specialised units (it needs the iou and da-stop searches)")
    return UnitGroup("specialised", units)


def top_units(each: AblationResult, class_name: str, k: int, by: str = "accuracy") -> UnitGroup:
    """The k units whose single ablation (an `each_unit` result) hurts `class_name` most, ranked `by` the accuracy
    drop (ties: the drop in probability) or `by` the probability drop (ties: accuracy). Only units that hurt count."""
    if any(len(g.units) != 1 for g in each.groups):
        raise InputError("ranking units needs a result of single-unit ablations (each unit)")
    row = each.class_row(class_name)
    order = each.ranking(row, by, axis="groups")
    units = tuple(each.groups[g].units[0] for g in order[:k])
    if not units:
        raise InputError(f"no single unit's ablation lowers {class_name!r}")
    return UnitGroup(f"top {len(units)} for {class_name}", units)
