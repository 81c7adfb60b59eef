"""Gallery workspace: score generator samples with the Inception Score, live, and look at every image's share;
beside IS, FID, KID, precision/recall and class coverage against real images (`RealDataScores`).

The opened samples (the demo sampler by default) stream through the classifier in the compute thread, a few images
per batch; the GUI thread adds each batch to `GalleryScores` and, at most every 40 ms, redraws the live IS, the
decomposition H(p(y)) - mean H(p(y|x)) = I(X;Y) = log IS, the marginal and IS against N. The split protocol
(torch-fidelity's) is recomputed in the I/O pool from the rows kept so far. The grid paints only visible cells;
thumbnails are rendered or decoded in the I/O pool for visible rows only.
"""

from __future__ import annotations

import time
from pathlib import Path

from PySide6.QtCore import Qt, QTimer
from PySide6.QtWidgets import QFileDialog, QLabel, QVBoxLayout, QWidget

from probescope.app.export import ExportTarget
from probescope.app.gallery.controls import GalleryControls
from probescope.app.gallery.images import SampleImages
from probescope.app.gallery.panels import DetailPanel, ScorePanel
from probescope.app.gallery.real_data_panel import RealDataPanel
from probescope.app.gallery.real_data_scores import RealDataScores
from probescope.app.gallery.realism import SampleRealism
from probescope.app.gallery.realism_panel import CopyingPanel, NeighboursPanel
from probescope.app.gallery.scores import GalleryScores
from probescope.app.gallery.split import SplitProtocol
from probescope.app.gallery.stream import DemoStream, ResumedSource, load_classifier_task, stream_task
from probescope.app.gallery.views import SampleViews
from probescope.app.panel_area import scrolled
from probescope.app.workspace import Workspace
from probescope.core.demo.sampler import DemoSampler
from probescope.core.scoring.classifiers import classifier_of_model
from probescope.core.scoring.examples import CLASS_NAMES as EXAMPLE_CLASSES
from probescope.core.scoring.examples import worked_example
from probescope.jobs.inputs import model_of
from probescope.jobs.protocol import COMPUTE, TaskContext, TaskError
from probescope.widgets.command_palette import matches
from probescope.widgets.gallery.grid import ContactSheet, GalleryGrid
from probescope.widgets.image_detail import ImageDetail

UPDATE_MS = 40  # the live IS redraws at most this often (25 Hz), at least once per arriving batch
SLOW_UPDATE_S = 0.25  # the marginal and the curve: at most 4 times a second while streaming
GRID_UPDATE_S = 1.0  # the grid's order and badges, the detail (a full repaint of the grid): once a second


class GalleryWorkspace(Workspace):
    name = "gallery"
    title = "Gallery"
    needs = ("model", "samples")

    def __init__(self, pool, parent: QWidget | None = None):
        super().__init__(pool, parent)
        self.scores = GalleryScores()
        self.images = SampleImages(pool, self.task_key("scores"), self)  # reads belong to the scores shown
        self.classifier = None  # a core.scoring Classifier
        self.class_names: tuple[str, ...] | None = None
        self.score_updates = 0  # redraws of the live numbers (measured by the benchmark)
        self._slow_time = self._grid_time = 0.0
        self._run_knobs: tuple[int, float] | None = None  # the demo sampler's knobs of the run scored now
        self._kept: tuple | None = None  # the opened samples' scores while a worked example is shown
        self._offered: str | None = None  # what the score panel's notice offers (see _offer)
        self._streaming = False
        self.controls = GalleryControls()
        self.grid = GalleryGrid(96)
        self.sheet = ContactSheet(self.grid.thumbnails, self.grid.delegate)
        self.caption = QLabel()
        self.caption.setWordWrap(True)  # (a narrow grid pane wraps it instead of cutting it off)
        self.score_panel = ScorePanel()
        self.detail = DetailPanel()
        self.real_panel = RealDataPanel()
        self.real = RealDataScores(pool, self.task_key, self.real_panel, self._pause_for_reference, self.start,
                                   self.score_panel.show_distances)
        self.large = ImageDetail(self)
        self.views = SampleViews(lambda: (self.scores, self.class_names), self.controls, self.images, self.grid,
                                 self.sheet, self.caption, self.detail, self.large)
        self.realism = SampleRealism(pool, self.task_key, self.real, self.grid, NeighboursPanel(), CopyingPanel(),
                                     lambda: self.scores, self.views.order_changed)
        self.detail.layout().insertWidget(self.detail.layout().count() - 1, self.realism.neighbours)
        self.real_panel.layout().insertWidget(4, self.realism.copying)  # under the scores and their caveat
        self.splits = SplitProtocol(pool, self.task_key("scores:split"), self.score_panel, self._classifier_label)
        self._update_timer = QTimer(self)
        self._update_timer.setSingleShot(True)
        self._update_timer.setInterval(UPDATE_MS)
        self._update_timer.timeout.connect(self.update_views)
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
        c = self.controls
        c.source.currentIndexChanged.connect(lambda _i: self._source_changed())
        c.open_button.clicked.connect(self._open_samples)
        c.classifier_box.activated.connect(lambda _i: self._classifier_chosen())
        c.play.toggled.connect(self._play_toggled)
        c.reset_button.clicked.connect(lambda: self.reset())
        c.diversity.valueChanged.connect(lambda _v: self._knobs_changed())
        c.fidelity.valueChanged.connect(lambda _v: self._knobs_changed())
        c.target.valueChanged.connect(lambda _v: self._target_changed())
        for signal in (c.sort.currentIndexChanged, c.descending.toggled, c.class_filter.currentIndexChanged,
                       c.copies_only.toggled,
                       c.filter_key.currentIndexChanged, c.filter_low.valueChanged, c.filter_high.valueChanged,
                       c.sheet_count.valueChanged):
            signal.connect(lambda *_: self.views.order_changed())
        c.csv_button.clicked.connect(self._export_csv_dialog)
        self.score_panel.notice_button.clicked.connect(self._notice_clicked)

    def export_targets(self) -> list[ExportTarget]:
        return [ExportTarget("Gallery", self), ExportTarget("Contact sheet", self.sheet),
                ExportTarget("Detail panel", self.detail), ExportTarget("Score panel", self.score_panel),
                ExportTarget("Real data panel", self.real_panel)]

    def step(self, offset: int) -> None:
        self.grid.step(offset)

    def palette_items(self, query: str) -> list[tuple[str, object]]:
        """Sort orders and the class filter's classes."""
        c = self.controls
        items = [(f"Sort samples by {c.sort.itemText(k)}", lambda k=k: c.sort.setCurrentIndex(k))
                 for k in range(c.sort.count())]
        items += [(f"Show class {c.class_filter.itemText(k)}", lambda k=k: c.class_filter.setCurrentIndex(k))
                  for k in range(1, c.class_filter.count())]
        return [(title, run) for title, run in items if matches(query, title)]

    # -- inputs -----------------------------------------------------------------------------------------------------
    @property
    def samples_source(self):
        return None if self.state is None else self.state.samples

    def refresh(self) -> None:
        """New samples (or a classifier from a new model): score the opened samples from the start."""
        self._kept = None
        self._offer(None)
        loaded = self.state.get("samples")
        self.controls.source.setItemText(0, f"Samples: {loaded.label}" if loaded is not None else "Opened samples")
        if self.controls.classifier_box.currentData() == "model":
            model = model_of(TaskContext(session=self.pool.session), self.state.model)  # held since it was opened
            self._set_classifier(classifier_of_model(model))
        source = self.samples_source
        demo = isinstance(source, DemoSampler)
        if demo:
            self.controls.show_sampler(source)
        if self.controls.source.currentData() != "samples":
            self.controls.source.blockSignals(True)
            self.controls.source.setCurrentIndex(0)
            self.controls.source.blockSignals(False)
        self.reset(start=True)

    def _source_changed(self) -> None:
        key = self.controls.source.currentData()
        if key == "samples":
            if self._kept is not None:  # back from a worked example: the scored set as it was
                self.scores, split, self.class_names, real = self._kept
                self.splits.restore(split)
                self._kept = None
                self.real.bring_back(real)
                if self.classifier is not None:
                    self._set_classifier(self.classifier)
                self._show_run()
                self.grid.thumbnails.has_images = True
                self.controls.enable(demo=isinstance(self.samples_source, DemoSampler), stream=True)
                self._set_streaming(False)
                self.update_views()
            elif self.ready():
                self.reset(start=True)
            return
        self.stop()
        if self._kept is None:
            self._kept = (self.scores, self.splits.kept(), self.class_names, self.real.set_aside())
            self.scores = GalleryScores()
        self._clear()
        self.class_names = EXAMPLE_CLASSES
        self.grid.thumbnails.has_images = False
        self.scores.add_probabilities(worked_example(key))
        self.score_panel.show_classifier("none", "the seed note's worked example: p(y|x) given, no images")
        self.score_panel.show_run(f"Worked example {key}: three images, their p(y|x) given; the opened samples' "
                                  "scores are kept: choose Opened samples to see them again")
        self.controls.enable(demo=False, stream=False)
        self.update_views()
        self.grid.select_image(0)
        self.mark_initial_work_done()

    def _offer(self, kind: str | None, text: str = "", action: str = "") -> None:
        """Say in the score panel what waits for the user: 'knobs' (a run with them) or 'model' (the loaded model as
        classifier); None: nothing waits."""
        self._offered = kind
        self.score_panel.show_notice(text, action)

    def _notice_clicked(self) -> None:
        kind = self._offered
        self._offer(None)
        if kind == "model":
            self.refresh()
        elif kind == "knobs":
            self.reset(start=True)

    def _on_state_changed(self, slot: str) -> None:
        """A newly opened model does not silently replace the classifier of a scored set: it is offered."""
        if slot == "model" and self.scores.n and self.controls.classifier_box.currentData() == "model" \
                and self.controls.source.currentData() == "samples" and self.ready():
            self.stop()
            self._offer("model", f"The loaded model is now {self.state.get('model').label}; these scores are by "
                        f"{self.classifier.name}.", "Score with the loaded model")
            return
        if slot == "dataset":
            self.real.dataset_changed(self._reference_dataset())
        super()._on_state_changed(slot)

    def _reference_dataset(self):
        """The loaded probing dataset once it is whole: FID against the first images of a dataset still being made
        (the demo's, on a fresh install) would be computed twice and read against another number of images."""
        loaded = self.state.get("dataset")
        return None if loaded is None or loaded.first_of else loaded.value

    def _open_samples(self) -> None:
        window = self.window()
        if hasattr(window, "browse"):
            window.browse("samples")

    # -- classifier -------------------------------------------------------------------------------------------------
    def _set_classifier(self, classifier) -> None:
        self.classifier = classifier
        self.class_names = classifier.class_names
        comparable = " (comparable with published scores)" if classifier.comparable else ""
        self.score_panel.show_classifier(classifier.name, classifier.note + comparable)

    def _classifier_chosen(self) -> None:
        key = self.controls.classifier_box.currentData()
        if key == "model":
            if self.ready():
                self.refresh()
            return
        spec = key
        if key.startswith("inception"):
            path, _ = QFileDialog.getOpenFileName(self, "Inception v3 weights", "", "Weights (*.pth *.pt);;All (*)")
            if not path:
                return
            spec = f"{key}:{path}"
        self.set_classifier_spec(spec)

    def set_classifier_spec(self, spec: str) -> None:
        """Load classifier `spec` ('demo', 'inception-tf:<file>', ...) in the compute thread, then rescore."""
        device = str(self.state.model.device) if self.state and self.state.model is not None else "cpu"

        def loaded(classifier) -> None:
            self._set_classifier(classifier)
            self.reset(start=True)

        self.stop()
        self.pool.submit(lambda ctx: load_classifier_task(spec, device, ctx), name=f"load classifier {spec}",
                         key=self.task_key("classifier"), executor=COMPUTE, on_result=loaded)

    # -- streaming --------------------------------------------------------------------------------------------------
    def _clear(self) -> None:
        self.stop()
        self.scores.reset()
        self.splits.reset()
        self.images.forget()  # pending reads and the split protocol belonged to the old scores
        self.grid.thumbnails.clear()
        self.detail.clear()

    def reset(self, start: bool = False) -> None:
        """Forget every score; with `start` (or while streaming) stream the opened samples again from image 0."""
        was_streaming = self._streaming
        self._clear()
        if self.controls.source.currentData() != "samples" or self.samples_source is None:
            self.update_views()
            return
        source = self.samples_source
        if self.classifier is not None:  # (the worked example may have replaced the class names)
            self._set_classifier(self.classifier)
            self.real.use(self.classifier, self._reference_dataset())  # (before the stream: it may load it)
        self.grid.thumbnails.has_images = True
        self.images.use(source)
        self.controls.enable(demo=isinstance(source, DemoSampler), stream=True)
        self._run_knobs = self.controls.knobs() if isinstance(source, DemoSampler) else None  # a new run
        self._show_run()
        self.update_views()
        if start or was_streaming:
            self.start()

    def start(self) -> None:
        """Stream from the next unscored image (start, or resume after a pause)."""
        if self.classifier is None or self.samples_source is None or self.controls.source.currentData() != "samples":
            return
        source = self.samples_source
        start = self.scores.n
        if isinstance(source, DemoSampler):  # (a resumed run keeps the knobs it started with)
            stream = DemoStream(self.controls.target.value(), *self._run_knobs, seed=source.seed, start=start)
        else:
            stream = ResumedSource(source, start, self.images.keep_thumbnails)
        if stream.length is not None and start >= stream.length:  # all scored: Start begins again
            self.reset(start=True)
            return
        classifier = self.classifier
        self._set_streaming(True)
        self.pool.submit(lambda ctx: stream_task(stream, classifier, start, ctx), name="score samples",
                         key=self.task_key("stream"), executor=COMPUTE, on_partial=self._on_batch,
                         on_result=self._on_stream_end, on_error=self._on_stream_error)

    def stop(self) -> None:
        """Pause: the stream stops after its current batch; nothing it scored is lost."""
        self.pool.cancel(self.task_key("stream"))
        self._set_streaming(False)

    def _set_streaming(self, on: bool) -> None:
        self._streaming = on
        self.controls.play.blockSignals(True)
        self.controls.play.setChecked(on)
        source = self.samples_source
        paused = 0 < self.scores.n < (self.controls.target.value() if isinstance(source, DemoSampler) else
                                      getattr(source, "length", None) or 0)
        self.controls.play.setText("Pause" if on else ("Resume" if paused else "Start"))
        self.controls.play.blockSignals(False)

    def _pause_for_reference(self) -> bool:
        """Pause while the scores so far are read against a new reference; True when it was streaming."""
        was_streaming = self._streaming
        self.stop()
        return was_streaming

    def _play_toggled(self, on: bool) -> None:
        if on:
            self.start()
        else:
            self.stop()
            self.mark_initial_work_done()

    @property
    def streaming(self) -> bool:
        return self._streaming

    @property
    def split(self):
        """The split protocol's last result (None below its size)."""
        return self.splits.result

    def _knobs_changed(self) -> None:
        """The knobs apply to the next run: a run's images are all drawn with the knobs it started with."""
        self._show_run()

    def _show_run(self) -> None:
        source = self.samples_source
        if not isinstance(source, DemoSampler) or self._run_knobs is None:
            self.score_panel.show_run(f"Scoring {getattr(source, 'name', 'the opened samples')}" if source else "")
            return
        diversity, fidelity = self._run_knobs
        self.score_panel.show_run(f"This run: demo sampler, diversity {diversity}, fidelity {fidelity:.2f}, "
                                  f"N {self.controls.target.value():,}")
        if self.controls.knobs() != self._run_knobs:
            d, f = self.controls.knobs()
            self._offer("knobs", f"The knobs say diversity {d}, fidelity {f:.2f}: they apply to the next run, so "
                        "this run's images stay comparable.", "Start a run with them")
        elif self._offered == "knobs":
            self._offer(None)  # what the stream draws next

    def _target_changed(self) -> None:
        if self._streaming and self.scores.n < self.controls.target.value():  # go on with the new length
            self.stop()
            self.start()

    def _on_batch(self, batch) -> None:
        if batch.start != self.scores.n:  # a batch of a stream that was replaced
            return
        self.scores.add_logits(batch.logits)
        self.real.add(batch.features, batch.logits)
        if batch.sampler is not None:
            self.images.drawn(batch.start, batch.sampler)
        if batch.thumbnails:
            self.grid.thumbnails.add_thumbnails({batch.start + i: im for i, im in enumerate(batch.thumbnails)},
                                                keep=self.images.keep_thumbnails)
        if not self._update_timer.isActive():
            self._update_timer.start()

    def _on_stream_end(self, _n: int) -> None:
        self._set_streaming(False)
        self.update_views()
        self.mark_initial_work_done()

    def _on_stream_error(self, _error: TaskError) -> None:
        self._set_streaming(False)
        self.mark_initial_work_done()

    # -- views ------------------------------------------------------------------------------------------------------
    def update_views(self) -> None:
        """Redraw the score panel, the grid's order and the detail from the current scores."""
        self.score_updates += 1
        scores = self.scores
        d = scores.decomposition()
        self.score_panel.show_numbers(d, "streaming…" if self._streaming else "")
        self.splits.update(scores, final=not self._streaming)
        self.real.update(self._streaming)
        self.realism.update(self._streaming)
        now = time.monotonic()
        if self._streaming and now - self._slow_time < SLOW_UPDATE_S:
            return
        self._slow_time = now
        self.controls.set_class_names(self.views.names())
        self.score_panel.show_distribution(d, self.class_names, scores.live.history if d else ((), ()))
        if self._streaming and now - self._grid_time < GRID_UPDATE_S:
            return
        self._grid_time = now
        self.views.redraw()

    def _classifier_label(self) -> str:
        if self.controls.source.currentData() != "samples":
            return "none (given probabilities)"
        return self.classifier.name if self.classifier is not None else "—"

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
