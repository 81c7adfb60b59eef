"""The psychological embedding of the judgments on show: the first quick fit (cached on disk, so a second launch
shows it at once), refits with progress and cancel, the convergence measures of every fit, and stimulus thumbnails
on hover. `fitted(ensemble)` follows each fit."""

from __future__ import annotations

from collections.abc import Callable

from PySide6.QtCore import QObject, Signal

from probescope.app.similarity import analysis as data
from probescope.app.similarity import jobs
from probescope.app.similarity.panels import EmbeddingPanel
from probescope.app.similarity.stimuli import stimulus_images
from probescope.app.workers import WorkerPool
from probescope.jobs.protocol import COMPUTE, IO


class EmbeddingFits(QObject):
    fitted = Signal(object)

    def __init__(self, pool: WorkerPool, key: Callable[[str], str], panel: EmbeddingPanel,
                 parent: QObject | None = None):
        super().__init__(parent)
        self.pool, self._key, self.panel = pool, key, panel
        self.ensemble = None
        self.coarse = None  # the coarse-grained trials the loss is measured on
        self.history: list[data.Convergence] = []
        panel.cancel_button.clicked.connect(lambda: pool.cancel(key("refit")))

    def reset(self) -> None:
        self.ensemble = self.coarse = None
        self.history = []

    def start(self, trialset: data.TrialSet, loaded) -> None:
        """The quick fit of `loaded` judgments (read from the cache after the first launch)."""
        from probescope.core.cache import cache_dir

        judgments, spec = loaded.value, loaded.spec

        def done(result) -> None:
            ensemble, cached, self.coarse, coarse_name, measures = result
            how = "quick fit, read from the cache" if cached else "quick fit"
            self._set(ensemble, measures, f"{how}: {ensemble.dims}-D, {ensemble.n_members} members", coarse_name,
                      judgments)

        self.pool.submit(lambda ctx: jobs.quick_embedding_task(trialset, judgments, spec, cache_dir(), ctx),
                         name="quick embedding", key=self._key("embedding"), executor=COMPUTE, on_result=done)

    def refit(self, trialset: data.TrialSet, judgments, dims: list[int], n_members: int, warm: bool) -> None:
        """A full fit over `dims` (dimensionality chosen by held-out loss), warm-started from the current one."""
        coarse, previous = self.coarse, self.ensemble

        def done(result) -> None:
            fit, measures = result
            chosen = f"refit: {fit.ensemble.dims}-D chosen of {sorted(fit.dims_loss)}, {fit.ensemble.n_members} members"
            self._set(fit.ensemble, measures, chosen, self.panel.coarse_name, judgments)

        self.panel.set_running(True)
        self.pool.submit(lambda ctx: jobs.refit_task(trialset, judgments, dims, n_members, previous, warm, coarse,
                                                     ctx),
                         name="refit embedding", key=self._key("refit"), executor=COMPUTE, on_result=done)

    def hover(self, judgments, index: int) -> None:
        """Stimulus `index`'s thumbnail beside the embedding's point under the mouse."""
        self.pool.submit(lambda ctx: stimulus_images(judgments, [index], 96, ctx)[0], name="thumbnail",
                         key=self._key("hover"), executor=IO,
                         on_result=lambda item: self.panel.view.set_thumbnail(index, *item))

    def _set(self, ensemble, measures: data.Convergence, how: str, coarse_name: str, judgments) -> None:
        self.ensemble = ensemble
        self.history.append(measures)
        xy, projection = data.projection_2d(ensemble)
        note = " — SIMULATED judgments" if judgments.simulated else ""
        self.panel.show_embedding(xy, f"{how}; {projection}{note}", self.history, coarse_name,
                                  lambda k: data.stimulus_name(judgments, k))
        self.fitted.emit(ensemble)
