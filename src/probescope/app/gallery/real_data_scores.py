"""The Gallery's scores against real data as the Real data panel shows them: the reference loaded (in the compute
kernel, through the classifier of the scores), the batches' features and logits taken into one `LiveScores`, and
the readings `jobs.scoring.live.LiveReadings` says are due run in the I/O pool.

A reference that changes mid-run is scored against the samples kept so far (the stream pauses meanwhile), so no
image is classified twice.
"""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from probescope.app.gallery.real_data_panel import RealDataPanel, headline
from probescope.core.scoring.live_scores import LiveScores
from probescope.jobs.protocol import COMPUTE, IO, Job, TaskError
from probescope.jobs.scoring.live import Due, LiveReadings
from probescope.jobs.scoring.reference import DATASET, NONE, ReferenceChoice, load_reference_scores
from probescope.jobs.scoring.stream import ClassifierInfo


class RealDataScores(QObject):
    """`use(classifier, dataset)` at each run; `add(features, logits)` per batch; `update(streaming)` per redraw.
    `installed` is emitted when `live` is replaced (a new run, reference or classifier)."""

    installed = Signal()

    def __init__(self, pool, task_key: Callable[[str], str], panel: RealDataPanel, readings: LiveReadings,
                 pause: Callable[[], bool], resume: Callable[[], None], on_headline: Callable[[str], None]):
        super().__init__(panel)
        self.pool, self.task_key, self.panel, self.readings = pool, task_key, panel, readings
        self._pause, self._resume, self._on_headline = pause, resume, on_headline
        self.choice = ReferenceChoice(DATASET)
        self.classifier: ClassifierInfo | None = None
        self.dataset = None
        self.reference = None
        self.streaming = False
        self._loaded_for: tuple | None = None  # (choice, classifier, dataset) the reference belongs to
        panel.reference_chosen.connect(self.choose)

    @property
    def live(self) -> LiveScores | None:
        return self.readings.live

    @property
    def fast(self):
        return self.readings.fast

    @property
    def slow(self):
        return self.readings.slow

    # -- inputs ---------------------------------------------------------------------------------------------------
    @property
    def has_features(self) -> bool:
        return self.classifier is not None and self.classifier.has_features

    def use(self, classifier: ClassifierInfo | None, dataset) -> None:
        """A new run by `classifier` (None: no classifier, e.g. a worked example): fresh scores against the
        reference, which is (re)loaded when the classifier or dataset changed."""
        self.classifier, self.dataset = classifier, dataset
        if classifier is not None:
            self.panel.show_classifier(classifier)  # (first: the table and fits drawn next name its features)
        self._new_scores(None)
        if classifier is None:
            self.panel.show_status("The worked examples give p(y|x) only: no images, no features.")
            return
        if not self.has_features:
            self.panel.show_status(f"Classifier {classifier.name} gives no features (a TorchScript file runs no "
                                   "hooks): FID, KID and precision/recall need a model whose last layer is linear, "
                                   "or the TF Inception (inception-tf:FILE).", warning=True)
            return
        if self._loaded_for == self._wanted():
            self._new_scores(self.reference)
            self._show_reference()
        else:
            self._load(kept=False)

    def choose(self, choice: ReferenceChoice) -> None:
        """The user picked real data: load it; the samples scored so far are scored against it too."""
        self.choice = choice
        self.panel.set_choice(choice)
        if self.has_features:
            self._load(kept=True)

    def _wanted(self) -> tuple:
        """What the loaded reference must match: the choice, the classifier's identity (weights, preprocessing,
        feature layer) and, for the probing dataset's images, which dataset is loaded."""
        return (self.choice, self.classifier.identity, id(self.dataset) if self.choice.spec == DATASET else None)

    def _load(self, kept: bool) -> None:
        if self.choice.spec == DATASET and self.dataset is None:  # (the demo world opens its inputs in parallel)
            if not kept:
                self._new_scores(None)
            self.reference, self._loaded_for = None, None
            self.panel.show_status("Waiting for a probing dataset, whose images are the reference: open one, or "
                                   "choose real images with Open….")
            return
        wanted, live = self._wanted(), self.live
        was_streaming = self._pause()  # no batch arrives until the scores against the new reference are installed
        features = (live.features, live.logits) if kept and live is not None and live.n else None
        if features is None:
            self._new_scores(None)
        choice, dataset, classifier = self.choice, self.dataset, self.classifier
        self.panel.show_status(f"Loading {choice.label} as {classifier.name} sees it…")

        def loaded(result) -> None:
            self.reference, live = result
            self._loaded_for = wanted
            self._install(live)
            self._show_reference()
            if was_streaming:
                self._resume()

        def failed(error: TaskError) -> None:
            self.reference, self._loaded_for = None, None
            if features is not None:
                self._install(self._rebuild_without_reference(features))
            self.panel.show_status(f"No reference: {error.message}", warning=True)
            if was_streaming:
                self._resume()

        job = Job(load_reference_scores, dict(choice=choice, dataset=dataset, classifier=classifier.choice,
                                              kept=features))
        self.pool.submit(job, name=f"reference set: {choice.label}", key=self.task_key("reference"),
                         executor=COMPUTE, on_result=loaded, on_error=failed)

    def _rebuild_without_reference(self, features) -> LiveScores:
        live = LiveScores(None, class_names=self.classifier.class_names, clip=self.classifier.clip)
        live.add(*features)
        return live

    def _new_scores(self, reference) -> None:
        self._install(LiveScores(reference, class_names=self.classifier.class_names, clip=self.classifier.clip)
                      if self.has_features else None)

    def _install(self, live: LiveScores | None, kept: tuple | None = None) -> None:
        """Readings of `live` from now on (those set aside as `kept`, when given)."""
        self.pool.cancel(self.task_key("scores:real-fast"), superseded=True)
        self.pool.cancel(self.task_key("scores:real-slow"), superseded=True)
        if kept is None:
            self.readings.install(live)
        else:
            self.readings.restore(kept)
        self._show_fast()
        self._show_slow()
        self.update(self.streaming)
        self.installed.emit()

    def _show_reference(self) -> None:
        ref = self.reference
        if ref is None:
            self.panel.show_status("No reference: IS only." if self.choice.spec == NONE else "")
            return
        kinds = "mu/sigma statistics: FID only" if ref.features is None else (ref.feature_note or "features")
        cached = "; read from the cache" if ref.cache_path is not None else ""
        self.panel.show_status(f"Reference: <b>{ref.describe()}</b> — {kinds}{cached}")

    def set_aside(self) -> tuple:
        """Put the scores away while the gallery shows something else (a worked example); `bring_back` restores
        them as they were."""
        kept = self.readings.kept()
        self._install(None)
        self.panel.show_status("A worked example is shown: p(y|x) given, no images to compare with real data. "
                               "Choose Opened samples to see these scores again.")
        return kept

    def bring_back(self, kept: tuple) -> None:
        self._install(kept[0], kept)
        self._show_reference()

    def dataset_changed(self, dataset) -> None:
        """A new probing dataset: when its images are the reference, the scores so far are read against it."""
        self.dataset = dataset
        if self.choice.spec == DATASET and self.has_features:
            self._load(kept=True)

    # -- batches and readings -------------------------------------------------------------------------------------
    def add(self, features, logits) -> None:
        if self.live is not None and features is not None:
            self.live.add(features, logits)

    def update(self, streaming: bool) -> None:
        """Run the readings due (N moved and the previous reading is back; slow ones throttled)."""
        self.streaming = streaming
        if self.pool.is_shut_down:
            return
        for due in self.readings.due(streaming, lambda key: self.pool.is_running(self.task_key(f"scores:{key}"))):
            self._read(due)

    def _read(self, due: Due) -> None:
        def done(readout) -> None:
            if not due.take(readout):
                return
            if due.key == "real-slow":
                self._show_slow()
            self._show_fast()
            QTimer.singleShot(0, lambda: self.update(self.streaming))  # N may have moved meanwhile

        self.pool.submit(due.job, name=due.name, executor=IO, on_result=done, key=self.task_key(f"scores:{due.key}"))

    @property
    def has_reference(self) -> bool:
        return self.readings.has_reference

    def _show_fast(self) -> None:
        """The table of scores and the headline (with precision/recall once read at the same N)."""
        self.panel.show_readout(self.fast, self.slow, self.has_reference)
        label = self.classifier.feature_label if self.classifier is not None else "FID"
        self._on_headline(headline(self.readings.headline(), self.has_reference, label))

    def _show_slow(self) -> None:
        """The 1/N fits with the live paths, and coverage."""
        self.panel.show_fits(self.slow, self.readings.paths())
        slow = self.slow
        why = ("no reference" if not self.has_reference else
               (slow.missing.get("coverage", "") if slow is not None else "waiting for samples"))
        self.panel.show_coverage(slow.coverage if slow is not None else None, why)
