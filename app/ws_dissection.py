"""Dissection workspace (first version): the model's layers, a table of the selected layer's units with their
best single concept (Network Dissection: IoU and Detection Accuracy), and the probing dataset's images with their
object labels overlaid. Compositional explanations, unit maps and the rest come with the Dissection issue.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
from PySide6.QtCore import Qt
from PySide6.QtWidgets import QHeaderView, QLabel, QSplitter, QTableWidget, QTableWidgetItem, QVBoxLayout, QWidget

from probescope.app.export import ExportTarget
from probescope.app.workers import IO, Partial, Progress, TaskContext
from probescope.app.ws_base import Workspace
from probescope.widgets.images import blend, boundaries, label_colors, to_qimage
from probescope.widgets.thumbnail_grid import Thumbnail, ThumbnailGrid

N_PREVIEW = 60  # images shown; the full dataset is browsed in the Dissection issue's views
CHUNK = 12
OVERLAY_CATEGORY = "object"
UNIT_SETTINGS = {"max_length": 1, "sweep_length": 0}  # atomic concepts only: the quick first look


def dissect_layer(model, layer: str, dataset, store, ctx: TaskContext) -> Iterator[Progress]:
    """(LabelStore, DissectionResult) of `layer`: activations (cached on disk), labels (reused when given), units."""
    from probescope.core.activations import extract_activations
    from probescope.core.cache import cache_dir
    from probescope.core.dissection.engine import DissectionSettings, dissect
    from probescope.core.dissection.labels import LabelStore

    model.module.eval()
    yield Progress(0.0, f"activations of {layer}")
    activations = extract_activations(model, layer, dataset, cache_dir(), progress=ctx.progress,
                                      cancel=ctx.cancelled)
    if store is None:
        yield Progress(None, "reading the label maps")
        store = LabelStore.build(dataset, progress=ctx.progress, cancel=ctx.cancelled)
    yield Progress(0.0, f"dissecting {layer}")
    result = dissect(store, activations, DissectionSettings(**UNIT_SETTINGS), progress=ctx.progress,
                     cancel=ctx.cancelled)
    return store, result


def overlay_thumbnails(dataset, indices: list[int], ctx: TaskContext) -> Iterator[Partial | Progress]:
    """Thumbnails of `indices` with the object labels blended in, yielded in chunks as partial results."""
    chunk: list[Thumbnail] = []
    for k, i in enumerate(indices):
        ctx.check()
        image = dataset.load_image(i)
        names = []
        for category, labels in dataset.pixel_layers(i):
            if category != OVERLAY_CATEGORY:
                continue
            labels = _upsample_nearest(labels, image.shape[:2])
            image = blend(image, label_colors(labels), labels > 0, alpha=0.5)
            image[boundaries(labels)] = 255
            names += [dataset.labels[int(n)].name for n in np.unique(labels) if n > 0 and int(n) in dataset.labels]
        scene = [dataset.labels[n].name for cat, n in dataset.image_labels(i) if cat == "scene" and n in dataset.labels]
        caption = scene[0] if scene else dataset.image_path(i).name
        chunk.append(Thumbnail(to_qimage(image), caption, f"{dataset.image_path(i).name}\n{', '.join(names)}"))
        if len(chunk) == CHUNK or k == len(indices) - 1:
            yield Partial(chunk)
            chunk = []
        yield Progress((k + 1) / len(indices), f"reading image {k + 1} of {len(indices)}")


def _upsample_nearest(labels: np.ndarray, shape: tuple[int, int]) -> np.ndarray:
    rows = np.arange(shape[0]) * labels.shape[0] // shape[0]
    cols = np.arange(shape[1]) * labels.shape[1] // shape[1]
    return labels[rows[:, None], cols[None, :]]


class DissectionWorkspace(Workspace):
    name = "dissection"
    title = "Dissection"
    needs = ("model", "dataset", "layer")

    def __init__(self, pool, parent: QWidget | None = None):
        super().__init__(pool, parent)
        self.layers = QTableWidget(0, 3)
        self.layers.setHorizontalHeaderLabels(["layer", "kind", "output (C, H, W)"])
        self.layers.verticalHeader().setVisible(False)
        self.layers.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.layers.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.layers.horizontalHeader().setSectionResizeMode(0, QHeaderView.ResizeMode.ResizeToContents)
        self.layers.horizontalHeader().setStretchLastSection(True)
        self.layers.itemSelectionChanged.connect(self._pick_layer)
        self.units = QTableWidget(0, 5)
        self.units.setHorizontalHeaderLabels(["unit", "concept", "category", "IoU", "DA"])
        self.units.verticalHeader().setVisible(False)
        self.units.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
        self.units.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
        self.units.horizontalHeader().setStretchLastSection(True)
        for table in (self.layers, self.units):
            table.verticalHeader().setDefaultSectionSize(table.fontMetrics().height() + 6)
        self.units_caption = QLabel("<b>Units</b>")
        self.images = ThumbnailGrid(112)
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        left = QWidget()
        left_layout = QVBoxLayout(left)
        left_layout.setContentsMargins(0, 0, 0, 0)
        left_layout.addWidget(QLabel("<b>Layers</b> (select one to dissect)"))
        left_layout.addWidget(self.layers, 2)
        left_layout.addWidget(self.units_caption)
        left_layout.addWidget(self.units, 3)
        right = QWidget()
        right_layout = QVBoxLayout(right)
        right_layout.setContentsMargins(0, 0, 0, 0)
        right_layout.addWidget(self.caption)
        right_layout.addWidget(self.images)
        splitter = QSplitter(Qt.Orientation.Horizontal)
        splitter.addWidget(left)
        splitter.addWidget(right)
        splitter.setStretchFactor(1, 3)
        splitter.setSizes([420, 900])
        layout = QVBoxLayout(self)
        layout.addWidget(splitter)
        self._dataset_requested = None
        self._dataset_shown = False
        self._done_parts: set[str] = set()
        self._units_for: tuple | None = None  # (model, layer, dataset) of the unit table shown or on its way
        self._units_shown = False
        self._store: tuple | None = None  # (dataset, LabelStore): label maps read once per dataset

    def export_targets(self) -> list[ExportTarget]:
        return [ExportTarget("Dissection", self), ExportTarget("Dataset images", self.images),
                ExportTarget("Unit table", self.units)]

    def step(self, offset: int) -> None:
        self.images.step(offset)

    def refresh(self) -> None:
        self._show_layers()
        self._request_units()
        dataset = self.state.dataset
        if dataset is self._dataset_requested:  # shown, or on its way
            return
        n = min(N_PREVIEW, dataset.n_images)
        self._dataset_requested, self._dataset_shown = dataset, False

        def first_chunk(items: list[Thumbnail]) -> None:
            if not self._dataset_shown:  # replace the previous dataset's images only once new ones arrive
                self.images.thumbnails.set_items([])
                self.caption.setText(f"{self.state.get('dataset').label}: the first {n} images with their object "
                                     "labels")
                self._dataset_shown = True
            self.images.thumbnails.append_items(items)

        def failed(_error) -> None:
            self._dataset_requested = None

        self.pool.submit(lambda ctx: overlay_thumbnails(dataset, list(range(n)), ctx), name="dataset preview",
                         key=self.task_key("images"), executor=IO, on_partial=first_chunk,
                         on_result=lambda _r: self._finished("images"), on_error=failed)

    def _finished(self, part: str) -> None:
        """The first content is on screen once both the images and the unit table have arrived."""
        self._done_parts.add(part)
        if self._done_parts >= {"images", "units"}:
            self.mark_initial_work_done()

    def _request_units(self) -> None:
        model, layer, dataset = self.state.model, self.state.layer, self.state.dataset
        if self._units_for == (model, layer, dataset) and (
                self._units_shown or self.pool.is_running(self.task_key("units"))):
            return  # shown, or on its way (after a cancel, asking again recomputes)
        self._units_for, self._units_shown = (model, layer, dataset), False
        store = self._store[1] if self._store is not None and self._store[0] is dataset else None
        self.units_caption.setText(f"<b>Units of {layer}</b> (working…)")

        def show(result: tuple) -> None:
            self._store = (dataset, result[0])
            self._units_shown = True
            self._show_units(layer, result[1])
            self._finished("units")

        def failed(_error) -> None:
            self.units_caption.setText(f"<b>Units of {layer}</b> (failed: see the message above)")

        self.pool.submit(lambda ctx: dissect_layer(model, layer, dataset, store, ctx), name=f"dissect {layer}",
                         key=self.task_key("units"), on_result=show, on_error=failed)

    def _show_units(self, layer: str, result) -> None:
        rows = sorted(result.units.values(), key=lambda u: -(u.netdissect.iou if u.netdissect else -1))
        self.units.setRowCount(len(rows))
        for row, unit in enumerate(rows):
            best = unit.netdissect
            if best is None:
                cells = (str(unit.unit), "—", "", "", "")
            else:
                category = result.labels.get(best.formula.atoms[0], ("", ""))[1]
                cells = (str(unit.unit), best.label, category, f"{best.iou:.3f}", f"{best.da:.2f}")
            for col, text in enumerate(cells):
                self.units.setItem(row, col, QTableWidgetItem(text))
        self.units.resizeColumnsToContents()
        self.units_caption.setText(f"<b>Units of {layer}</b>: best single concept (Network Dissection), by IoU")

    def _show_layers(self) -> None:
        loaded = self.state.get("model")
        current = self.state.layer
        self.layers.blockSignals(True)
        self.layers.setRowCount(len(loaded.layers))
        for row, info in enumerate(loaded.layers):
            shape = "×".join(map(str, info.out_shape)) if info.out_shape else "—"
            for col, text in enumerate((info.name, info.kind, shape)):
                self.layers.setItem(row, col, QTableWidgetItem(text))
            if info.name == current:
                self.layers.selectRow(row)
                self.layers.scrollToItem(self.layers.item(row, 0))
        self.layers.blockSignals(False)

    def _pick_layer(self) -> None:
        rows = self.layers.selectionModel().selectedRows()
        if rows and self.state is not None:
            self.state.set_layer(self.layers.item(rows[0].row(), 0).text())
