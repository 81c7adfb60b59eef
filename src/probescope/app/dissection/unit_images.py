"""The selected unit's images with their overlays, in the Dissection workspace's grid.

Overlays are built in the I/O pool and kept per (result, unit, formula, display settings, mode, count) in a small
LRU, so going back to a unit is instant; once the current unit's overlays are painted, its neighbours in the table
are built ahead (arrow keys then show them at once). A newer request replaces the one on its way (the pool's
latest-request-wins), so the grid never shows another unit's images.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from PySide6.QtCore import QObject, QTimer, Signal

from probescope.app.compute.workers import WorkerPool
from probescope.app.dissection.overlays import ImageOverlay, image_labels, image_overlay, overlay_task, present_images
from probescope.app.dissection.panels import UnitControls
from probescope.core.dissection.formula import Formula
from probescope.jobs.dissection.layer_data import LayerData
from probescope.jobs.dissection.rows import explanation_of
from probescope.jobs.protocol import IO, Partial
from probescope.widgets.image_detail import ImageDetail
from probescope.widgets.images import to_qimage
from probescope.widgets.thumbnail_grid import ThumbnailGrid

OVERLAY_CACHE = 96  # units x views whose overlays stay in memory
PREFETCH_DELAY_MS = 150


class UnitImages(QObject):
    """`shown()` when the overlays asked for last are all on screen; `caption` then says what the grid shows."""

    shown = Signal()

    def __init__(self, pool: WorkerPool, key: Callable[[str], str], grid: ThumbnailGrid, controls: UnitControls,
                 neighbours: Callable[[int], list[int]], parent: QObject | None = None):
        super().__init__(parent)
        self.pool, self._key, self.grid, self.controls, self._neighbours = pool, key, grid, controls, neighbours
        self.overlays: list[ImageOverlay] = []
        self.ready = False  # the overlays asked for last are all on screen
        self.caption = ""
        self.data: LayerData | None = None
        self.unit = -1
        self._cache: OrderedDict[tuple, list[ImageOverlay]] = OrderedDict()
        self._on_the_way: tuple | None = None  # (key, handle) of the overlays being built
        self.prefetch_timer = QTimer(self)
        self.prefetch_timer.setSingleShot(True)
        self.prefetch_timer.setInterval(PREFETCH_DELAY_MS)
        self.prefetch_timer.timeout.connect(self._prefetch)

    def forget(self) -> None:
        """Other inputs: nothing kept belongs to them."""
        self._cache.clear()

    def show(self, d: LayerData, unit: int, formula: Formula | None, label: str) -> None:
        """The overlays of `unit` with `formula` (labelled `label`), from the cache or built in the I/O pool."""
        if unit not in d.result.units:
            return
        self.data, self.unit = d, unit
        c = self.controls
        options, present, k = c.options(), c.present(), c.k.value()
        key = (d.key, unit, formula, options, present, k)
        what = f"“{label}”" if formula is not None else "no explanation"
        if self._on_the_way is not None and self._on_the_way[0] == key and not self._on_the_way[1].cancelled \
                and not self._on_the_way[1].done:
            return  # on its way (a cancelled one is not: its result will be dropped, so it is asked for again)
        cached = self._cache.get(key)
        # (a result shown again, from the disk cache or a kept run, may be a LayerData without the unit's histogram:
        # then the task below computes it with the overlays; from the cache the chart stayed empty)
        if cached is not None and unit in d.histograms:
            self._cache.move_to_end(key)
            self.pool.cancel(self._key("overlays"), superseded=True)
            self._set(cached, what, present)
            return
        r = d.result.units[unit]
        scale = float(d.peaks[:, unit].max())
        collected: list[ImageOverlay] = []
        self.grid.thumbnails.set_items([])
        self.overlays = []
        self.ready = False

        def task(ctx):
            total = None
            d.histogram(unit)  # the view draws it once the overlays are shown
            if present and formula is not None:
                images, total = present_images(d.store, formula, d.peaks, unit, k)
            else:
                images = d.top_images(unit, k)
            yield from overlay_task(d.dataset, d.store, d.activations, unit, r.threshold, scale,
                                    [int(i) for i in images], formula, options, present and formula is not None, ctx)
            return total

        def partial(items: list[ImageOverlay]) -> None:
            collected.extend(items)
            self.overlays = list(collected)
            self.grid.thumbnails.append_items([i.thumbnail for i in items])

        def finished(total: int | None) -> None:
            self._remember(key, collected)
            self._set(collected, what, present, total)

        handle = self.pool.submit(task, name=f"overlays of unit {unit}", key=self._key("overlays"), executor=IO,
                                  on_partial=partial, on_result=finished)
        self._on_the_way = (key, handle)

    def _set(self, items: list[ImageOverlay], what: str, present: bool, total: int | None = None) -> None:
        self.ready = True
        if self.overlays is not items:
            self.overlays = list(items)
            self.grid.thumbnails.set_items([i.thumbnail for i in items])
        if present:
            fired = sum(i.fired and i.overlap_pixels > 0 for i in items)
            extra = f" of {total}" if total is not None else ""
            self.caption = (f"{len(items)}{extra} images where {what} is present; the unit detects it (mask meets "
                            f"concept) on {fired} of those shown")
        else:
            self.caption = f"top {len(items)} images of unit {self.unit}, overlay {what}"
        self.shown.emit()
        self.prefetch_timer.start()

    def _remember(self, key: tuple, items: list[ImageOverlay]) -> None:
        self._cache[key] = list(items)
        self._cache.move_to_end(key)
        while len(self._cache) > OVERLAY_CACHE:
            self._cache.popitem(last=False)

    def _prefetch(self) -> None:
        """Overlays of the units next to the current one in the table (top images, the same explanation method and
        display settings), so arrow keys show them at once."""
        d, method = self.data, self.controls.method()
        if d is None or self.controls.present() or self.pool.is_shut_down:
            return
        options, k = self.controls.options(), self.controls.k.value()
        wanted = []
        for u in self._neighbours(self.unit):
            r = d.result.units.get(u)
            if r is None:
                continue
            e = explanation_of(r, method)
            formula = e.formula if e else None
            key = (d.key, u, formula, options, False, k)
            if key not in self._cache:
                wanted.append((key, u, r.threshold, formula))
        if not wanted:
            return

        def task(ctx):
            out = []
            for key, u, threshold, formula in wanted:
                d.histogram(u)
                items: list[ImageOverlay] = []
                for part in overlay_task(d.dataset, d.store, d.activations, u, threshold, float(d.peaks[:, u].max()),
                                         [int(i) for i in d.top_images(u, k)], formula, options, False, ctx):
                    if isinstance(part, Partial):
                        items.extend(part.value)
                out.append((key, items))
            return out

        def store(done: list) -> None:
            for key, items in done:
                self._remember(key, items)

        self.pool.submit(task, name="overlays of the neighbouring units", key=self._key("prefetch"),
                         executor=IO, on_result=store)

    def open_large(self, row: int, formula: Formula | None, label: str, detail: ImageDetail) -> None:
        """The large view of the grid's image `row` in `detail`, with the same overlays (`formula`, labelled
        `label`) and the image's labels, built in the I/O pool."""
        d, unit = self.data, self.unit
        if d is None or not 0 <= row < len(self.overlays):
            return
        item = self.overlays[row]
        threshold = d.result.units[unit].threshold
        options = self.controls.options()
        scale = float(d.peaks[:, unit].max())
        label = label or "explanation"

        def task(ctx):
            ctx.check()
            overlay, rgb = image_overlay(d.dataset, d.store, d.activations, unit, threshold, scale, item.image,
                                         formula, options)
            return to_qimage(rgb), image_labels(d.dataset, item.image), overlay

        def show(result) -> None:
            image, labels, overlay = result
            notes = (f"unit {unit} · image {item.image} ({d.dataset.image_path(item.image).name})<br>"
                     f"peak activation {overlay.peak:.3f}; unit mask {overlay.unit_pixels} px; "
                     f"{label}: {overlay.concept_pixels} px, {overlay.overlap:.0%} inside the unit mask")
            detail.show_image(image, f"Unit {unit}, image {item.image}", notes, labels)

        self.pool.submit(task, name="large image", key=self._key("detail"), executor=IO, on_result=show)
