"""The Image panel of the Dissection workspace: the layer's view of one probing image (issue 28, part 1).

Every unit that fires in the image is drawn as a region in its explanation's colour, the largest numbered as in
the legend beside the picture and the table of explanations (`core.dissection.image_view`, computed by
`jobs.per_image.image_view_job` in the I/O pool); a click on the image lists the units covering that pixel (its
coordinates said with their axes and grid), a click on a number, a legend entry or a table row the units of that
explanation, and a click on a listed unit opens it. Below, the image's own labels and, per explanation, how well
its units' masks agree with the ground truth there.

An image is picked from the unit grid's context menu, or by typing its number or file name. Only the latest
request is shown, and only while it belongs to the result on screen: other inputs clear the panel, a newer result
of the same layer (the next block of units, other settings) recomputes it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from PySide6.QtCore import QPoint, Qt, Signal
from PySide6.QtGui import QAction, QColor
from PySide6.QtWidgets import (
    QComboBox,
    QDoubleSpinBox,
    QHBoxLayout,
    QHeaderView,
    QLabel,
    QLineEdit,
    QMenu,
    QPushButton,
    QTableWidget,
    QTableWidgetItem,
    QVBoxLayout,
    QWidget,
)

from probescope.app.compute.workers import WorkerPool
from probescope.app.dissection.region_canvas import Region, RegionCanvas, grid_text, pixel_text
from probescope.app.figures.figure_menu import figure_menu
from probescope.jobs.dissection import rows as r
from probescope.jobs.dissection.layer_data import LayerData
from probescope.jobs.per_image import DatasetRef, ImageView, image_view_job
from probescope.jobs.protocol import IO, Job, TaskError
from probescope.widgets.identifiers import declare_identifiers
from probescope.widgets.images import to_qimage

COVERING_COLUMNS = ("unit", "explanation", "IoU", "activation", "threshold")
CONCEPT_COLUMNS = ("explanation", "units", "fires\npx", "drawn\npx", "truth\npx", "IoU\nhere")  # (narrow: two lines)
LABEL_COLUMNS = ("label", "category", "pixels")
DEFAULT_MIN_IOU = 0.04  # the interpretable-unit cut of Bau et al. 2017
PICK_TITLE = "<b>Units at the pixel or explanation clicked</b>"


def seeded_ref(pool: WorkerPool, d: LayerData) -> DatasetRef:
    """The reference a job finds `d`'s dataset by, with the dataset and label store the window has loaded put in the
    pool's session under it (so the job reads neither again)."""
    ref = DatasetRef.of(d.dataset)
    pool.session.get("dataset", ref, lambda: d.dataset)
    pool.session.get("labels", ref, lambda: d.store)
    return ref


def _caption(text: str) -> QLabel:
    label = QLabel(text)
    label.setWordWrap(True)
    return label


def _table(columns: tuple[str, ...], wide: int) -> QTableWidget:
    """A read-only table whose column `wide` holds names (explanations, labels): every column takes the width its
    texts need and a narrow panel scrolls sideways; a formula is never cut (issue 45 §3: "((house AND street-..."
    could not be told from its neighbours), the last column takes what room is left."""
    table = QTableWidget(0, len(columns))
    table.setHorizontalHeaderLabels(list(columns))
    header = table.horizontalHeader()
    header.setSectionResizeMode(QHeaderView.ResizeMode.ResizeToContents)
    header.setStretchLastSection(True)
    declare_identifiers(table, [wide])
    table.verticalHeader().setVisible(False)
    table.setWordWrap(False)  # one line a row: a short panel still shows several
    table.setEditTriggers(QTableWidget.EditTrigger.NoEditTriggers)
    table.setSelectionBehavior(QTableWidget.SelectionBehavior.SelectRows)
    table.setMinimumHeight(90)
    return table


def _fill(table: QTableWidget, rows: list[list[object]], colors: list[tuple[int, int, int]] | None = None) -> None:
    table.setRowCount(len(rows))
    for k, cells in enumerate(rows):
        for c, v in enumerate(cells):
            text = "—" if v is None else f"{v:.3f}" if isinstance(v, float) else f"{v:,}" if isinstance(v, int) else v
            item = QTableWidgetItem(str(text))
            item.setToolTip(str(text))
            if c == 0 and colors is not None:
                item.setBackground(QColor(*colors[k]))
                item.setForeground(QColor(0, 0, 0) if sum(colors[k]) > 380 else QColor(255, 255, 255))
            table.setItem(k, c, item)


class ImagePanel(QWidget):
    """The layer's view of one image (see the module docstring); `unit_clicked(unit)` when a covering unit is
    clicked."""

    unit_clicked = Signal(int)

    def __init__(self, pool: WorkerPool, key: Callable[[str], str], parent: QWidget | None = None):
        super().__init__(parent)
        self.pool, self._key = pool, key
        self.data: LayerData | None = None
        self.view: ImageView | None = None  # what is on screen
        self.image = -1  # the image picked (-1: none)
        self._wanted: tuple | None = None  # the request on its way (or shown): only its result is taken
        self._names: tuple[object, dict[str, int]] | None = None  # (dataset, file name -> row), built on first use
        self._on_screen = False
        self._order: list[int] = []  # the concepts in the table's order (row k is number k + 1)
        self.title = QLabel("<b>Image</b>: pick an image (right-click one in the unit's grid, or type its number "
                            "or file name)")
        self.title.setWordWrap(True)
        self.which = QLineEdit()
        self.which.setPlaceholderText("image number or file name")
        self.show_button = QPushButton("Show")
        self.method = QComboBox()
        self.min_iou = QDoubleSpinBox()
        self.min_iou.setRange(0.0, 1.0)
        self.min_iou.setSingleStep(0.01)
        self.min_iou.setDecimals(3)
        self.min_iou.setValue(DEFAULT_MIN_IOU)
        self.min_iou.setPrefix("IoU ≥ ")
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.cancel_button = QPushButton("Cancel")
        self.cancel_button.setVisible(False)
        self.canvas = RegionCanvas()
        self.covering = _table(COVERING_COLUMNS, 1)
        self.concepts = _table(CONCEPT_COLUMNS, 0)
        self.labels = _table(LABEL_COLUMNS, 0)
        self.covering.setMinimumHeight(130)  # (four rows in a short panel: the list the click is for)
        self.covering_title = _caption(PICK_TITLE)
        self._build()
        self.which.returnPressed.connect(self._typed)
        self.show_button.clicked.connect(self._typed)
        self.method.currentIndexChanged.connect(lambda _i: self._request())
        self.min_iou.valueChanged.connect(lambda _v: self._request())
        self.cancel_button.clicked.connect(lambda: self.pool.cancel(self._key("image")))
        self.canvas.clicked.connect(self.show_covering)
        self.canvas.concept_clicked.connect(self.show_concept)
        self.concepts.cellClicked.connect(lambda row, _c: self.show_concept(self._order[row]))
        self.concepts.verticalHeader().setVisible(True)  # (row k is the region numbered k on the picture)
        self.covering.cellClicked.connect(self._covering_clicked)

    def _build(self) -> None:
        pick = QHBoxLayout()
        pick.addWidget(self.which, 1)
        pick.addWidget(self.show_button)
        how = QHBoxLayout()
        how.addWidget(self.method, 1)
        how.addWidget(self.min_iou)
        busy = QHBoxLayout()
        busy.addWidget(self.status, 1)
        busy.addWidget(self.cancel_button)
        layout = QVBoxLayout(self)
        layout.setContentsMargins(4, 0, 4, 0)
        layout.addWidget(self.title)
        layout.addLayout(pick)
        layout.addLayout(how)
        layout.addLayout(busy)
        layout.addWidget(self.canvas, 3)
        layout.addWidget(self.covering_title)
        layout.addWidget(self.covering, 2)
        layout.addWidget(_caption("<b>Explanations whose units fire here</b>, most pixels drawn first (numbered as on"
                                  " the picture): fires px = their units' masks, which IoU here compares with the "
                                  "concept's pixels in this image; drawn px = where they are on top (0: only beneath "
                                  "other regions, not numbered)"))
        layout.addWidget(self.concepts, 1)
        layout.addWidget(_caption("<b>The image's own labels</b>"))
        layout.addWidget(self.labels, 1)

    # -- what it is of ---------------------------------------------------------------------------------------------
    def set_layer(self, d: LayerData) -> None:
        """The result on screen is `d`: the methods it has; the picked image again with it (a newer result of the
        same layer), or, when the panel is on screen and nothing is picked, the image most units fire in."""
        self.data = d
        self._set_methods(d)
        if self.image >= 0:
            self._request()
        elif self._on_screen and d.result.complete:
            self.show_image(self.busiest_image(d))

    def clear(self) -> None:
        """Other inputs: nothing shown or on its way belongs to them."""
        self.pool.cancel(self._key("image"), superseded=True)
        for kind in ("dataset", "labels"):  # (the session would keep the old dataset's label store alive)
            self.pool.session.drop(kind)
        self.data, self.view, self.image, self._wanted = None, None, -1, None
        self.canvas.show_picture(None, [])
        self._order = []
        for table in (self.covering, self.concepts, self.labels):
            table.setRowCount(0)
        self.title.setText("<b>Image</b>: pick an image (right-click one in the unit's grid, or type its number or "
                           "file name)")
        self._busy(False, "")

    def subject(self) -> str:
        """What the view shows, for its figure's file name."""
        return f"image {self.view.image}" if self.view is not None else ""

    def set_on_screen(self, shown: bool) -> None:
        self._on_screen = shown
        if shown and self.image < 0 and self.data is not None and self.data.result.complete:
            self.show_image(self.busiest_image(self.data))

    @staticmethod
    def busiest_image(d: LayerData) -> int:
        """The image in which the most units reach their threshold (the first of equals)."""
        units = sorted(d.result.units)
        thresholds = np.array([d.result.units[u].threshold for u in units], np.float32)
        return int((d.peaks[:, units] >= thresholds).sum(axis=1).argmax())

    def _set_methods(self, d: LayerData) -> None:
        """The chooser offers the methods the result has explanations by (the current one kept)."""
        some = next(iter(d.result.units.values()), None)
        have = [m for m in r.METHODS if some is not None and r.explanation_of(some, m) is not None] or ["netdissect"]
        if [self.method.itemData(k) for k in range(self.method.count())] == have:
            return
        current = self.method.currentData() or "iou"
        self.method.blockSignals(True)
        self.method.clear()
        for m in have:
            self.method.addItem(r.METHOD_NAMES[m], m)
        self.method.setCurrentIndex(have.index(current) if current in have else 0)
        self.method.blockSignals(False)

    # -- picking an image -------------------------------------------------------------------------------------------
    def _typed(self) -> None:
        text = self.which.text().strip()
        if self.data is None or not text:
            return
        found = self.image_named(text)
        if found is None:
            self.status.setText(f"no image {text!r} in the dataset (give its number, 0 to "
                                f"{self.data.dataset.n_images - 1}, or its file name)")
            return
        self.show_image(found)

    def image_named(self, text: str) -> int | None:
        """The row of the image numbered or named `text` (its file name, with or without folders)."""
        dataset = self.data.dataset
        if text.isdigit():
            return int(text) if int(text) < dataset.n_images else None
        if self._names is None or self._names[0] is not dataset:
            self._names = (dataset, {dataset.image_path(i).name: i for i in range(dataset.n_images)})
        return self._names[1].get(text.replace("\\", "/").rsplit("/", 1)[-1])

    def show_image(self, image: int) -> None:
        """The layer's view of `image` (a row of the dataset on screen)."""
        if self.data is None or not 0 <= image < self.data.dataset.n_images:
            return
        self.image = image
        self._request()

    def _request(self) -> None:
        d = self.data
        if d is None or self.image < 0 or self.method.currentData() is None:
            return
        method, min_iou = self.method.currentData(), round(self.min_iou.value(), 6)
        wanted = (id(d.result), self.image, method, min_iou)
        if wanted == self._wanted:
            return
        self._wanted = wanted
        ref = seeded_ref(self.pool, d)
        job = Job(image_view_job, {"dataset": ref, "result": d.result, "activations": np.asarray(
            d.activations[self.image]), "image": self.image, "method": method, "min_iou": min_iou}, compute=False)
        self._busy(True, f"segmenting image {self.image} by every unit that fires in it…")
        self.pool.submit(job, name=f"layer's view of image {self.image}", key=self._key("image"), executor=IO,
                         on_result=lambda view: self._shown(wanted, view), on_error=self._failed)

    def _busy(self, busy: bool, text: str) -> None:
        self.status.setText(text)
        self.cancel_button.setVisible(busy)

    def _failed(self, error: TaskError) -> None:
        self._wanted = None
        self._busy(False, error.message)

    # -- showing it --------------------------------------------------------------------------------------------------
    def _shown(self, wanted: tuple, view: ImageView) -> None:
        if wanted != self._wanted or self.data is None:
            return  # (a request since, or other inputs: never shown)
        self.view = view
        seg = view.segmentation
        regions = [Region(c, k + 1, seg.concepts[c].label, y, x, seg.concepts[c].color)
                   for k, (c, y, x) in enumerate(view.anchors)]
        self.canvas.show_picture(to_qimage(view.picture), regions, seg.segmentation)
        method = r.METHOD_NAMES[seg.method]
        more = "1 more fires but has" if seg.left_out == 1 else f"{seg.left_out} more fire but have"
        left_out = f"; {more} no {method} explanation with IoU ≥ {seg.min_iou:g}" if seg.left_out else ""
        self.title.setText(f"<b>Image {view.image}</b> ({view.name}) through {self.data.layer}: {len(seg.units)} "
                           f"units fire, {len(seg.concepts)} {method} explanations{left_out}. Click a pixel, or "
                           "a number, for its units.")
        self.covering.setRowCount(0)
        self.covering.horizontalHeaderItem(3).setText("activation")
        self.covering_title.setText(PICK_TITLE)
        # drawn ones in the picture's numbering (most pixels drawn first), then those only ever beneath others
        drawn = [c for c, _, _ in view.anchors]
        beneath = set(range(len(seg.concepts))) - set(drawn)
        self._order = drawn + sorted(beneath, key=lambda c: (-seg.concepts[c].pixels, c))
        concepts = [seg.concepts[c] for c in self._order]
        _fill(self.concepts, [[c.label, len(c.units), c.pixels, c.drawn, c.truth, c.iou] for c in concepts],
              [c.color for c in concepts])
        self.concepts.setVerticalHeaderLabels([str(k + 1) if k < len(drawn) else "–" for k in range(len(concepts))])
        _fill(self.labels, [[x.name, x.category, x.pixels] for x in seg.labels])
        self._busy(False, "")

    def show_covering(self, y: int, x: int) -> None:
        """List the units covering pixel (y, x) of the segmentation, the one drawn first."""
        if self.view is None:
            return
        self.canvas.select(None)
        self.canvas.marked = (y, x)
        found = self.view.segmentation.covering(y, x)
        grid = grid_text(self.view.segmentation.shape, self.view.photo.shape)
        self.covering_title.setText(f"<b>Units at {pixel_text(y, x)}</b>: {len(found)}"
                                    f"{', click one to open it' if found else ''}. {grid[0].upper()}{grid[1:]}.")
        self.covering.horizontalHeaderItem(3).setText("activation")
        _fill(self.covering, [[c.unit, c.label, c.iou, c.activation, c.threshold] for c in found])

    def show_concept(self, concept: int) -> None:
        """List the units explanation `concept` (an index into the segmentation's concepts) stands for here, most
        pixels first, with their peak activation in the image (not a pixel's: the explanation is a region); its
        region shown alone."""
        if self.view is None or not 0 <= concept < len(self.view.segmentation.concepts):
            return
        self.canvas.select(concept)
        seg = self.view.segmentation
        c = seg.concepts[concept]
        found = sorted((u for u in seg.units if u.concept == concept), key=lambda u: (-u.pixels, u.unit))
        self.covering_title.setText(f"<b>Units explained by {c.label}</b>: {len(found)}, click one to open it. "
                                    f"Together they fire on {c.pixels:,} px and are drawn on {c.drawn:,}; peak = a "
                                    "unit's highest activation in the image.")
        self.covering.horizontalHeaderItem(3).setText("peak")
        _fill(self.covering, [[u.unit, u.label, u.iou, u.peak, u.threshold] for u in found])

    def _covering_clicked(self, row: int, _column: int) -> None:
        item = self.covering.item(row, 0)
        if item is not None:
            self.unit_clicked.emit(int(item.text().replace(",", "")))


def install_grid_menu(grid: QWidget, panel: ImagePanel, area, overlays: Callable[[], list],
                      figure: Callable[[], object]) -> None:
    """The unit grid's right click: "Show the layer's view of this image" (the Image panel raised) above the grid's
    figure menu."""
    grid.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)

    def show(position: QPoint) -> None:
        window = grid.window()
        menu = figure_menu(figure(), window.figures.figure_request, grid) if hasattr(window, "figures") else QMenu(
            grid)
        row = grid.indexAt(position).row()
        items = overlays()
        action = QAction("Show the layer's view of this image", menu)
        action.setEnabled(0 <= row < len(items))
        action.triggered.connect(lambda: open_in(panel, area, items[row].image))
        first = menu.actions()[0] if menu.actions() else None
        menu.insertAction(first, action)
        menu.insertSeparator(first)
        menu.exec(grid.viewport().mapToGlobal(position))

    grid.customContextMenuRequested.connect(show)


def open_in(panel: ImagePanel, area, image: int) -> None:
    """The Image panel raised, showing `image`."""
    area.raise_panel("image")
    panel.show_image(image)
