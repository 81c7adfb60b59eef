"""What the gallery shows, without Qt: the scores, the chosen source, classifier and feature network, whether it
streams, the demo run scored now and what the score panel offers. An evented dataclass (psygnal): the widgets follow
its events (`state.events.streaming.connect(...)`), and the text the window shows is computed here, so it is tested
without a window."""

from __future__ import annotations

from dataclasses import dataclass, field

from psygnal import evented

from probescope.jobs.scoring.live import LiveReadings, LiveSplit
from probescope.jobs.scoring.live_realism import LiveRealism
from probescope.jobs.scoring.samples import GalleryScores
from probescope.jobs.scoring.stream import CLASSIFIER, ClassifierInfo, DemoRun

SAMPLES = "samples"  # the source of the opened samples (the others are the worked examples A-D)
KNOBS, MODEL = "knobs", "model"  # what the score panel may offer: a run with the knobs, the loaded model


@dataclass(frozen=True)
class Offer:
    """What the score panel's notice offers: `kind` KNOBS or MODEL, its text and the button's."""

    kind: str
    text: str
    action: str


@evented
@dataclass
class GalleryState:
    """The gallery's state. `scores` are the per-image scores, `split` their split protocol, `readings` the
    readings against real data and `realism` each sample's against real images (jobs.scoring.live and
    live_realism: what is due and what came back). `kept` holds the opened
    samples' scores (scores, split, class names, real-data scores)
    while a worked example is shown; `run` the demo sampler's run scored now (None for other samples); `features`
    the feature network spec every distance is measured in (core.scoring.features; CLASSIFIER: the classifier's
    own), the one in effect: it changes once a classifier with those features has loaded."""

    scores: GalleryScores = field(default_factory=GalleryScores)
    split: LiveSplit = field(default_factory=LiveSplit)
    readings: LiveReadings = field(default_factory=LiveReadings)
    realism: LiveRealism = field(default_factory=LiveRealism)
    source: str = SAMPLES
    classifier: ClassifierInfo | None = None
    features: str = CLASSIFIER
    class_names: tuple[str, ...] | None = None
    streaming: bool = False
    run: DemoRun | None = None
    offer: Offer | None = None
    kept: tuple | None = None

    @property
    def shows_samples(self) -> bool:
        return self.source == SAMPLES

    def use_classifier(self, classifier: ClassifierInfo) -> None:
        self.classifier = classifier
        self.class_names = classifier.class_names

    def classifier_text(self) -> tuple[str, str]:
        """The score panel's classifier line: (name, note)."""
        c = self.classifier
        return c.name, c.note + (" (comparable with published scores)" if c.comparable else "")

    def classifier_label(self) -> str:
        """Who made the probabilities the split protocol reads."""
        if not self.shows_samples:
            return "none (given probabilities)"
        return self.classifier.name if self.classifier is not None else "—"

    def play_label(self, length: int | None) -> str:
        """Start, Pause or Resume (some of the `length` images are scored)."""
        if self.streaming:
            return "Pause"
        return "Resume" if 0 < self.scores.n < (length or 0) else "Start"

    def run_text(self, source_name: str | None, target: int) -> str:
        """The score panel's line about what is scored: `source_name` (None: nothing opened), or the demo run of
        `target` images."""
        if self.run is None:
            return "" if source_name is None else f"Scoring {source_name}"
        return (f"This run: demo sampler, diversity {self.run.diversity}, fidelity {self.run.fidelity:.2f}, "
                f"N {target:,}")

    def knobs_changed(self, knobs: tuple[int, float]) -> None:
        """The demo knobs read `knobs`: they apply to the next run, which is offered while they differ."""
        if self.run is None:
            return
        if knobs != (self.run.diversity, self.run.fidelity):
            d, f = knobs
            self.offer = Offer(KNOBS, f"The knobs say diversity {d}, fidelity {f:.2f}: they apply to the next run, "
                               "so this run's images stay comparable.", "Start a run with them")
        elif self.offer is not None and self.offer.kind == KNOBS:
            self.offer = None  # what the stream draws next

    def offer_model(self, model_label: str) -> None:
        """A newly opened model is offered as the classifier of the scored set, not imposed."""
        self.offer = Offer(MODEL, f"The loaded model is now {model_label}; these scores are by "
                           f"{self.classifier.name}.", "Score with the loaded model")
