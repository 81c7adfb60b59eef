"""What a unit does for the model, beside what it detects: the Role panel of the Dissection workspace.

Removing the selected unit (zero or mean ablation, Bau et al. 2020) shows which classes lose accuracy and
probability of the true class on the labelled probing images; the layer view ablates every unit and shows units x
classes, the units ordered by their explanation's concept; a table selection is ablated as one group. The network
after the layer runs on the cached activations (`core.ablation`), so a unit costs a tail pass, not a forward; the
ablation of a layer is built once per result and kept in the session of the process that runs it
(`jobs.ablation`).
"""

from __future__ import annotations

from html import escape

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import Signal
from PySide6.QtWidgets import QComboBox, QHBoxLayout, QLabel, QPushButton, QVBoxLayout, QWidget

from probescope.app.compute.workers import WorkerPool
from probescope.core.ablation.groups import each_unit, hand_picked
from probescope.core.ablation.results import AblationResult
from probescope.jobs.ablation import ablate_job
from probescope.jobs.dissection import rows as r
from probescope.jobs.dissection.layer_data import LayerData
from probescope.jobs.inputs import ModelInfo
from probescope.jobs.protocol import COMPUTE, Job, TaskError
from probescope.widgets.plot_frame import titled_plot
from probescope.widgets.plots_bars import ClassBars

TOP = 8  # classes in the unit's bars
UNTITLED = "<b>Role</b>: select a unit"  # the title while no ablation of the unit on screen is shown


def ablation_job(d: LayerData, model: ModelInfo, mode: str, groups: list) -> Job:
    """The Job that ablates `groups` (core.ablation UnitGroups) at the layer of `d` (the workflow's, jobs.ablation)."""
    return Job(ablate_job, dict(model=model, key=d.key, layer=d.layer, activations=d.activations, dataset=d.dataset,
                                store=d.store, mode=mode, groups=groups))


def concept_order(d: LayerData) -> list[int]:
    """The layer's units ordered by their compositional explanation's first concept (then IoU), so units that
    detect the same thing sit together in the layer view."""
    def key(u: int) -> tuple:
        e = d.result.units[u].explanations.get("iou") or d.result.units[u].netdissect
        return ("~", 0.0, u) if e is None else (e.label.strip("()").split(" ")[0], -e.iou, u)

    return sorted(d.result.units, key=key)


class RolePanel(QWidget):
    """`ablated(result)` after each ablation (the workspace puts the unit's top classes on its card)."""

    ablated = Signal(object)

    def __init__(self, pool: WorkerPool, key, parent: QWidget | None = None):
        super().__init__(parent)
        self.pool, self._key = pool, key
        self.mode = QComboBox()
        self.mode.addItem("zero (the paper's)", "zero")
        self.mode.addItem("mean activation", "mean")
        self.mode.setToolTip("zero: the units output 0; mean: their mean over the dataset (keeps the layer's level)")
        self._layer_asked = False  # the panel shows (or computes) the layer's matrix, not a unit's role
        self.title = QLabel(UNTITLED)
        self.title.setWordWrap(True)
        self.bars = ClassBars("p(true class) lost without the unit: the classes most hurt")
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.layer_button = QPushButton("Ablate every unit of the layer")
        self.matrix = titled_plot("Δ accuracy without each unit", "class", "unit (by concept)")
        self.matrix.setMouseEnabled(False, False)
        self.image = pg.ImageItem()
        self.matrix.addItem(self.image)
        self.colour_bar = pg.ColorBarItem(values=(-1, 1), colorMap=_diverging(), interactive=False,
                                          width=16)  # (no label of its own: the title says what it is; with one
        # the bar's ticks ran past the panel's edge)
        self.colour_bar.setImageItem(self.image, insert_in=self.matrix.getPlotItem())
        self.matrix.apply_palette()  # (the colour bar's axis too)
        self.matrix.setMinimumHeight(260)
        self.matrix.hide()
        top = QHBoxLayout()  # (wraps: in one row a narrow panel squeezed the button's text)
        top.addWidget(QLabel("ablation"))
        top.addWidget(self.mode)
        top.addStretch(1)
        layer_row = QHBoxLayout()
        layer_row.addWidget(self.layer_button)
        layer_row.addStretch(1)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.addLayout(top)
        layout.addLayout(layer_row)
        layout.addWidget(self.title)
        layout.addWidget(self.bars)
        layout.addWidget(self.note)
        layout.addWidget(self.matrix, 1)
        layout.addStretch(1)  # the bars stay together at the top while the matrix is hidden
        self.data: LayerData | None = None
        self.model = None
        self.results: dict[tuple, AblationResult] = {}  # (result key, mode, units) -> its ablation
        self.layer_button.clicked.connect(self.ablate_layer)
        self.mode.currentIndexChanged.connect(lambda _i: self.results.clear())

    def set_layer(self, d: LayerData | None, model) -> None:
        """A new result on screen: what was ablated belonged to the previous one."""
        if d is None or self.data is None or d.key != self.data.key:
            self.results.clear()
            self._show_matrix(False)
            self.bars.clear()
            self.title.setText(UNTITLED)  # (it named the previous layer's unit: issue 45)
            self.note.setText("")
            self._layer_asked = False
        self.data, self.model = d, model

    def _show_matrix(self, shown: bool) -> None:
        layout = self.layout()
        layout.setStretch(layout.count() - 1, 0 if shown else 1)
        self.matrix.setVisible(shown)

    def show_units(self, units: list[int], on_screen: bool) -> None:
        """Ablate `units` as one group (the selected unit, or a table selection) when the panel is on screen."""
        d = self.data
        if d is None or not units or not on_screen:
            if not on_screen and not self._layer_asked:  # ablated once shown: until then it names no other unit's
                self.pool.cancel(self._key("role"), superseded=True)  # (the layer's matrix, asked for, goes on)
                self._show_matrix(False)
                self.bars.clear()
                self.title.setText(UNTITLED)
                self.note.setText("")
            return

        group = hand_picked(units, f"unit {units[0]}" if len(units) == 1 else "")
        mode = self.mode.currentData()
        key = (d.key, mode, group.units)
        if key in self.results:
            self.pool.cancel(self._key("role"), superseded=True)  # latest request wins, from the cache too
            self._layer_asked = False
            self._show(self.results[key])
            return
        self.title.setText(f"<b>Role of {group.name}</b>: ablating…")
        self._layer_asked = False
        model = self.model

        def done(result: AblationResult) -> None:
            self.results[key] = result
            self._show(result)

        self.pool.submit(ablation_job(d, model, mode, [group]), name=f"ablate {group.name}",
                         key=self._key("role"), executor=COMPUTE, on_result=done, on_error=self._failed)

    def _show(self, result: AblationResult) -> None:
        self._show_matrix(False)  # the unit's (or group's) bars; the layer's matrix is one click away again
        self.bars.show()
        hurt = result.most_hurt(0, TOP, by="probability")
        self.bars.set_bars([e.name for e in hurt], np.array([max(-e.delta_p_true, 0.0) for e in hurt]),
                           classes=[result.classes.index(e.name) for e in hurt])
        changed = [e for e in hurt if e.delta_accuracy != 0]
        accuracy = ("; accuracy changes in " + ", ".join(f"{e.name} {e.delta_accuracy:+.1%}" for e in changed)
                    if changed else "; no class's accuracy changes (a unit among many: see the guide)")
        self.title.setText(f"<b>Role of {result.groups[0].name}</b>{self._explained(result.groups[0].units)} "
                           f"({result.mode} ablation, {result.path} path){accuracy}")
        self._note(result)
        self.ablated.emit(result)

    def _note(self, result: AblationResult) -> None:
        self.note.setText(f"{int(result.images.sum())} labelled images in {len(result.classes)} classes; "
                          f"{result.path_note}")

    def _explained(self, units: tuple[int, ...]) -> str:
        """' = (house AND village-s)': a single unit's compositional explanation, '' otherwise."""
        d = self.data
        if d is None or len(units) != 1 or units[0] not in d.result.units:
            return ""
        e = d.result.units[units[0]].explanations.get("iou") or d.result.units[units[0]].netdissect
        return "" if e is None else f" = {escape(e.label)}"

    def ablate_layer(self) -> None:
        """Every unit alone: the units x classes matrix (Δ accuracy), units in concept order."""
        d, model = self.data, self.model
        if d is None:
            return

        order = concept_order(d)
        mode = self.mode.currentData()
        self.bars.clear()  # what the previous ablation (a unit, a selection) did is not this one's
        self.bars.hide()
        self.note.setText("")
        self.title.setText(f"<b>Ablating the {len(order)} units of {d.layer}</b>…")
        self._layer_asked = True  # what the panel shows until a unit is ablated on screen

        def done(result: AblationResult) -> None:
            self._show_layer_matrix(result, d.layer)

        key = (d.key, mode, "layer")
        if key in self.results:
            # (a unit's ablation on its way would replace the matrix)
            self.pool.cancel(self._key("role"), superseded=True)
            done(self.results[key])
            return

        def keep(result: AblationResult) -> None:
            self.results[key] = result
            done(result)

        self.pool.submit(ablation_job(d, model, mode, each_unit(order)),
                         name=f"ablate every unit of {d.layer}", key=self._key("role"), executor=COMPUTE,
                         on_result=keep, on_error=self._failed)

    def _show_layer_matrix(self, result: AblationResult, layer: str) -> None:
        """Units along x (in concept order, their numbers as ticks), classes along y by name, a diverging colour
        scale symmetric about 0 at the largest change (a fixed ±0.5 left a layer's few-percent changes white),
        with its colour bar."""
        delta = result.delta_accuracy  # (units, classes): the image's x and y
        span = max(float(np.abs(delta).max()), 1e-3) if delta.size else 1.0
        self.image.setImage(delta, autoLevels=False)
        self.colour_bar.setLevels((-span, span))
        units = [g.units[0] for g in result.groups]
        # named columns and rows: as many names as fit without touching (a fixed 1 in 16 ran "59103" together)
        self.matrix.getAxis("bottom").set_labels([(k + 0.5, str(u)) for k, u in enumerate(units)])
        self.matrix.getAxis("left").set_labels([(k + 0.5, name) for k, name in enumerate(result.classes)])
        self.matrix.getPlotItem().setRange(xRange=(0, len(units)), yRange=(0, len(result.classes)), padding=0)
        self._show_matrix(True)
        self.title.setText(f"<b>{layer}</b>: Δ accuracy of each class (rows) without each unit (columns, ordered by "
                           f"the first concept of their {r.METHOD_NAMES['iou']} explanation); blue: the ablation "
                           f"hurts the class, red: it helps; the scale ends at ±{span:.3f}")
        self._note(result)

    def _failed(self, error: TaskError) -> None:
        self.title.setText(f"<b>Role</b>: {error.message}")

    def card_line(self, unit: int) -> str:
        """'without it: village −0.039, street −0.020, garden −0.010 (p of the true class)', or '' unknown."""
        d = self.data
        result = self.results.get((d.key, self.mode.currentData(), (unit,))) if d is not None else None
        if result is None:
            return ""
        hurt = result.most_hurt(0, 3, by="probability")
        return "without it: " + ", ".join(f"{e.name} {e.delta_p_true:+.3f}" for e in hurt) + " (p of the true class)"


def _diverging() -> pg.ColorMap:
    """Blue (hurt) through white to red (helped)."""
    return pg.ColorMap([0.0, 0.5, 1.0], [(33, 102, 172), (247, 247, 247), (178, 24, 43)])
