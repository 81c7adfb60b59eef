"""What the Gallery shows of its scores besides the numbers: the grid in the chosen order with its badges and
caption, the contact sheet, the selected image's detail and its large view. Drawn from the scores the workspace
holds now (the opened samples' or a worked example's), handed in as `current()`."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
from PySide6.QtGui import QImage
from PySide6.QtWidgets import QLabel

from probescope.app.gallery.controls import GalleryControls
from probescope.app.gallery.images import SampleImages
from probescope.app.gallery.panels import DetailPanel, class_name
from probescope.jobs.scoring.samples import SORT_KEYS, GalleryScores
from probescope.widgets.gallery.grid import ContactSheet, GalleryGrid
from probescope.widgets.image_detail import ImageDetail

Current = Callable[[], tuple[GalleryScores, Sequence[str] | None]]  # () -> (scores shown, their class names)


class SampleViews:
    """The grid, the sheet, the detail panel and the large view of the current scores."""

    def __init__(self, current: Current, controls: GalleryControls, images: SampleImages, grid: GalleryGrid,
                 sheet: ContactSheet, caption: QLabel, detail: DetailPanel, large: ImageDetail):
        self.current, self.controls, self.images = current, controls, images
        self.grid, self.sheet, self.caption, self.detail, self.large = grid, sheet, caption, detail, large
        grid.current_image_changed.connect(self.show_detail)
        for signal in (grid.doubleClicked, grid.activated):
            signal.connect(lambda index: self.open_image(grid.thumbnails.image_index(index.row())))
        grid.thumbnails_wanted.connect(self.load_thumbnails)
        self._caption_tail = ""  # the caption after its count: the order and what the bars and badges show

    def names(self) -> list[str]:
        scores, class_names = self.current()
        return [class_name(class_names, k) for k in range(scores.n_classes or 0)]

    def order_changed(self) -> None:
        """The grid in the controls' order and filters, its badges and caption; the sheet's rows."""
        scores, _ = self.current()
        settings = self.controls.view_settings()
        order = scores.order(**settings) if scores.n else []
        badge, badge_label = scores.badges(settings["key"], settings["value_filter"])
        self.grid.thumbnails.set_items(order, scores.top_classes, scores.top_probs, self.names(), badge, badge_label)
        self.sheet.set_rows(min(self.controls.sheet_count.value(), len(order)))
        badge_text = {"KL": "KL against the current marginal (nats)", "R": "realism"}.get(badge_label, "confidence")
        self._caption_tail = (f", {SORT_KEYS[self.controls.sort.currentData()]} order — bars: top classes; badge: "
                              f"{badge_text}")
        self.show_count()

    def show_count(self) -> None:
        """The caption: how many of the images scored the grid lists. Redrawn with the live numbers, while the grid
        itself is redrawn once a second (issue 45: mid-stream it said '1,164 of 1,164 images' beside N = 1,196)."""
        scores, _ = self.current()
        shown = f"{self.grid.thumbnails.rowCount():,} of {scores.n:,} images" if scores.n else "no images"
        text = f"<b>{shown}</b>{self._caption_tail}"
        if text != self.caption.text():
            self.caption.setText(text)

    def redraw(self) -> None:
        """The grid, and the selected image's numbers (the first image when none is)."""
        self.order_changed()
        current = self.grid.current_image()
        if current < 0 and self.current()[0].n:
            self.grid.select_image(0)
        elif current >= 0:
            self.show_numbers(current)

    def load_thumbnails(self, wanted: list[int]) -> None:
        model = self.grid.thumbnails
        rows = self.sheet.rows()
        wanted = wanted + [model.image_index(r) for r in range(rows) if model.pixmap(model.image_index(r)) is None]

        def show(images: dict[int, QImage]) -> None:
            model.add_thumbnails(images)
            self.grid.viewport().update()
            self.sheet.update()

        self.images.load_thumbnails(wanted, show)

    def show_detail(self, i: int) -> None:
        self.show_numbers(i)
        if not self.images.load_image(i, self.detail.set_image):
            self.detail.set_image(self.grid.thumbnails.kept_thumbnail(i))

    def show_numbers(self, i: int) -> None:
        scores, class_names = self.current()
        if 0 <= i < scores.n:
            self.detail.show_sample(i, scores.probabilities(i), float(scores.entropy[i]), scores.kl_of(i),
                                    scores.n, scores.live.mutual_information, class_names)

    def open_image(self, i: int) -> None:
        """The large view of image i (double-click or Enter), with its top classes."""
        scores, class_names = self.current()
        if not 0 <= i < scores.n:
            return
        p = scores.probabilities(i)
        classes = [f"{class_name(class_names, int(k))}: {p[k]:.3f}" for k in np.argsort(-p)[:10]]
        notes = scores.notes(i)

        def show(image) -> None:
            self.large.show_image(image, f"Sample #{i}", notes, classes, "Top classes p(y|x)")

        if not self.images.load_image(i, show, "large"):
            show(self.grid.thumbnails.kept_thumbnail(i))
