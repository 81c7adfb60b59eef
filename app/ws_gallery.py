"""Gallery workspace (first version): the generator's first samples, each captioned with the model's top class and
its probability. Scoring (Inception Score, class histograms) replaces this in the Gallery issue.
"""

from __future__ import annotations

from collections.abc import Iterator

from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget

from probescope.app.export import ExportTarget
from probescope.app.workers import COMPUTE, Partial, Progress, TaskContext
from probescope.app.ws_base import Workspace
from probescope.widgets.images import to_qimage
from probescope.widgets.thumbnail_grid import Thumbnail, ThumbnailGrid

N_PREVIEW = 48
BATCH = 16


def classified_thumbnails(source, model, n: int, ctx: TaskContext) -> Iterator[Partial | Progress]:
    """The first `n` samples with the model's top class, one batch at a time (runs in the compute thread)."""
    import torch

    model.module.eval()
    names = model.class_names
    seen = 0
    for batch in source.batches(BATCH):
        ctx.check()
        batch = batch[: n - seen]
        x = model.preprocess(batch, device=model.device)
        probs = torch.softmax(model.module(x).float(), dim=1).cpu().numpy()
        items = []
        for image, p in zip(batch, probs):
            top = int(p.argmax())
            label = names[top] if names and top < len(names) else f"class {top}"
            items.append(Thumbnail(to_qimage(image), f"{label}\n{p[top]:.2f}", f"sample {seen}: {label} "
                                   f"(p = {p[top]:.3f})"))
            seen += 1
        yield Partial(items)
        yield Progress(seen / n, f"classifying sample {seen} of {n}")
        if seen >= n:
            break


class GalleryWorkspace(Workspace):
    name = "gallery"
    title = "Gallery"
    needs = ("model", "samples")

    def __init__(self, pool, parent: QWidget | None = None):
        super().__init__(pool, parent)
        self.caption = QLabel()
        self.grid = ThumbnailGrid(128)
        layout = QVBoxLayout(self)
        layout.addWidget(self.caption)
        layout.addWidget(self.grid)

    def export_targets(self) -> list[ExportTarget]:
        return [ExportTarget("Gallery", self), ExportTarget("Samples", self.grid)]

    def step(self, offset: int) -> None:
        self.grid.step(offset)

    def refresh(self) -> None:
        model, samples = self.state.get("model"), self.state.get("samples")
        n = N_PREVIEW if samples.value.length is None else min(N_PREVIEW, samples.value.length)
        first = [True]

        def show(items: list[Thumbnail]) -> None:
            if first[0]:  # the previous samples stay until the new ones arrive
                first[0] = False
                self.grid.thumbnails.set_items([])
                self.caption.setText(f"{samples.label}: the first {n} samples with {model.label}'s top class")
            self.grid.thumbnails.append_items(items)

        self.pool.submit(lambda ctx: classified_thumbnails(samples.value, model.value, n, ctx),
                         name="classify samples", key=self.task_key(), executor=COMPUTE, on_partial=show,
                         on_result=lambda _r: self.mark_initial_work_done())
