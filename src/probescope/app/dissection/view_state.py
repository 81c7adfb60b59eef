"""What the Dissection workspace shows, as evented, Qt-free state: the inputs the live results belong to, the layer's
result on screen and its table rows, the selected unit and what its overlays show, the settings it was (or is being)
dissected with (a record of the run: the Settings panel's form is where settings come from), the results kept per
settings (the Settings panel lists them), and the first part of a dataset still being written. Each field is a
psygnal signal (`state.events.unit.connect(...)`) the widgets bind to, and the view logic (which unit comes first,
the table's header line, the explanation in view) is computed here, so it is tested without a window.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field

from psygnal import evented

from probescope.core.dissection.formula import Formula
from probescope.core.dissection.results import Explanation
from probescope.core.dissection.settings import WINDOW_SETTINGS, DissectionSettings
from probescope.jobs.dissection import rows as r
from probescope.jobs.dissection.layer_data import LayerData

_SAME = operator.is_  # results and formulas are compared by identity: a new object is a new view


def later_part(before: LayerData | None, d: LayerData) -> bool:
    """`d` is a later partial result of the run that gave `before` (a new object: not `before` altered in place), so
    a unit whose result is the same object in both is unchanged. A kernel sends each unit's result once per run
    (jobs.kernel.transport), so identity holds across processes too."""
    return before is not None and before.result.units is not d.result.units and before.key == d.key and \
        before.dataset is d.dataset and before.store is d.store and before.result.settings == d.result.settings


@evented(equality_operators={"data": _SAME, "rows": _SAME, "formula": _SAME, "first_part": _SAME,
                             "cut_short": _SAME, "inputs": _SAME, "kept": _SAME})
@dataclass(eq=False)
class DissectionState:
    """The workspace's view state; `inputs` is (the loaded model, its layer, the loaded dataset: `Loaded`, str,
    BrodenDataset) the live results belong to, `kept` the complete results per settings key for those inputs (to
    switch between), `first_part` is (dataset, size of the whole) while the demo dataset's first images stand in for
    it, `picked` the unit the workspace chose to show (not the user), `cut_short` what a cancelled run finished when
    no complete result came before it."""

    inputs: tuple | None = None
    kept: dict[str, LayerData] = field(default_factory=dict)
    data: LayerData | None = None
    rows: dict[int, r.UnitRow] = field(default_factory=dict)
    unit: int = -1
    formula: Formula | None = None  # what the overlays show: the chosen explanation or a beam-trace formula
    formula_label: str = ""
    settings: DissectionSettings = WINDOW_SETTINGS
    first_part: tuple | None = None
    picked: int = -1
    cut_short: LayerData | None = None

    def show_layer(self, d: LayerData) -> None:
        """`d` on screen, with its table rows (a row is kept while its unit's result is the same object in a later
        part of the same run)."""
        before = self.data
        same_run = later_part(before, d)
        old = before.result.units if same_run else {}
        n_pixels = d.store.n_pixels
        self.rows = {u: self.rows[u] if u in self.rows and old.get(u) is x else r.unit_row(d.result, x, n_pixels)
                     for u, x in d.result.units.items()}
        if same_run:  # (histograms are computed in the window: a kernel's next part comes without them)
            for unit, found in before.histograms.items():
                d.histograms.setdefault(unit, found)
        self.data = d

    def clear(self) -> None:
        self.data, self.rows, self.unit, self.formula, self.formula_label = None, {}, -1, None, ""

    def keep(self, d: LayerData) -> None:
        """`d` among the results kept (a new dict: the change is signalled)."""
        self.kept = {**self.kept, d.key: d}

    def live_model(self, d: LayerData):
        """The ModelInfo of the model `d` was dissected from, when it is the loaded one (ablation and drawing need its
        modules), else None (a saved result of a batch job)."""
        loaded = self.inputs[0] if self.inputs is not None else None
        return loaded.value if loaded is not None and not d.origin else None

    def of_first_part(self, d: LayerData) -> bool:
        """`d` is of the first part of a dataset still being written (the demo's first images)."""
        return self.first_part is not None and d.dataset is self.first_part[0]

    def refining(self, dataset) -> bool:
        """The result on screen is of a first part, and `dataset` is the whole it stands for."""
        return self.data is not None and self.of_first_part(self.data) and dataset is not self.data.dataset

    def first_unit(self) -> int:
        """The unit shown first: the best (by IoU) real composition, among the specialised units when there are
        any, so the first view shows where the searches disagree."""
        composed = [x for x in self.rows.values() if x.explanations.get("iou") is not None
                    and x.explanations["iou"].length > 1]
        pool = [x for x in composed if r.is_specialised(x)] or composed or list(self.rows.values())
        return max(pool, key=lambda x: (x.iou("iou"), -x.unit)).unit

    def explanation(self, method: str) -> Explanation | None:
        """The selected unit's explanation by `method` (None without one)."""
        u = self.data.result.units.get(self.unit) if self.data is not None else None
        return None if u is None else r.explanation_of(u, method)

    def choose(self, method: str) -> None:
        """The overlays show the selected unit's explanation by `method`."""
        chosen = self.explanation(method)
        self.formula = chosen.formula if chosen else None
        self.formula_label = chosen.label if chosen else ""

    def header(self, d: LayerData, iou_min: float, refining: tuple[int, int] | None = None) -> str:
        """What the table holds: its summary, how far the dissection is, and which images it is of when they are a
        first part of the dataset (`refining`: units done and in all of the whole dataset's dissection, under way)."""
        rows = [self.rows[u] for u in sorted(self.rows)]
        result = d.result
        state = "" if refining else " done: cancelled" if d is self.cut_short else " so far"
        progress = "" if result.complete else f" ({len(rows)} of {result.n_units} units{state})"
        where = f" ({d.model_label}, from {d.origin})" if d.origin else ""
        part = ""
        if self.of_first_part(d):
            whole = self.first_part[1]
            part = f" · <i>on the first {d.dataset.n_images:,} of {whole:,} images</i>"
            if refining:
                part += f"; dissecting all {whole:,} images: {refining[0]} of {refining[1]} units done"
        return f"<b>Units of {d.layer}</b>{where}: {r.summary(rows, iou_min)}{progress}{part}"

    def concepts(self) -> list[str]:
        """Every concept an explanation in the table names, sorted."""
        return sorted({c for row in self.rows.values() for c in row.concepts()})
