"""Results of a dissection: per unit its threshold, explanations with IoU and DA, beam traces and length sweep.

Saved as `dissection.json` (settings, dataset and model identity, label table, units) and summarised in
`tally.csv`. Formulas are stored both as text (label.csv names) and in the names-free list form.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from probescope.core.atomic import write_json, write_text
from probescope.core.dissection.formula import Formula
from probescope.core.errors import InputError
from probescope.core.files import readable_file, stat_problem

_TALLY_PREFIX = {"iou": "comp", "da-select": "daselect", "da-stop": "dastop", "optimal": "optimal"}
FORMAT = "probescope-dissection/1"


@dataclass(frozen=True)
class Explanation:
    formula: Formula
    label: str  # text form
    iou: float
    da: float

    @property
    def length(self) -> int:
        return self.formula.length

    def to_json(self) -> dict:
        return {"label": self.label, "formula": self.formula.to_json(), "length": self.length,
                "iou": self.iou, "da": self.da}

    @classmethod
    def from_json(cls, d: dict) -> Explanation:
        return cls(Formula.from_json(d["formula"]), d["label"], float(d["iou"]), float(d["da"]))


def is_specialised(explanations: Mapping[str, Explanation | None]) -> bool:
    """The seed's new specialised units: da-stop keeps one concept while the IoU search's explanation is longer."""
    stop, comp = explanations.get("da-stop"), explanations.get("iou")
    return stop is not None and comp is not None and stop.length == 1 and comp.length > 1


def _opt(e: Explanation | None) -> dict | None:
    return None if e is None else e.to_json()


def _opt_from(d: dict | None) -> Explanation | None:
    return None if d is None else Explanation.from_json(d)


def _opt_float(x) -> float | None:
    return None if x is None else float(x)


@dataclass
class UnitResult:
    """Everything found for one unit. `trace[k]` is the beam (best first) after growing to k + 1 atoms; every
    beam search mode walks this same sequence (see search.py). `sweep[k]` is the best-IoU formula capped at k + 1
    atoms. `accuracy[method][set]` = [top-1 accuracy, images] for the sets fired/explanation/union/intersection.
    With the `optimal` search: `optimality_gap` = IoU of the optimal formula minus IoU of the `iou` beam search's
    answer (>= 0; 0 when the beam found an optimum), `optimal_evaluated` = formulas whose IoU the branch and bound
    computed exactly; both None without it (and in files written before they existed). `threshold_ties` = the share
    of the unit's activations (every image and position, at feature-map resolution) equal to T (None in files
    written before it existed): see `at_tie`."""

    SENT_ONCE: ClassVar[bool] = True  # never altered once built: a task that sends it again refers to it by number

    unit: int
    threshold: float
    mask_pixels: int
    fired_images: int
    netdissect: Explanation | None
    explanations: dict[str, Explanation | None]
    trace: list[list[Explanation]]
    sweep: list[Explanation]
    top_atoms: list[tuple[int, float]] = field(default_factory=list)
    accuracy: dict[str, dict[str, list]] | None = None
    optimality_gap: float | None = None
    optimal_evaluated: int | None = None
    threshold_ties: float | None = None

    def at_tie(self, quantile: float) -> bool | None:
        """Does T sit at a tie: more activations equal T than the top quantile holds, so `A >= T` keeps more than
        the protocol's share (a dead unit, almost always 0, gets T = 0 and a mask of every pixel)? None if unknown."""
        return None if self.threshold_ties is None else self.threshold_ties > quantile

    def to_json(self) -> dict:
        return {
            "unit": self.unit, "threshold": self.threshold, "mask_pixels": self.mask_pixels,
            "fired_images": self.fired_images, "netdissect": _opt(self.netdissect),
            "explanations": {k: _opt(v) for k, v in self.explanations.items()},
            "trace": [[e.to_json() for e in beam] for beam in self.trace],
            "sweep": [e.to_json() for e in self.sweep],
            "top_atoms": [list(a) for a in self.top_atoms],
            "accuracy": self.accuracy, "optimality_gap": self.optimality_gap,
            "optimal_evaluated": self.optimal_evaluated, "threshold_ties": self.threshold_ties,
        }

    @classmethod
    def from_json(cls, d: dict) -> UnitResult:
        return cls(
            unit=int(d["unit"]), threshold=float(d["threshold"]), mask_pixels=int(d["mask_pixels"]),
            fired_images=int(d["fired_images"]), netdissect=_opt_from(d["netdissect"]),
            explanations={k: _opt_from(v) for k, v in d["explanations"].items()},
            trace=[[Explanation.from_json(e) for e in beam] for beam in d["trace"]],
            sweep=[Explanation.from_json(e) for e in d["sweep"]],
            top_atoms=[(int(a), float(b)) for a, b in d.get("top_atoms", [])],
            accuracy=d.get("accuracy"), optimality_gap=_opt_float(d.get("optimality_gap")),
            optimal_evaluated=None if d.get("optimal_evaluated") is None else int(d["optimal_evaluated"]),
            threshold_ties=_opt_float(d.get("threshold_ties")),
        )


@dataclass
class DissectionResult:
    """A layer's dissection. `settings` are the protocol settings (DissectionSettings.protocol()); `dataset` and
    `model` identify what was dissected; `labels` maps label numbers to (name, category)."""

    settings: dict[str, Any]
    dataset: dict[str, Any]
    model: dict[str, Any]
    labels: dict[int, tuple[str, str]]
    n_units: int
    units: dict[int, UnitResult] = field(default_factory=dict)
    complete: bool = False

    def identity(self) -> tuple:
        """What must match for results to be combined or resumed: protocol settings, dataset, model, layer width."""
        return (self.settings, self.dataset, self.model, self.n_units)

    @property
    def names(self) -> dict[int, str]:
        return {k: v[0] for k, v in self.labels.items()}

    def to_json(self) -> dict:
        return {
            "format": FORMAT, "settings": self.settings, "dataset": self.dataset, "model": self.model,
            "labels": {str(k): list(v) for k, v in sorted(self.labels.items())}, "n_units": self.n_units,
            "complete": self.complete, "units": [self.units[u].to_json() for u in sorted(self.units)],
        }

    @classmethod
    def from_json(cls, d: dict) -> DissectionResult:
        settings = d["settings"]
        if isinstance(settings, dict) and "beam_dedupe" not in settings:
            # written before the beam had a dedupe mode or an IoU scope: it kept duplicates, over the whole dataset
            settings = {**settings, "beam_dedupe": "none", "iou_scope": "dataset"}
        return cls(settings=settings, dataset=d["dataset"], model=d["model"],
                   labels={int(k): (v[0], v[1]) for k, v in d["labels"].items()}, n_units=int(d["n_units"]),
                   units={int(u["unit"]): UnitResult.from_json(u) for u in d["units"]},
                   complete=bool(d.get("complete", False)))

    def save(self, path: str | Path) -> None:
        write_json(path, self.to_json(), indent=None)

    @classmethod
    def load(cls, path: str | Path) -> DissectionResult:
        path = readable_file(path)
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
            if d.get("format") != FORMAT:
                raise InputError(f"not a probescope dissection (format {d.get('format')!r})", path)
            return cls.from_json(d)
        except OSError as exc:
            raise InputError(stat_problem(exc, path), path) from None
        except (ValueError, KeyError, TypeError, IndexError) as exc:
            raise InputError(f"damaged dissection file ({type(exc).__name__}: {exc})", path) from None

    def tally_csv(self, searches: tuple[str, ...], units: Iterable[int] | None = None) -> str:
        """tally.csv text: one row per unit (of `units`, default all); the netdissect and comp columns, then one
        group per extra search."""
        header = ["unit", "threshold", "netdissect_label", "netdissect_category", "netdissect_iou", "netdissect_da"]
        modes = ["iou"] + [m for m in searches if m != "iou"]
        for m in modes:
            p = _TALLY_PREFIX[m]
            header += [f"{p}_label", f"{p}_length", f"{p}_iou", f"{p}_da"]
        if "optimal" in modes:
            header.append("optimality_gap")
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(header)
        for u in sorted(self.units if units is None else set(units) & set(self.units)):
            r = self.units[u]
            nd = r.netdissect
            row: list = [u, repr(r.threshold)]
            row += ([nd.label, self.labels[nd.formula.atoms[0]][1], nd.iou, nd.da] if nd else ["", "", 0.0, 0.0])
            for m in modes:
                e = r.explanations.get(m)
                row += [e.label, e.length, e.iou, e.da] if e else ["", 0, 0.0, 0.0]
            if "optimal" in modes:
                row.append("" if r.optimality_gap is None else r.optimality_gap)
            w.writerow(row)
        return buf.getvalue()

    def write_tally(self, path: str | Path, searches: tuple[str, ...], units: Iterable[int] | None = None) -> None:
        write_text(path, self.tally_csv(searches, units))
