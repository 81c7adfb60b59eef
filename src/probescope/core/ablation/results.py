"""What an ablation found: per class, accuracy and mean probability of the true class before and after removing each
group of units; the classes a group hurts or helps most, and the units that hurt a class most.

Saved as `ablation.json` (everything, with the model and dataset identity) and `ablation.csv` (one row per group and
class). Accuracies are kept as counts of right images, so a change of zero is exact; changes of the mean probability
smaller than PROBABILITY_TIE count as none (the same logits can differ in the last bits when batched differently).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from probescope.core.ablation.groups import UnitGroup, format_units
from probescope.core.atomic import write_json, write_text
from probescope.core.errors import InputError
from probescope.core.files import readable_file, stat_problem

FORMAT = "probescope-ablation/1"
RANK_BY = ("accuracy", "probability")
PROBABILITY_TIE = 1e-6
CSV_COLUMNS = ("group", "units", "class", "images", "accuracy_before", "accuracy_after", "delta_accuracy",
               "p_true_before", "p_true_after", "delta_p_true")


@dataclass(frozen=True)
class ClassEffect:
    """One class under one group's ablation."""

    name: str
    images: int
    accuracy_before: float
    accuracy_after: float
    p_true_before: float
    p_true_after: float

    @property
    def delta_accuracy(self) -> float:
        return self.accuracy_after - self.accuracy_before

    @property
    def delta_p_true(self) -> float:
        return self.p_true_after - self.p_true_before


@dataclass
class AblationResult:
    """Rows are the classes that have labelled images (`classes`, at model outputs `class_index`); `groups[g]` was
    ablated for row g of the `*_after` arrays. `path` is 'tail' (only the network after the layer ran, on the cached
    activations) or 'hook' (full forward passes with the units replaced by a hook); `path_note` lists the tail's
    operations or says why the tail could not be separated."""

    layer: str
    mode: str
    path: str
    path_note: str
    classes: list[str]
    class_index: list[int]
    images: np.ndarray  # (classes,) labelled images per class
    correct_before: np.ndarray  # (classes,) images predicted right
    p_true_before: np.ndarray  # (classes,) mean softmax probability of the true class
    groups: list[UnitGroup]
    correct_after: np.ndarray  # (groups, classes)
    p_true_after: np.ndarray  # (groups, classes)
    model: dict = field(default_factory=dict)
    dataset: dict = field(default_factory=dict)

    # ---- the numbers --------------------------------------------------------------------------------------------

    @property
    def accuracy_before(self) -> np.ndarray:
        return self.correct_before / self.images

    @property
    def accuracy_after(self) -> np.ndarray:
        return self.correct_after / self.images

    @property
    def delta_accuracy(self) -> np.ndarray:
        """(groups, classes) accuracy after minus before: negative where the ablation hurts."""
        return (self.correct_after - self.correct_before) / self.images

    @property
    def delta_p_true(self) -> np.ndarray:
        return self.p_true_after - self.p_true_before

    def effect(self, group: int, row: int) -> ClassEffect:
        return ClassEffect(self.classes[row], int(self.images[row]), float(self.accuracy_before[row]),
                           float(self.accuracy_after[group, row]), float(self.p_true_before[row]),
                           float(self.p_true_after[group, row]))

    def class_row(self, name: str) -> int:
        """The row of a class (InputError when the class has no labelled images)."""
        if name not in self.classes:
            raise InputError(f"class {name!r} has no labelled images here (classes: {', '.join(self.classes[:8])}"
                             + (", ..." if len(self.classes) > 8 else "") + ")")
        return self.classes.index(name)

    def group_of_unit(self, unit: int) -> int:
        """The index of the group that ablated `unit` alone (an each-unit result's row for the unit)."""
        for g, group in enumerate(self.groups):
            if group.units == (unit,):
                return g
        raise InputError(f"unit {unit} was not ablated alone here")

    def ranking(self, index: int, by: str = "accuracy", axis: str = "classes", helped: bool = False) -> list[int]:
        """The classes that group `index` hurts (axis='classes'), or the groups that hurt class row `index`
        (axis='groups'), most first: by the change of accuracy and then of the true class's probability, or
        `by='probability'` the other way round. Unchanged entries are left out; `helped` ranks the gains instead."""
        if by not in RANK_BY:
            raise InputError(f"rank by {by!r}: expected one of {', '.join(RANK_BY)}")
        if axis == "classes":
            d_correct = self.correct_after[index] - self.correct_before
            d_p = self.p_true_after[index] - self.p_true_before
        elif axis == "groups":
            d_correct = self.correct_after[:, index] - self.correct_before[index]
            d_p = self.p_true_after[:, index] - self.p_true_before[index]
        else:
            raise ValueError(f"axis {axis!r}")
        d_acc = d_correct / (self.images if axis == "classes" else self.images[index])
        d_p = np.where(np.abs(d_p) < PROBABILITY_TIE, 0.0, d_p)
        sign = -1.0 if helped else 1.0
        first, second = (d_acc, d_p) if by == "accuracy" else (d_p, d_acc)
        keys = sorted((sign * a, sign * b, k) for k, (a, b) in enumerate(zip(first, second)))
        return [k for a, b, k in keys if (a, b) < (0, 0)]

    def most_hurt(self, group: int, k: int = 3, by: str = "accuracy") -> list[ClassEffect]:
        """The k classes that ablating group `group` hurts most (fewer when fewer are hurt at all)."""
        return [self.effect(group, row) for row in self.ranking(group, by)[:k]]

    def most_helped(self, group: int, k: int = 3, by: str = "accuracy") -> list[ClassEffect]:
        """The k classes that ablating group `group` helps most."""
        return [self.effect(group, row) for row in self.ranking(group, by, helped=True)[:k]]

    def joined(self, other: AblationResult) -> AblationResult:
        """This result with the groups of `other`, a later run of the same LayerAblation, appended."""
        if (other.layer, other.mode, other.class_index) != (self.layer, self.mode, self.class_index) or \
                not np.array_equal(other.correct_before, self.correct_before):
            raise ValueError("ablation results of different layers, modes or images cannot be joined")
        return replace(self, groups=self.groups + other.groups,
                       correct_after=np.concatenate([self.correct_after, other.correct_after]),
                       p_true_after=np.concatenate([self.p_true_after, other.p_true_after]))

    # ---- files --------------------------------------------------------------------------------------------------

    def to_json(self) -> dict:
        return {
            "format": FORMAT, "layer": self.layer, "mode": self.mode, "path": self.path, "path_note": self.path_note,
            "model": self.model, "dataset": self.dataset,
            "classes": [{"name": c, "index": int(i), "images": int(n), "correct_before": int(r), "p_true_before": p}
                        for c, i, n, r, p in zip(self.classes, self.class_index, self.images, self.correct_before,
                                                 self.p_true_before.tolist())],
            "groups": [{"name": g.name, "units": list(g.units), "correct_after": [int(x) for x in c],
                        "p_true_after": p.tolist()}
                       for g, c, p in zip(self.groups, self.correct_after, self.p_true_after)],
        }

    @classmethod
    def from_json(cls, d: dict) -> AblationResult:
        classes, groups = d["classes"], d["groups"]
        return cls(
            layer=d["layer"], mode=d["mode"], path=d["path"], path_note=d["path_note"],
            classes=[c["name"] for c in classes], class_index=[int(c["index"]) for c in classes],
            images=np.array([int(c["images"]) for c in classes], np.int64),
            correct_before=np.array([int(c["correct_before"]) for c in classes], np.int64),
            p_true_before=np.array([float(c["p_true_before"]) for c in classes], np.float64),
            groups=[UnitGroup(g["name"], tuple(int(u) for u in g["units"])) for g in groups],
            correct_after=np.array([g["correct_after"] for g in groups], np.int64).reshape(len(groups), len(classes)),
            p_true_after=np.array([g["p_true_after"] for g in groups], np.float64).reshape(len(groups), len(classes)),
            model=d.get("model", {}), dataset=d.get("dataset", {}))

    def save(self, path: str | Path) -> None:
        write_json(path, self.to_json(), indent=None)

    @classmethod
    def load(cls, path: str | Path) -> AblationResult:
        path = readable_file(path)
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
            if not isinstance(d, dict) or d.get("format") != FORMAT:
                raise InputError(f"not a probescope ablation (format {d.get('format')!r})", path)
            return cls.from_json(d)
        except OSError as exc:
            raise InputError(stat_problem(exc, path), path) from None
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InputError(f"damaged ablation file ({type(exc).__name__}: {exc})", path) from None

    def csv_text(self) -> str:
        """ablation.csv: one row per group and class (the CSV_COLUMNS)."""
        buf = io.StringIO()
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(CSV_COLUMNS)
        for g, group in enumerate(self.groups):
            units = format_units(group.units)
            for row in range(len(self.classes)):
                e = self.effect(g, row)
                w.writerow([group.name, units, e.name, e.images, repr(e.accuracy_before), repr(e.accuracy_after),
                            repr(e.delta_accuracy), repr(e.p_true_before), repr(e.p_true_after), repr(e.delta_p_true)])
        return buf.getvalue()

    def write_csv(self, path: str | Path) -> None:
        write_text(path, self.csv_text())
