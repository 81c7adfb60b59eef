"""The psychological embedding of the judgments on show: the first quick fit (cached on disk, so a second launch
shows it at once), refits with progress and cancel, the convergence measures of every fit, and stimulus thumbnails
on hover."""

from __future__ import annotations

from collections.abc import Callable

from probescope.app.compute.workers import WorkerPool
from probescope.app.similarity.panels import EmbeddingPanel
from probescope.app.similarity.state import SimilarityState
from probescope.app.similarity.stimuli import stimulus_images
from probescope.core.cache import cache_dir
from probescope.jobs.protocol import COMPUTE, IO, Job
from probescope.jobs.similarity.embedding import Convergence, projection_2d
from probescope.jobs.similarity.tasks import quick_embedding_job, refit_job
from probescope.jobs.similarity.trials import TrialSet, stimulus_name


class EmbeddingFits:
    """Fits land in the workspace's state (`state.fitted`: its history, then its ensemble, whose event follows)."""

    def __init__(self, pool: WorkerPool, key: Callable[[str], str], panel: EmbeddingPanel, state: SimilarityState):
        self.pool, self._key, self.panel, self.state = pool, key, panel, state
        self._refit = None  # the refit's handle while it runs
        self._said = ""  # what the panel said of the embedding on show when the refit started
        panel.cancel_button.clicked.connect(lambda: pool.cancel(key("refit")))
        panel.refit_requested.connect(self.refit)
        pool.finished.connect(self._finished)

    def start(self, trialset: TrialSet, loaded) -> None:
        """The quick fit of `loaded` judgments (read from the cache after the first launch)."""
        judgments, spec = loaded.value, loaded.spec

        def done(result) -> None:
            ensemble, cached, self.state.coarse, coarse_name, measures = result
            how = "quick fit, read from the cache" if cached else "quick fit"
            self._set(ensemble, measures, f"{how}: {ensemble.dims}-D, {ensemble.n_members} members", coarse_name,
                      judgments)

        job = Job(quick_embedding_job, dict(trialset=trialset, judgments=judgments, spec=spec, cache=cache_dir()))
        self.pool.submit(job,
                         name="quick embedding", key=self._key("embedding"), executor=COMPUTE, on_result=done)

    def refit(self, dims: list[int], n_members: int, warm: bool) -> None:
        """A full fit over `dims` (dimensionality chosen by held-out loss), warm-started from the current one."""
        trialset, judgments = self.state.trialset, self.state.judgments
        if trialset is None:
            return
        coarse, previous = self.state.coarse, self.state.ensemble

        def done(result) -> None:
            fit, measures = result
            chosen = f"refit: {fit.ensemble.dims}-D chosen of {sorted(fit.dims_loss)}, {fit.ensemble.n_members} members"
            self._refit = None  # (done: what the panel says is the new fit's)
            self._set(fit.ensemble, measures, chosen, self.panel.coarse_name, judgments)

        self._said = self.panel.info.text()
        self.panel.set_running(True)
        job = Job(refit_job, dict(trialset=trialset, judgments=judgments, dims=dims, n_members=n_members,
                                  previous=previous, warm=warm, coarse=coarse))
        self._refit = self.pool.submit(job, name="refit embedding", key=self._key("refit"), executor=COMPUTE,
                                       on_result=done)

    def _finished(self, handle) -> None:
        """The refit ended however it ended (done, failed, or cancelled from anywhere: its own button, the status
        bar, the Tasks panel): the panel stops saying it runs, and says what became of it unless it is done."""
        if handle is not self._refit and not (self._refit is None and handle.key == self._key("refit")):
            return
        ended = self._refit is not None  # cancelled or failed: no new fit came
        self._refit = None
        self.panel.set_running(False)
        if ended:
            what = "cancelled" if handle.cancelled else "failed (see the message)"
            self.panel.info.setText(f"Refit {what}; the embedding shown is the previous one: {self._said}")

    def hover(self, judgments, index: int) -> None:
        """Stimulus `index`'s thumbnail beside the embedding's point under the mouse."""
        self.pool.submit(lambda ctx: stimulus_images(judgments, [index], 96, ctx)[0], name="thumbnail",
                         key=self._key("hover"), executor=IO,
                         on_result=lambda item: self.panel.view.set_thumbnail(index, *item))

    def _set(self, ensemble, measures: Convergence, how: str, coarse_name: str, judgments) -> None:
        xy, projection = projection_2d(ensemble)
        note = " — SIMULATED judgments" if judgments.simulated else ""
        self.panel.show_embedding(xy, f"{how}; {projection}{note}", [*self.state.history, measures], coarse_name,
                                  lambda k: stimulus_name(judgments, k))
        self.state.fitted(ensemble, measures)
