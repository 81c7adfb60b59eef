"""The Drawing panel of the Dissection workspace: what the selected unit would draw (issue 28, part 2), beside its
top images: its feature visualisation by activation maximisation (`core.featurevis`, run by
`jobs.per_image.drawing_job` in the compute thread), or that of the table's selection as one direction, or of the
unit's explanation's concept (its mean activation vector over the dataset).

An optimisation takes seconds (4.6 CPU s a unit on the demo model, 49 on ResNet-18's layer4), so it starts on the
Draw button, with progress and cancel; what was drawn before comes from the cache (per model weights, layer,
direction and settings) as soon as the unit is selected. A drawing is shown only while it is of what the panel is
asked for: the unit, selection or concept of the model and layer on screen.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from PySide6.QtCore import QRectF, QSize, Signal
from PySide6.QtGui import QImage, QPainter
from PySide6.QtWidgets import (
    QComboBox,
    QHBoxLayout,
    QLabel,
    QPushButton,
    QSizePolicy,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from probescope.app.compute.workers import TaskHandle, WorkerPool
from probescope.app.dissection.image_panel import seeded_ref
from probescope.core.featurevis.settings import MAX_STEPS, Direction, VisSettings, Visualization
from probescope.jobs.dissection import rows as r
from probescope.jobs.dissection.layer_data import LayerData
from probescope.jobs.inputs import ModelInfo
from probescope.jobs.per_image import DatasetRef, concept_drawing_job, drawing_job
from probescope.jobs.protocol import COMPUTE, Job, Progress, TaskError
from probescope.widgets.images import to_qimage

CAVEAT = ("Such images show what can drive a unit, not what drives it on real data (Geirhos et al. 2023): read "
          "them beside its top images.")
MODES = (("unit", "the unit"), ("selection", "the table's selected units"),
         ("concept", "the unit's explanation (its mean activation)"))
SHOWN_SIZE = 192  # pixels: the demo model's 128 enlarged; larger models' images shrink to it
UNTITLED = "<b>What the unit would draw</b>"  # the title while no unit of a layer is on screen


@dataclass(frozen=True)
class Target:
    """What is to be drawn: a direction, or a concept's formula (its direction is computed in the job)."""

    name: str
    key: tuple
    direction: Direction | None = None
    formula: object = None


class FittedImage(QWidget):
    """An image drawn as large as the widget allows, square, up to SHOWN_SIZE (a short panel shrinks it whole)."""

    def __init__(self, parent: QWidget | None = None):
        super().__init__(parent)
        self.image: QImage | None = None
        self.setMinimumSize(96, 96)
        self.setSizePolicy(QSizePolicy.Policy.Preferred, QSizePolicy.Policy.Expanding)

    def sizeHint(self) -> QSize:  # noqa: N802
        return QSize(SHOWN_SIZE, SHOWN_SIZE)

    def set_image(self, image: QImage | None) -> None:
        self.image = image
        self.update()

    def paintEvent(self, _event) -> None:  # noqa: N802
        if self.image is None:
            return
        side = min(self.width(), self.height(), SHOWN_SIZE)
        p = QPainter(self)
        p.setRenderHint(QPainter.RenderHint.SmoothPixmapTransform)
        p.drawImage(QRectF((self.width() - side) / 2, (self.height() - side) / 2, side, side), self.image)
        p.end()


class DrawingPanel(QWidget):
    """The feature visualisation of the selected unit, the selection or the unit's concept (module docstring).
    `drawn` is emitted when the drawing on screen changes (the unit card shows a unit's own)."""

    drawn = Signal()

    def __init__(self, pool: WorkerPool, key: Callable[[str], str], selection: Callable[[], list[int]],
                 parent: QWidget | None = None):
        super().__init__(parent)
        self.pool, self._key, self._selection = pool, key, selection
        self.data: LayerData | None = None
        self.model: ModelInfo | None = None
        self.unit = -1
        self.method = "iou"  # the unit view's explanation method (for the concept)
        self.shown: tuple | None = None  # the key of the drawing on screen
        self.visualization: Visualization | None = None
        self._running: TaskHandle | None = None
        self._running_key: tuple | None = None
        self.title = QLabel(UNTITLED)
        self.title.setWordWrap(True)
        self.mode = QComboBox()
        for value, text in MODES:
            self.mode.addItem(text, value)
        self.mode.setSizeAdjustPolicy(QComboBox.SizeAdjustPolicy.AdjustToMinimumContentsLengthWithIcon)
        self.mode.setMinimumContentsLength(12)  # (a narrow panel elides the longer choices, never widens)
        self.steps = QSpinBox()
        self.steps.setRange(1, MAX_STEPS)
        self.steps.setValue(VisSettings().steps)
        self.steps.setSuffix(" steps")
        self.draw_button = QPushButton("Draw")
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setVisible(False)
        self.picture = FittedImage()
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.caveat = QLabel(f"<i>{CAVEAT}</i>")
        self.caveat.setWordWrap(True)
        controls = QHBoxLayout()
        controls.addWidget(self.mode, 1)
        controls.addWidget(self.steps)
        buttons = QHBoxLayout()
        buttons.addWidget(self.draw_button)
        buttons.addWidget(self.cancel_button)
        buttons.addWidget(self.status, 1)
        text = QVBoxLayout()  # beside the picture: the panel sits under the unit's images, wide and short
        text.addWidget(self.title)
        text.addLayout(controls)
        text.addLayout(buttons)
        text.addWidget(self.caption)
        text.addWidget(self.caveat)
        text.addStretch(1)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.addWidget(self.picture)
        layout.addLayout(text, 1)
        self.draw_button.clicked.connect(self.draw)
        self.cancel_button.clicked.connect(lambda: self.pool.cancel(self._key("drawing")))
        self.mode.currentIndexChanged.connect(lambda _i: self._look_up())
        self.steps.valueChanged.connect(lambda _v: self._look_up())
        pool.progress.connect(self._progress)
        pool.finished.connect(self._finished)

    # -- what it is of ---------------------------------------------------------------------------------------------
    def set_unit(self, d: LayerData, model: ModelInfo | None, unit: int, method: str) -> None:
        """The unit on screen (of `model`'s layer; None: a saved result without its model, nothing can be drawn)."""
        self.data, self.model, self.unit, self.method = d, model, unit, method
        self._look_up()

    def clear(self) -> None:
        """Other inputs: nothing shown belongs to them (a running optimisation is cancelled)."""
        self.pool.cancel(self._key("drawing"), superseded=True)
        self.pool.cancel(self._key("drawing-cache"), superseded=True)
        self.data, self.model, self.unit = None, None, -1
        self._blank("")

    def subject(self) -> str:
        """What the drawing is of, for its figure's file name."""
        return self.caption.text().split(",", 1)[0] if self.shown is not None else ""

    def settings(self) -> VisSettings:
        return VisSettings(steps=self.steps.value())

    def target(self) -> Target | None:
        """What the chooser asks for, for the unit on screen; None when there is nothing to draw."""
        d = self.data
        if d is None or self.unit not in d.result.units:
            return None
        n_units, base = d.result.n_units, (self.model, d.layer, self.settings())
        mode = self.mode.currentData()
        if mode == "selection":
            direction = Direction.units(sorted(set(self._selection()) or {self.unit}), n_units)
            return Target(direction.name, (*base, direction.key()), direction)
        if mode == "concept":
            method = self.method if self.method in r.METHODS else "iou"  # (a trace formula shown: the search's)
            e = r.explanation_of(d.result.units[self.unit], method)
            if e is None:
                return None
            return Target(f"concept {e.label}", (*base, "concept", e.label, DatasetRef.of(d.dataset)), None,
                          e.formula)
        direction = Direction.unit(self.unit, n_units)
        return Target(direction.name, (*base, direction.key()), direction)

    # -- the cache, the optimisation ----------------------------------------------------------------------------------
    def _look_up(self) -> None:
        """Show the target's drawing when it was made before (a quick job), else offer to draw it."""
        target = self.target()
        if target is None or self.model is None:
            self._blank("a saved result without its model: nothing to draw" if self.data is not None and
                        self.model is None else "")
            return
        if target.key == self.shown:
            return
        self._blank("")
        self.title.setText(f"<b>What {target.name} would draw</b> at {self.data.layer}")
        if target.key == self._running_key:
            self._busy(True, "drawing…")
            return
        self._busy(False, "not drawn yet: Draw starts the optimisation")
        if target.direction is None:
            return  # (a concept's direction is made by the job itself)
        job = Job(drawing_job, {"model": self.model, "layer": self.data.layer, "direction": target.direction,
                                "settings": self.settings(), "only_cached": True})
        self.pool.submit(job, name=f"cached drawing of {target.name}", key=self._key("drawing-cache"),
                         executor=COMPUTE, on_result=lambda vis: vis is not None and self._show(target, vis))

    def draw(self) -> None:
        """Start the optimisation for the target (a running one for another target is replaced)."""
        target = self.target()
        if target is None or self.model is None:
            return
        base = {"model": self.model, "layer": self.data.layer, "settings": self.settings()}
        if target.direction is not None:
            job = Job(drawing_job, {**base, "direction": target.direction})
        else:
            job = Job(concept_drawing_job, {**base, "dataset": seeded_ref(self.pool, self.data),
                                            "formula": target.formula, "name": target.name})
        self._running_key = target.key
        self._busy(True, "drawing…")
        self._running = self.pool.submit(job, name=f"drawing of {target.name}", key=self._key("drawing"),
                                         executor=COMPUTE, on_result=lambda vis: self._drawn(target, vis),
                                         on_error=self._failed)

    def _drawn(self, target: Target, vis: Visualization) -> None:
        current = self.target()
        if current is not None and current.key == target.key:
            self._show(target, vis)
        else:
            self.status.setText(f"the drawing of {target.name} is done (kept in the cache)")

    def _show(self, target: Target, vis: Visualization) -> None:
        current = self.target()
        if current is None or current.key != target.key:
            return  # asked for since: another unit, mode or inputs
        self.shown, self.visualization = target.key, vis
        self.picture.set_image(to_qimage(vis.image))
        self.drawn.emit()
        top = float(self.data.peaks[:, self.unit].max()) if target.direction is not None and \
            target.name == f"unit {self.unit}" else None
        beside = f"; its highest activation on the dataset is {top:.3g}" if top is not None else ""
        source = " (from the cache)" if vis.from_cache else ""
        self.caption.setText(f"{target.name}, {vis.settings.steps} steps, seed {vis.settings.seed}{source}: mean "
                             f"activation along the direction {vis.objective:.3g}, peak {vis.peak:.3g}{beside}")
        self._busy(self._running_key is not None and self._running_key != target.key, "")

    def _blank(self, text: str) -> None:
        self.shown, self.visualization = None, None
        self.title.setText(UNTITLED)  # (it named the previous layer's unit after a switch of layer)
        self.picture.set_image(None)
        self.caption.setText("")
        self.status.setText(text)
        self.drawn.emit()

    def unit_drawing(self, unit: int) -> QImage | None:
        """The drawing on screen when it is of `unit` alone."""
        target = self.target()
        drawn = self.shown is not None and target is not None and target.key == self.shown
        return self.picture.image if drawn and target.name == f"unit {unit}" else None

    def _busy(self, busy: bool, text: str) -> None:
        self.cancel_button.setVisible(busy)
        self.draw_button.setEnabled(not busy)
        self.status.setText(text)

    def _progress(self, handle: TaskHandle, progress: Progress) -> None:
        if handle is self._running and progress.message:
            self.status.setText(progress.message)

    def _finished(self, handle: TaskHandle) -> None:
        if handle is not self._running:
            return
        self._running, self._running_key = None, None
        target = self.target()
        drawn = target is not None and target.key == self.shown
        self._busy(False, "cancelled" if handle.cancelled else "" if drawn else self.status.text())

    def _failed(self, error: TaskError) -> None:
        self.status.setText(error.message)
