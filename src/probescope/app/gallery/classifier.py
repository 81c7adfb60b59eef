"""Which classifier scores the gallery's samples: the loaded model or one the engine loads ('demo', the Inception
ports from a weights file the user picks), made by a job where the model is held (`jobs.scoring_stream`), on the
loaded model's device; the window keeps the `ClassifierInfo` it returns."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QFileDialog

from probescope.app.gallery.state import MODEL
from probescope.jobs.protocol import COMPUTE, Job
from probescope.jobs.scoring_stream import ClassifierChoice, ClassifierInfo, load_classifier

if TYPE_CHECKING:
    from probescope.app.gallery.workspace import GalleryWorkspace


class ClassifierPicker(QObject):
    """The classifier box of the gallery `ws`: `chosen()` when the user picks, `load(spec)` to score with `spec`."""

    def __init__(self, ws: GalleryWorkspace):
        super().__init__(ws)
        self.ws = ws

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
        """Load classifier `spec` (or MODEL) on the loaded model's device, then score the samples from the start."""
        ws = self.ws

        def loaded(classifier: ClassifierInfo) -> None:
            self.use(classifier)
            ws.run.reset(start=True)

        job = Job(load_classifier, dict(choice=ClassifierChoice(spec, ws.state.model)))
        ws.pool.submit(job, name=f"load classifier {spec}", key=ws.task_key("classifier"), executor=COMPUTE,
                       on_result=loaded)
