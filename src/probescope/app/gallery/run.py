"""The gallery's scoring run: start, pause and resume the stream of the opened samples through the classifier (a
`jobs.scoring.stream` job in the compute thread), and take its batches into the scores.

A paused or superseded stream simply stops delivering: the scores never hold a batch the gallery did not receive,
and resuming starts a new stream at the next unscored image. A demo run keeps the knobs it started with.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, replace

from PySide6.QtCore import QObject, QTimer

from probescope.app.compute.workers import WorkerPool
from probescope.app.gallery.controls import GalleryControls
from probescope.app.gallery.images import SampleImages
from probescope.app.gallery.panels import DetailPanel, ScorePanel
from probescope.app.gallery.real_data_scores import RealDataScores
from probescope.app.gallery.state import GalleryState
from probescope.core.demo.sampler import DemoSampler
from probescope.jobs.inputs import Loaded
from probescope.jobs.protocol import COMPUTE, TaskError
from probescope.jobs.scoring.held import HeldGenerator, hold_samples
from probescope.jobs.scoring.stream import DemoRun, stream_job
from probescope.widgets.gallery.grid import GalleryModel
from probescope.widgets.images import to_qimage

UPDATE_MS = 40  # the live IS redraws at most this often (25 Hz), at least once per arriving batch


@dataclass(frozen=True)
class RunParts:
    """What a scoring run reads and shows besides the stream: the toolbar (the sampler's knobs, N and the play
    button), the score and detail panels, the grid's thumbnails, the sample images and the scores against real
    data; `opened()` the samples loaded now, `reference_dataset()` the probing dataset whose images are the
    reference, `use_classifier` shows the classifier that scores, `redraw` the views, `first_work_done` tells the
    window the workspace has shown its first results."""

    controls: GalleryControls
    score_panel: ScorePanel
    detail: DetailPanel
    thumbnails: GalleryModel
    images: SampleImages
    real: RealDataScores
    opened: Callable[[], Loaded | None]
    reference_dataset: Callable[[], object]
    use_classifier: Callable[[object], None]
    redraw: Callable[[], None]
    first_work_done: Callable[[], None]


class ScoringRun(QObject):
    """The stream of the Gallery whose state is `state`: `reset`, `start`, `stop`; the play button follows
    `state.streaming`. Its task runs in `pool` under `key`."""

    def __init__(self, pool: WorkerPool, key: str, state: GalleryState, parts: RunParts, parent: QObject):
        super().__init__(parent)
        self.pool, self.key, self.state, self.parts = pool, key, state, parts
        self._update_timer = QTimer(self)
        self._update_timer.setSingleShot(True)
        self._update_timer.setInterval(UPDATE_MS)
        self._update_timer.timeout.connect(parts.redraw)
        self._pending: deque = deque()  # batches received, not yet taken into the scores
        self._ended = False  # the stream has ended: its last batches are being taken
        self._take_timer = QTimer(self)
        self._take_timer.setSingleShot(True)
        self._take_timer.setInterval(0)
        self._take_timer.timeout.connect(self._take_next)
        self._stream = None  # the task of the stream running now
        self.state.events.streaming.connect(lambda _on: self.show_play())
        pool.finished.connect(self._stream_finished)

    @property
    def samples(self):
        """The opened samples (None: none yet)."""
        loaded = self.parts.opened()
        return None if loaded is None else loaded.value

    def clear(self) -> None:
        """Forget every score (and stop)."""
        parts = self.parts
        self.stop()
        self._pending.clear()
        self._ended = False
        self.state.scores.reset()
        self.state.split.reset()
        parts.images.forget()  # pending reads and the split protocol belonged to the old scores
        parts.thumbnails.clear()
        parts.detail.clear()

    def reset(self, start: bool = False) -> None:
        """Forget every score; with `start` (or while streaming) stream the opened samples again from image 0."""
        parts, state = self.parts, self.state
        was_streaming = state.streaming
        self.clear()
        source = self.samples
        if not state.shows_samples or source is None:
            parts.redraw()
            return
        if state.classifier is not None:  # (the worked example may have replaced the class names)
            parts.use_classifier(state.classifier)
            parts.real.use(state.classifier, parts.reference_dataset())  # (before the stream: it may load it)
        parts.thumbnails.has_images = True
        parts.images.use(source)
        demo = isinstance(source, DemoSampler)
        parts.controls.enable(demo=demo, stream=True)
        state.run = DemoRun(parts.controls.target.value(), *parts.controls.knobs(), source.seed) if demo else None
        self.show_run()
        parts.redraw()
        if start or was_streaming:
            self.start()

    def start(self) -> None:
        """Stream from the next unscored image (start, or resume after a pause)."""
        parts, state = self.parts, self.state
        source = self.samples
        if state.classifier is None or source is None or not state.shows_samples:
            return
        start = state.scores.n
        if state.run is not None:  # (N may have changed since: the run goes on to the new N)
            samples = state.run = replace(state.run, n=parts.controls.target.value())
            length = samples.n
        elif isinstance(source, HeldGenerator):  # held where it was opened (the compute kernel)
            samples, length = source, source.length
        else:
            samples = hold_samples(self.pool.session, parts.opened().spec, source)
            length = source.length
        if length is not None and start >= length:  # all scored: Start begins again
            self.reset(start=True)
            return
        state.streaming = True
        job = stream_job(samples, state.classifier.choice, start, parts.images.keep_thumbnails)
        self._stream = self.pool.submit(job, name="score samples", key=self.key, executor=COMPUTE,
                                        on_partial=self._on_batch, on_result=self._on_end, on_error=self._on_error)

    def stop(self) -> None:
        """Pause: the stream stops after its current batch; nothing it scored is lost."""
        self._stream = None
        self.pool.cancel(self.key, ended_as="paused", superseded=True)
        self._take_all()
        self._ended = False
        self._stopped()

    def _stream_finished(self, handle) -> None:
        """The stream cancelled from outside the Gallery (the status bar, the Tasks panel) is paused as Pause does:
        its callbacks never run, and the Gallery went on saying it streamed."""
        if handle is not self._stream:
            return
        self._stream = None  # (held, it would keep the finished task's inputs)
        if handle.cancelled:
            self.pause()

    def _stopped(self) -> None:
        self.state.streaming = False
        self.show_play()  # (Start or Resume: it depends on how many are scored)

    def show_play(self) -> None:
        controls, source = self.parts.controls, self.samples
        length = controls.target.value() if isinstance(source, DemoSampler) else getattr(source, "length", None)
        play = controls.play
        play.blockSignals(True)
        play.setChecked(self.state.streaming)
        play.setText(self.state.play_label(length))
        play.blockSignals(False)

    def pause_for_reference(self) -> bool:
        """Pause while the scores so far are read against a new reference; True when it was streaming."""
        was_streaming = self.state.streaming
        self.stop()
        return was_streaming

    def play_toggled(self, on: bool) -> None:
        if on:
            self.start()
        else:
            self.pause()

    def pause(self) -> None:
        """Stop as the user asked (Pause, or Cancel outside the Gallery)."""
        self.stop()
        self._show_stopped()

    def show_run(self) -> None:
        """What this run scores, and a run with other knobs offered when they differ (they apply to the next run)."""
        controls, source = self.parts.controls, self.samples
        name = None if source is None else getattr(source, "name", "the opened samples")
        self.parts.score_panel.show_run(self.state.run_text(name, controls.target.value()))
        self.state.knobs_changed(controls.knobs())

    def target_changed(self) -> None:
        """The stream goes on to the new N, or stops when as many are scored already (it went on to the old N);
        the line and the button say what the stream does, or what the next Start or Resume does (issue 45: the line
        kept the old N while the stream went on to the new one)."""
        if self.state.streaming and self.state.run is not None:  # (N is the demo sampler's)
            self.stop()
            if self.state.scores.n < self.parts.controls.target.value():
                self.start()
            else:
                self._show_stopped()
        self.show_run()
        self.show_play()

    def _on_batch(self, batch) -> None:
        """Batches are taken one per turn of the event loop: a kernel's batches can arrive together, and Qt
        delivers them in one go (measured: a 186 ms stall at 50,000 samples)."""
        self._pending.append(batch)
        if not self._take_timer.isActive():
            self._take_timer.start()

    def _take_next(self) -> None:
        if self._pending:
            self._take(self._pending.popleft())
        if self._pending:
            self._take_timer.start()
        elif self._ended:
            self._finished()

    def _take_all(self) -> None:
        while self._pending:
            self._take(self._pending.popleft())

    def _take(self, batch) -> None:
        parts, scores = self.parts, self.state.scores
        if batch.start != scores.n:  # a batch of a stream that was replaced
            return
        scores.add_logits(batch.logits)
        parts.real.add(batch.features, batch.logits)
        if batch.sampler is not None:
            parts.images.drawn(batch.start, batch.sampler)
        if batch.thumbnails:
            parts.thumbnails.add_thumbnails({batch.start + i: to_qimage(im) for i, im in enumerate(batch.thumbnails)},
                                            keep=parts.images.keep_thumbnails)
        if not self._update_timer.isActive():
            self._update_timer.start()

    def _on_end(self, _n: int) -> None:
        """The stream is done; it is said so once its last batches are in (still taken one per turn)."""
        self._ended = True
        if not self._take_timer.isActive():
            self._take_next()

    def _finished(self) -> None:
        self._ended = False
        self._stopped()
        self._show_stopped()

    def _on_error(self, _error: TaskError) -> None:
        self._take_all()  # (what it scored before it failed stays)
        self._stopped()
        self._show_stopped()

    def _show_stopped(self) -> None:
        """The numbers as they stand, at once: they said 'streaming' until a batch's redraw came, and after a stop
        none may come (the Pause button and a failed stream left the word there)."""
        self.parts.redraw()
        self.parts.first_work_done()

