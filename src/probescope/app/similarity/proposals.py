"""Active learning in the window: propose the next trials from the embedding on show (the workflow's
`jobs.similarity.propose`, at the window's preset size), list them, and show a selected candidate in the grid."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from probescope.app.compute.workers import WorkerPool
from probescope.app.similarity.panels import ActivePanel, EmbeddingPanel
from probescope.app.similarity.state import SimilarityState
from probescope.app.similarity.stimuli import stimulus_images
from probescope.app.similarity.trial_view import CELL, TrialView
from probescope.app.similarity.trials_panel import TrialsPanel
from probescope.core.similarity.settings import WINDOW_PROPOSAL
from probescope.jobs.protocol import COMPUTE, IO, Job
from probescope.jobs.similarity.tasks import propose_job
from probescope.jobs.similarity.trials import stimulus_name


class Proposals:
    def __init__(self, pool: WorkerPool, key: Callable[[str], str], state: SimilarityState, active: ActivePanel,
                 view: TrialView, embedding: EmbeddingPanel, trials: TrialsPanel):
        self.pool, self._key, self.state = pool, key, state
        self.active, self.view, self.embedding, self.trials = active, view, embedding, trials
        active.propose_requested.connect(self.propose)
        active.cancel_button.clicked.connect(lambda: pool.cancel(key("propose")))
        active.candidates.currentRowChanged.connect(self.show_candidate)

    def propose(self, n_queries: int, n_candidates: int) -> None:
        ensemble, judgments = self.state.ensemble, self.state.judgments
        if ensemble is None:
            return
        settings = replace(WINDOW_PROPOSAL, queries=n_queries, candidates=n_candidates)
        self.active.set_running(True)
        self.pool.submit(Job(propose_job, dict(ensemble=ensemble, judgments=judgments, settings=settings)),
                         name="propose trials", key=self._key("propose"), executor=COMPUTE,
                         on_result=lambda proposal: self.active.show_proposal(
                             proposal, lambda q: stimulus_name(judgments, q)))

    def show_candidate(self, row: int) -> None:
        """Candidate `row` of the list (best first) in the grid, with its expected information gain."""
        proposal = self.active.proposal
        if proposal is None or row < 0:
            return
        index = int(self.active.order[row])
        judgments = self.state.judgments
        stimuli, refs, _ = self.state.stimuli(proposal.trials, index)
        self.state.trial = -1  # a proposal is not one of the file's trials
        self.trials.trial_list.clearSelection()

        def show(images: list) -> None:
            self.view.grid.set_trial(images[0], images[1:], [])
            self.view.caption.setText(f"Proposed trial ({proposal.kind[index]}): expected information gain "
                                      f"{proposal.info_gain[index]:.4f} nats — not yet answered")
            self.view.summary.setText("")
            self.embedding.view.highlight(stimuli[0], [], refs)

        self.pool.submit(lambda ctx: stimulus_images(judgments, stimuli, 2 * CELL, ctx), name="proposed trial",
                         key=self._key("trial"), executor=IO, on_result=show)

    def running(self) -> None:
        """A task ended: the panel leaves the running state unless a proposal is still on its way."""
        self.active.set_running(self.pool.is_running(self._key("propose")))
