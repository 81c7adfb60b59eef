"""Similarity workspace (first version): one trial of the judgments at a time as a 3x3 grid (query in the centre,
picks badged); next/previous item steps through the trials. Triplet accuracy and embeddings replace this in the
Similarity issue.
"""

from __future__ import annotations

import numpy as np
from PySide6.QtWidgets import QLabel, QScrollArea, QVBoxLayout, QWidget

from probescope.app.export import ExportTarget
from probescope.app.workers import IO, TaskContext
from probescope.app.ws_base import Workspace
from probescope.core.similarity.trials import PAD
from probescope.widgets.images import to_qimage
from probescope.widgets.trial_grid import TrialGrid

CELL = 150


def trial_images(judgments, t: int, ctx: TaskContext) -> dict:
    """Query and reference images of trial `t` with captions, decoded in the I/O pool."""
    from probescope.core.scoring.sources import decode_image

    trials, catalog = judgments.trials, judgments.catalog
    refs = [int(r) for r in trials.references[t] if r != PAD]
    choices = [int(c) for c in trials.choices[t] if c != PAD]

    def picture(stimulus: int):
        ctx.check()
        if catalog is None:
            return to_qimage(np.full((CELL, CELL, 3), 128, np.uint8)), f"#{stimulus}"
        image = decode_image(catalog.image_path(stimulus))
        name = catalog.classes[stimulus] if stimulus < len(catalog.classes) else f"#{stimulus}"
        return to_qimage(image), name

    return {"query": picture(int(trials.query[t])), "references": [picture(r) for r in refs], "choices": choices}


class SimilarityWorkspace(Workspace):
    name = "similarity"
    title = "Similarity"
    needs = ("judgments",)

    def __init__(self, pool, parent: QWidget | None = None):
        super().__init__(pool, parent)
        self.caption = QLabel()
        self.caption.setWordWrap(True)
        self.grid = TrialGrid(CELL)
        scroll = QScrollArea()  # the grid keeps its cell size; small windows scroll
        scroll.setWidget(self.grid)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        layout = QVBoxLayout(self)
        layout.addWidget(self.caption)
        layout.addWidget(scroll, 1)
        self.trial = 0

    def export_targets(self) -> list[ExportTarget]:
        return [ExportTarget("Similarity", self), ExportTarget("Trial", self.grid)]

    def refresh(self) -> None:
        self.trial = 0
        self.show_trial(0)

    def step(self, offset: int) -> None:
        if self.state is not None and self.state.judgments is not None:
            n = len(self.state.judgments.trials)
            self.show_trial(min(max(self.trial + offset, 0), n - 1))

    def show_trial(self, t: int) -> None:
        loaded = self.state.get("judgments")
        judgments = loaded.value
        if len(judgments.trials) == 0:
            self.caption.setText(f"{loaded.label}: no trials")
            self.mark_initial_work_done()
            return
        self.trial = t

        def show(result: dict) -> None:
            self.grid.set_trial(result["query"], result["references"], result["choices"])
            notes = "; ".join(("SIMULATED judgments, not human data",) * judgments.simulated + judgments.notes)
            self.caption.setText(f"{loaded.label}: trial {t + 1} of {len(judgments.trials)}, "
                                 f"{len(result['references'])} references, {len(result['choices'])} ranked picks"
                                 + (f"  ({notes})" if notes else ""))
            self.mark_initial_work_done()

        self.pool.submit(lambda ctx: trial_images(judgments, t, ctx), name=f"trial {t + 1}", key=self.task_key(),
                         executor=IO, on_result=show)
