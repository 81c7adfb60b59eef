"""Gallery workspace: score generator samples with the Inception Score, live, and look at every image's share;
beside IS, FID, KID, precision/recall and class coverage against real images (`RealDataScores`).

The opened samples (the demo sampler by default) stream through the classifier in the compute thread, a few images
per batch (`ScoringRun`, a job of `jobs.scoring.stream`); the GUI thread adds each batch to `GalleryScores` (held in
the Qt-free `GalleryState`, whose events the widgets follow) and, at most every 40 ms, redraws the live IS, the
decomposition H(p(y)) - mean H(p(y|x)) = I(X;Y) = log IS, the marginal and IS against N. What is computed next
from the scores (the split protocol, the readings against real data, each sample's realism) is decided by the state's
Qt-free `jobs.scoring.live` objects and run in the I/O pool. The grid paints only visible cells; thumbnails are
rendered or decoded in the I/O pool for visible rows only. The workspace's helpers get the parts they use, not it.
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QFileDialog, QLabel, QVBoxLayout, QWidget

from probescope.app.figures.export import ExportTarget
from probescope.app.gallery.classifier import ClassifierPicker
from probescope.app.gallery.controls import GalleryControls
from probescope.app.gallery.images import SampleImages
from probescope.app.gallery.panels import DetailPanel, ScorePanel
from probescope.app.gallery.real_data_panel import RealDataPanel
from probescope.app.gallery.real_data_scores import RealDataScores
from probescope.app.gallery.realism import SampleRealism
from probescope.app.gallery.realism_panel import CopyingPanel, NeighboursPanel
from probescope.app.gallery.run import RunParts, ScoringRun
from probescope.app.gallery.split import SplitProtocol
from probescope.app.gallery.state import MODEL, SAMPLES, GalleryState
from probescope.app.gallery.views import SampleViews
from probescope.app.window.panel_area import scrolled
from probescope.app.window.workspace import Workspace
from probescope.core.demo.sampler import DemoSampler
from probescope.core.scoring.examples import CLASS_NAMES as EXAMPLE_CLASSES
from probescope.core.scoring.examples import worked_example
from probescope.jobs.scoring.samples import GalleryScores
from probescope.jobs.scoring.stream import ClassifierInfo
from probescope.widgets.gallery.grid import ContactSheet, GalleryGrid
from probescope.widgets.image_detail import ImageDetail

SLOW_UPDATE_S = 0.25  # the marginal and the curve: at most 4 times a second while streaming
GRID_UPDATE_S = 1.0  # the grid's order and badges, the detail (a full repaint of the grid): once a second


class GalleryWorkspace(Workspace):
    name = "gallery"
    title = "Gallery"
    needs = ("model", "samples")
    reads = ("model", "samples", "dataset")  # (the dataset's images: the real-data scores' reference)

    def __init__(self, pool, parent: QWidget | None = None):
        super().__init__(pool, parent)
        self.gallery = GalleryState()
        self.images = SampleImages(pool, self.task_key("scores"), self)  # reads belong to the scores shown
        self.score_updates = 0  # redraws of the live numbers (measured by the benchmark)
        self._views_due = False  # scores changed while the workspace was out of sight
        self._slow_time = self._grid_time = 0.0
        self.controls = GalleryControls()
        self.palette_items = self.controls.palette_items  # (the command palette's: sort orders, classes)
        self.grid = GalleryGrid(96)
        self.focus_view = self.grid
        self.sheet = ContactSheet(self.grid.thumbnails, self.grid.delegate)
        self.caption = QLabel()
        self.caption.setWordWrap(True)  # (a narrow grid pane wraps it instead of cutting it off)
        self.score_panel = ScorePanel()
        self.detail = DetailPanel()
        self.real_panel = RealDataPanel()
        self.real = RealDataScores(pool, self.task_key, self.real_panel, self.gallery.readings,
                                   lambda: self.run.pause_for_reference(), lambda: self.run.start(),
                                   self.score_panel.show_distances)
        parts = RunParts(self.controls, self.score_panel, self.detail, self.grid.thumbnails, self.images, self.real,
                         lambda: None if self.state is None else self.state.get("samples"), self.reference_dataset,
                         lambda classifier: self.classifiers.use(classifier), self.update_views,
                         self.mark_initial_work_done)
        self.run = ScoringRun(pool, self.task_key("stream"), self.gallery, parts, self)
        self.classifiers = ClassifierPicker(pool, self.task_key("classifier"), self.gallery,
                                            self.controls.classifier_box, self.score_panel, self.run,
                                            lambda: self.state.model, lambda: self.ready() and self.refresh(),
                                            self.real_panel.drop_features, self)
        self.large = ImageDetail(self)
        self.views = SampleViews(lambda: (self.scores, self.class_names), self.controls, self.images, self.grid,
                                 self.sheet, self.caption, self.detail, self.large)
        self.realism = SampleRealism(pool, self.task_key, self.real, self.gallery.realism, self.grid,
                                     NeighboursPanel(), CopyingPanel(), lambda: self.scores, self.views.order_changed)
        self.detail.layout().insertWidget(self.detail.layout().count() - 1, self.realism.neighbours)
        real_layout = self.real_panel.layout()  # the copy test under the scores and their caveat
        real_layout.insertWidget(real_layout.indexOf(self.real_panel.caveat) + 1, self.realism.copying)
        self.splits = SplitProtocol(pool, self.task_key("scores:split"), self.score_panel,
                                    self.gallery.classifier_label, self.gallery.split)
        self._build_layout()
        self._connect()

    def _build_layout(self) -> None:
        grid = QWidget()
        grid_layout = QVBoxLayout(grid)
        grid_layout.setContentsMargins(4, 0, 4, 0)
        grid_layout.addWidget(self.caption)
        grid_layout.addWidget(self.grid, 1)
        area = self.area
        scoring, sampler, view = self.controls.bars
        area.addToolBar(scoring)
        area.addToolBar(sampler)
        area.addToolBarBreak()
        area.addToolBar(view)
        area.set_central(grid)
        area.add("score", "Score", scrolled(self.score_panel), "right", 0.34)
        area.add("detail", "Selected image", scrolled(self.detail), "right", 0.22)  # (room for the class bars'
        # names beside the scroll bar the nearest real images bring)
        area.add("real", "Real data", scrolled(self.real_panel), "right")
        area.split("score", "detail", Qt.Orientation.Horizontal)
        area.tab("real", "score")
        area.raise_panel("score")

    def _connect(self) -> None:
        c, run = self.controls, self.run
        c.source.currentIndexChanged.connect(lambda _i: self._source_changed())
        c.open_button.clicked.connect(self._open_samples)
        c.classifier_box.activated.connect(lambda _i: self.classifiers.chosen())
        c.play.toggled.connect(run.play_toggled)
        c.reset_button.clicked.connect(lambda: run.reset())
        c.diversity.valueChanged.connect(lambda _v: run.show_run())  # (the knobs apply to the next run)
        c.fidelity.valueChanged.connect(lambda _v: run.show_run())
        c.target.valueChanged.connect(lambda _v: run.target_changed())
        for signal in (c.sort.currentIndexChanged, c.descending.toggled, c.class_filter.currentIndexChanged,
                       c.copies_only.toggled,
                       c.filter_key.currentIndexChanged, c.filter_low.valueChanged, c.filter_high.valueChanged,
                       c.sheet_count.valueChanged):
            signal.connect(lambda *_: self.views.order_changed())
        c.csv_button.clicked.connect(self._export_csv_dialog)
        self.score_panel.notice_button.clicked.connect(self._notice_clicked)
        self.real_panel.features_chosen.connect(self.classifiers.load_features)
        g = self.gallery
        g.events.offer.connect(self.score_panel.show_offer)
        g.events.features.connect(self.real_panel.set_features)
        g.events.source.connect(self.real_panel.follow_source)
        self.score_panel.show_offer(g.offer)  # (bound: the panels show the state from the start)
        self.real_panel.set_features(g.features)
        self.real_panel.follow_source(g.source)

    def export_targets(self) -> list[ExportTarget]:
        if self._views_due:  # (exported from out of sight: the views as the scores are now)
            self._draw_views()
        return [ExportTarget("Gallery", self), ExportTarget("Contact sheet", self.sheet),
                ExportTarget("Detail panel", self.detail), ExportTarget("Score panel", self.score_panel),
                ExportTarget("Real data panel", self.real_panel)]

    def step(self, offset: int) -> None:
        self.grid.step(offset)

    # -- what is shown (GalleryState) -------------------------------------------------------------------------------
    @property
    def scores(self) -> GalleryScores:
        return self.gallery.scores

    @property
    def classifier(self) -> ClassifierInfo | None:
        return self.gallery.classifier

    @property
    def class_names(self) -> tuple[str, ...] | None:
        return self.gallery.class_names

    @property
    def streaming(self) -> bool:
        return self.gallery.streaming

    @property
    def split(self):
        """The split protocol's last result (None below its size)."""
        return self.gallery.split.result

    # -- inputs -----------------------------------------------------------------------------------------------------
    @property
    def samples_source(self):
        return None if self.state is None else self.state.samples

    def refresh(self) -> None:
        """New samples (or a classifier from a new model): score the opened samples from the start."""
        g, c = self.gallery, self.controls
        g.kept, g.offer = None, None
        loaded = self.state.get("samples")
        c.source.setItemText(0, f"Samples: {loaded.label}" if loaded is not None else "Opened samples")
        source = self.samples_source
        if isinstance(source, DemoSampler):
            c.show_sampler(source)
        if c.source.currentData() != SAMPLES:
            c.source.blockSignals(True)
            c.source.setCurrentIndex(0)
            c.source.blockSignals(False)
        g.source = SAMPLES
        if c.classifier_box.currentData() == MODEL:  # its classifier is made where the model is held, then scored
            self.run.clear()
            self.classifiers.load(MODEL)
        else:
            self.run.reset(start=True)

    def _source_changed(self) -> None:
        g, key = self.gallery, self.controls.source.currentData()
        if key == SAMPLES:
            g.source = SAMPLES
            if g.kept is not None:  # back from a worked example: the scored set as it was
                g.scores, split, g.class_names, real = g.kept
                self.gallery.split.restore(split)
                g.kept = None
                self.real.bring_back(real)
                if g.classifier is not None:
                    self.classifiers.use(g.classifier)
                self.run.show_run()
                self.grid.thumbnails.has_images = True
                self.controls.enable(demo=isinstance(self.samples_source, DemoSampler), stream=True)
                self.run.show_play()
                self.update_views()
            elif self.ready():
                self.run.reset(start=True)
            return
        self.run.stop()
        if g.kept is None:
            g.kept = (g.scores, self.gallery.split.kept(), g.class_names, self.real.set_aside())
            g.scores = GalleryScores()
        g.source = key
        self.run.clear()
        g.class_names = EXAMPLE_CLASSES
        self.grid.thumbnails.has_images = False
        g.scores.add_probabilities(worked_example(key))
        self.score_panel.show_classifier("none", "the seed note's worked example: p(y|x) given, no images")
        self.score_panel.show_run(f"Worked example {key}: three images, their p(y|x) given; the opened samples' "
                                  "scores are kept: choose Opened samples to see them again")
        self.controls.enable(demo=False, stream=False)
        self.update_views()
        self.grid.select_image(0)
        self.mark_initial_work_done()

    def _notice_clicked(self) -> None:
        offer = self.gallery.offer
        self.gallery.offer = None
        if offer is not None and offer.kind == MODEL:
            self.refresh()
        elif offer is not None:
            self.run.reset(start=True)

    def _on_state_changed(self, slot: str) -> None:
        """A newly opened model does not silently replace the classifier of a scored set: it is offered."""
        g = self.gallery
        if slot == "model" and g.scores.n and self.controls.classifier_box.currentData() == MODEL \
                and g.shows_samples and self.ready():
            self.run.stop()
            g.offer_model(self.state.get("model").label)
            return
        if slot == "dataset":
            self.real.dataset_changed(self.reference_dataset())
        super()._on_state_changed(slot)

    def reference_dataset(self):
        """The loaded probing dataset once it is whole: FID against the first images of a dataset still being made
        (the demo's, on a fresh install) would be computed twice and read against another number of images."""
        loaded = self.state.get("dataset")
        return None if loaded is None or loaded.first_of else loaded.value

    def _open_samples(self) -> None:
        window = self.window()
        if hasattr(window, "browse"):
            window.browse("samples")

    def set_classifier_spec(self, spec: str) -> None:
        """Load classifier `spec` ('demo', 'inception-tf:<file>', ...) in the compute thread, then rescore (in the
        features chosen)."""
        self.run.stop()
        self.classifiers.load(spec)

    def set_features_spec(self, spec: str) -> None:
        """Measure every distance in feature network `spec` ('classifier', 'dinov2:vits14:<file>', ...): the
        classifier is loaded again with it, then the samples are rescored."""
        self.real_panel.choose_features(spec)

    # -- views ------------------------------------------------------------------------------------------------------
    def update_views(self) -> None:
        """Redraw the score panel, the grid's order and the detail from the current scores. Out of sight (another
        workspace shown) they wait, and are drawn when the workspace is shown or exported: the hidden Gallery's
        redraws and readings of a stream took the GUI thread and a core from the workspace on screen (the
        Dissection's longest stalls while both worked, 52-55 ms, were 43-48 ms without them)."""
        if not self.isVisible():
            self._views_due = True
            return
        self._draw_views()

    def showEvent(self, event) -> None:  # noqa: N802
        super().showEvent(event)
        if self._views_due:
            self._draw_views()

    def _draw_views(self) -> None:
        self._views_due = False
        self.score_updates += 1
        streaming, scores = self.gallery.streaming, self.gallery.scores
        d = scores.decomposition()
        self.score_panel.show_numbers(d, "streaming…" if streaming else "")
        self.splits.update(scores, final=not streaming)
        self.views.show_count()
        self.real.update(streaming)
        self.realism.update(streaming)
        now = time.monotonic()
        if streaming and now - self._slow_time < SLOW_UPDATE_S:
            return
        self._slow_time = now
        self.controls.set_class_names(self.views.names())
        self.score_panel.show_distribution(d, self.class_names, scores.live.history if d else ((), ()))
        if streaming and now - self._grid_time < GRID_UPDATE_S:
            return
        self._grid_time = now
        self.views.redraw()

    def open_image(self, i: int) -> None:
        """The large view of image i (double-click or Enter), with its top classes."""
        self.views.open_image(i)

    # -- export -----------------------------------------------------------------------------------------------------
    def export_csv(self, path: str | Path) -> Path:
        """Per-image scores as CSV, written atomically."""
        return self.scores.write_csv(path, self.class_names)

    def _export_csv_dialog(self) -> None:
        path, _ = QFileDialog.getSaveFileName(self, "Export per-image scores", "scores.csv", "CSV (*.csv)")
        if path:
            self.export_csv(path)
