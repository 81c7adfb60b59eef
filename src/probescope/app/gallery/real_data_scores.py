"""The gallery's scores against real data, kept in the GUI thread and read in workers.

Each streamed batch's features and logits go into one `LiveScores`; its O(batch x d^2) Gaussian sums are folded
in by the readings, in workers, and taken back from them (`LiveScores.adopt`). Reading is two kinds of
worker task on a snapshot: a quick one (IS, FID, KID) asked for whenever N moved and the last one came back, so it
redraws as often as the machine allows (every batch at the demo's 128-d features), and a slow one (the infinite-N
fits, class coverage, and precision/recall, density/coverage and CMMD, O(N^2 d)) asked for at most every few
seconds while streaming and once more when the stream stops. A reference that changes mid-run is scored against
the samples kept so far (the stream pauses meanwhile), so no image is classified twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from probescope.app.gallery.real_data_panel import RealDataPanel, headline
from probescope.core.scoring.live_scores import LiveScores, Readout
from probescope.jobs.protocol import COMPUTE, IO, Job, TaskError
from probescope.jobs.scoring.reference import DATASET, NONE, ReferenceChoice, load_reference_scores, read_scores
from probescope.jobs.scoring.stream import ClassifierInfo

SLOW_EVERY_S = 2.0  # slow readings while streaming: at most this often, and at most a fifth of the time
LIVE_PRC_WORK = 2e10  # N (N + M) d up to which precision/recall is read while streaming (about a second)


class RealDataScores(QObject):
    """`use(classifier, dataset)` at each run; `add(features, logits)` per batch; `update(streaming)` per redraw.
    `installed` is emitted when `live` is replaced (a new run, reference or classifier)."""

    installed = Signal()

    def __init__(self, pool, task_key: Callable[[str], str], panel: RealDataPanel,
                 pause: Callable[[], bool], resume: Callable[[], None], on_headline: Callable[[str], None]):
        super().__init__(panel)
        self.pool, self.task_key, self.panel = pool, task_key, panel
        self._pause, self._resume, self._on_headline = pause, resume, on_headline
        self.choice = ReferenceChoice(DATASET)
        self.classifier: ClassifierInfo | None = None
        self.dataset = None
        self.reference = None
        self.live: LiveScores | None = None
        self.fast: Readout | None = None
        self.slow: Readout | None = None
        self.fid_path: list[tuple[int, float]] = []
        self.streaming = False
        self._loaded_for: tuple | None = None  # (choice, classifier, dataset) the reference belongs to
        self._generation = 0
        self._slow_time = 0.0
        self._slow_cost = 0.0
        panel.reference_chosen.connect(self.choose)

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

    def _install(self, live: LiveScores | None) -> None:
        self._generation += 1
        self.pool.cancel(self.task_key("scores:real-fast"), superseded=True)
        self.pool.cancel(self.task_key("scores:real-slow"), superseded=True)
        self.live, self.fast, self.slow, self.fid_path = live, None, None, []
        self._slow_time = self._slow_cost = 0.0
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
        kept = (self.live, self.fast, self.slow, self.fid_path)
        self._install(None)
        self.panel.show_status("A worked example is shown: p(y|x) given, no images to compare with real data. "
                               "Choose Opened samples to see these scores again.")
        return kept

    def bring_back(self, kept: tuple) -> None:
        self._install(kept[0])
        self.fast, self.slow, self.fid_path = kept[1:]
        self._show_reference()
        self._show_fast()
        self._show_slow()

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
        """Ask for new readings when N moved and the previous reading is back (slow ones throttled)."""
        self.streaming = streaming
        live = self.live
        if live is None or live.n == 0 or self.pool.is_shut_down:
            return
        if (self.fast is None or self.fast.n != live.n) and not self.pool.is_running(self.task_key("scores:real-fast")):
            self._read(live, slow=False)
        slow_due = not streaming or time.monotonic() - self._slow_time >= max(SLOW_EVERY_S, 5 * self._slow_cost)
        if (self.slow is None or self.slow.n != live.n) and slow_due \
                and not self.pool.is_running(self.task_key("scores:real-slow")):
            self._read(live, slow=True)

    def _read(self, live: LiveScores, slow: bool) -> None:
        generation, started = self._generation, time.monotonic()
        frozen = live.snapshot()
        reference = live.reference
        prc = slow and (not self.streaming or reference is None or reference.features is None
                        or live.n * (live.n + len(reference.features)) * reference.features.shape[1] <= LIVE_PRC_WORK)

        def done(readout: Readout) -> None:
            if generation != self._generation:
                return
            live.adopt(frozen)  # (the batches it folded in the worker are not folded again here)
            if slow:
                self.slow, self._slow_cost = readout, time.monotonic() - started
                self._show_slow()
            else:
                self.fast = readout
                if "FID" in readout.values:
                    self.fid_path.append((readout.n, readout.values["FID"]))
            self._show_fast()
            QTimer.singleShot(0, lambda: self.update(self.streaming))  # N may have moved meanwhile

        if slow:
            self._slow_time = started
        job = Job(read_scores, dict(frozen=frozen, fits=slow, prc=prc), compute=False)
        self.pool.submit(job, name="scores against real data", executor=IO, on_result=done,
                         key=self.task_key(f"scores:real-{'slow' if slow else 'fast'}"))

    @property
    def has_reference(self) -> bool:
        return self.live is not None and self.live.reference is not None

    def _show_fast(self) -> None:
        """The table of scores and the headline (with precision/recall once read at the same N)."""
        self.panel.show_readout(self.fast, self.slow, self.has_reference)
        fast, slow = self.fast, self.slow
        both = _merged(fast, slow) if fast is not None and slow is not None and slow.n == fast.n else fast
        label = self.classifier.feature_label if self.classifier is not None else "FID"
        self._on_headline(headline(both, self.has_reference, label))

    def _show_slow(self) -> None:
        """The 1/N fits with the live paths, and coverage."""
        live_is = self.live.history["IS"] if self.live is not None else []
        self.panel.show_fits(self.slow, {"FID": self.fid_path, "IS": live_is})
        slow = self.slow
        why = ("no reference" if not self.has_reference else
               (slow.missing.get("coverage", "") if slow is not None else "waiting for samples"))
        self.panel.show_coverage(slow.coverage if slow is not None else None, why)


def _merged(fast: Readout, slow: Readout) -> Readout:
    """The fast readout with the slow one's precision/recall, density/coverage and CMMD (both at the same N)."""
    return Readout(fast.n, {**slow.values, **fast.values}, {**slow.missing, **fast.missing}, slow.fid_inf,
                   slow.is_inf, slow.coverage)
