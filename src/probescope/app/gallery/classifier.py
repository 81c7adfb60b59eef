"""Which classifier scores the gallery's samples: the loaded model or one the engine loads ('demo', the Inception
ports from a weights file the user picks), with the feature network the distances use (the state's `features`),
made by a job where the model is held (`jobs.scoring_stream`), on the loaded model's device; the window keeps the
`ClassifierInfo` it returns."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFileDialog

from probescope.app.gallery.state import MODEL
from probescope.jobs.protocol import COMPUTE, Job, TaskError
from probescope.jobs.scoring.stream import CLASSIFIER, ClassifierChoice, ClassifierInfo, load_classifier

if TYPE_CHECKING:
    from probescope.app.gallery.workspace import GalleryWorkspace


class ClassifierPicker(QObject):
    """The classifier box of the gallery `ws`: `chosen()` when the user picks, `load(spec)` to score with `spec`."""

    def __init__(self, ws: GalleryWorkspace):
        super().__init__(ws)
        self.ws = ws
        self._pending: ClassifierChoice | None = None  # the choice being loaded now

    def use(self, classifier: ClassifierInfo) -> None:
        """Score with `classifier` from now on (its name and note in the score panel)."""
        self.ws.gallery.use_classifier(classifier)
        self.ws.score_panel.show_classifier(*self.ws.gallery.classifier_text())

    def chosen(self) -> None:
        ws = self.ws
        key = ws.controls.classifier_box.currentData()
        if key == MODEL:
            if ws.ready():
                ws.refresh()
            return
        spec = key
        if key.startswith("inception"):
            path, _ = QFileDialog.getOpenFileName(ws, "Inception v3 weights", "", "Weights (*.pth *.pt);;All (*)")
            if not path:
                return
            spec = f"{key}:{path}"
        ws.run.stop()
        self.load(spec)

    def load(self, spec: str) -> None:
        """Load classifier `spec` (or MODEL) with the state's features on the loaded model's device, then score the
        samples from the start."""
        ws = self.ws
        self._submit(ClassifierChoice(spec, ws.state.model, features=ws.gallery.features))

    def load_features(self, features: str) -> None:
        """Measure the distances in `features` (a feature network spec): the classifier scoring now (or being
        loaded) is loaded again with them, and the samples are scored from the start. Until it has loaded the
        features in effect stay, and stay for good when it fails (the stream, paused meanwhile, goes on)."""
        ws, g = self.ws, self.ws.gallery
        current = self._pending or (g.classifier.choice if g.classifier is not None else None)
        if current is None:  # nothing scores yet: the first classifier loads with them
            g.features = features
            return
        if current.features == features:
            return
        was_streaming = g.streaming
        ws.run.stop()

        def failed(_error: TaskError) -> None:  # (the pool reports the error as it reports every failed load)
            ws.real_panel.drop_features(features)
            if was_streaming and g.classifier is not None:
                ws.run.start()

        self._submit(replace(current, features=features), failed)

    def _submit(self, choice: ClassifierChoice, failed: Callable[[TaskError], None] | None = None) -> None:
        ws = self.ws
        self._pending = choice

        def loaded(classifier: ClassifierInfo) -> None:
            self._pending = None
            ws.gallery.features = classifier.choice.features  # (the features in effect: the box follows them)
            self.use(classifier)
            ws.run.reset(start=True)

        def error(e: TaskError) -> None:
            self._pending = None
            if failed is not None:
                failed(e)

        name = f"load classifier {choice.spec}" + ("" if choice.features == CLASSIFIER else
                                                    f" with features {choice.features}")
        job = Job(load_classifier, dict(choice=choice))
        ws.pool.submit(job, name=name, key=ws.task_key("classifier"), executor=COMPUTE, on_result=loaded,
                       on_error=error)
