"""Which classifier scores the gallery's samples: the loaded model or one the engine loads ('demo', the Inception
ports from a weights file the user picks), with the feature network the distances use (the state's `features`),
made by a job where the model is held (`jobs.scoring.stream`), on the loaded model's device; the window keeps the
`ClassifierInfo` it returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QComboBox, QFileDialog, QWidget

from probescope.app.compute.workers import WorkerPool
from probescope.app.gallery.panels import ScorePanel
from probescope.app.gallery.run import ScoringRun
from probescope.app.gallery.state import MODEL, GalleryState
from probescope.jobs.inputs import ModelInfo
from probescope.jobs.protocol import COMPUTE, Job, TaskError
from probescope.jobs.scoring.stream import CLASSIFIER, ClassifierChoice, ClassifierInfo, load_classifier


class ClassifierPicker(QObject):
    """The classifier `box` of the Gallery whose state is `state`: `chosen()` when the user picks, `load(spec)` to
    score with `spec`. Loads run in `pool` under `key` on the device of `model()`, the loaded model; `use_model`
    scores with the loaded model, `drop_features` takes back a feature network that failed to load; dialogs open
    over `parent`."""

    def __init__(self, pool: WorkerPool, key: str, state: GalleryState, box: QComboBox, score_panel: ScorePanel,
                 run: ScoringRun, model: Callable[[], ModelInfo], use_model: Callable[[], None],
                 drop_features: Callable[[str], None], parent: QWidget):
        super().__init__(parent)
        self.pool, self.key, self.state, self.box, self.score_panel, self.run = pool, key, state, box, score_panel, run
        self.model, self.use_model, self.drop_features, self.parent_widget = model, use_model, drop_features, parent
        self._pending: ClassifierChoice | None = None  # the choice being loaded now

    def use(self, classifier: ClassifierInfo) -> None:
        """Score with `classifier` from now on (its name and note in the score panel)."""
        self.state.use_classifier(classifier)
        self.score_panel.show_classifier(*self.state.classifier_text())

    def chosen(self) -> None:
        key = self.box.currentData()
        if key == MODEL:
            self.use_model()
            return
        spec = key
        if key.startswith("inception"):
            path, _ = QFileDialog.getOpenFileName(self.parent_widget, "Inception v3 weights", "",
                                                  "Weights (*.pth *.pt);;All (*)")
            if not path:
                return
            spec = f"{key}:{path}"
        self.run.stop()
        self.load(spec)

    def load(self, spec: str) -> None:
        """Load classifier `spec` (or MODEL) with the state's features on the loaded model's device, then score the
        samples from the start."""
        self._submit(ClassifierChoice(spec, self.model(), features=self.state.features))

    def load_features(self, features: str) -> None:
        """Measure the distances in `features` (a feature network spec): the classifier scoring now (or being
        loaded) is loaded again with them, and the samples are scored from the start. Until it has loaded the
        features in effect stay, and stay for good when it fails (the stream, paused meanwhile, goes on)."""
        g = self.state
        current = self._pending or (g.classifier.choice if g.classifier is not None else None)
        if current is None:  # nothing scores yet: the first classifier loads with them
            g.features = features
            return
        if current.features == features:
            return
        was_streaming = g.streaming
        self.run.stop()

        def failed(_error: TaskError) -> None:  # (the pool reports the error as it reports every failed load)
            self.drop_features(features)
            if was_streaming and g.classifier is not None:
                self.run.start()

        self._submit(replace(current, features=features), failed)

    def _submit(self, choice: ClassifierChoice, failed: Callable[[TaskError], None] | None = None) -> None:
        self._pending = choice

        def loaded(classifier: ClassifierInfo) -> None:
            self._pending = None
            self.state.features = classifier.choice.features  # (the features in effect: the box follows them)
            self.use(classifier)
            self.run.reset(start=True)

        def error(e: TaskError) -> None:
            self._pending = None
            if failed is not None:
                failed(e)

        name = f"load classifier {choice.spec}" + ("" if choice.features == CLASSIFIER else
                                                    f" with features {choice.features}")
        job = Job(load_classifier, dict(choice=choice))
        self.pool.submit(job, name=name, key=self.key, executor=COMPUTE, on_result=loaded, on_error=error)
