"""What is on screen belongs to what the state says (issue 45, item 2): one check for every workspace test.

`stale_texts(target)` reads every text of a workspace (or of each workspace of a main window, and its source bar)
that states a model, layer, unit, N or a status, and compares it with the workspace's evented state model
(`DissectionState`, `GalleryState`, `SimilarityState`, the window's `AppState`) and, for a status, with what runs in
the worker pool. It returns each disagreement in words, and nothing when the screen and the state agree. A unit
highlighted in the table whose result the state holds must have its images, trace and numbers on screen.

Call it once the step's work has landed (the pool idle, or the stream's batches drawn): it reads, it never waits.
"""

from __future__ import annotations

import html
import re
from collections.abc import Callable

from PySide6.QtWidgets import QWidget

from probescope.jobs.dissection import rows as r


def plain(text: str) -> str:
    """A label's text as read: tags dropped, entities decoded, spaces collapsed."""
    return " ".join(html.unescape(re.sub(r"<br\s*/?>", " ", re.sub(r"<(?!br)[^>]*>", "", text))).split())


def runs(pool, key: str) -> bool:
    """A task of `key` is running and not cancelled (a cancelled one is only left to stop at its next step)."""
    return any(h.key == key and not h.cancelled for h in pool.active())


def _number(text: str) -> int:
    return int(text.replace(",", ""))


# -- Dissection ---------------------------------------------------------------------------------------------------
def dissection_texts(ws) -> list[str]:
    """The header, the table, the selected unit's views and the panels that name a unit or layer."""
    state, app, found = ws.current, ws.state, []
    d, unit = state.data, state.unit
    running = runs(ws.pool, ws.task_key("layer"))
    header = plain(ws.header.text())
    layer = d.layer if d is not None else app.layer if app is not None else None
    named = re.match(r"Units of (\S+?)(?::|\s|$)", header)
    if layer is not None and (named is None or named[1] != layer):
        found.append(f"dissection header {header!r} is not of layer {layer}")
    if d is not None and not d.origin and app is not None and d.layer != app.layer:
        found.append(f"the result on screen is of {d.layer}, the source bar's layer is {app.layer}")
    computing = "computing…" in header or "so far)" in header
    if computing and not running:
        found.append(f"dissection header {header!r} says it computes; no dissection runs")
    if running and d is None and not computing:
        found.append(f"a dissection runs and nothing is on screen, the header says {header!r}")
    if d is None and "computing…" in header and app is not None and f" of {app.get('model').label} " not in header:
        found.append(f"dissection header {header!r} does not name the model {app.get('model').label}")
    if d is not None and not d.result.complete and not running and "so far)" in header:
        found.append(f"dissection header {header!r}: the run ended, the header says it goes on")
    status = plain(ws.runs.status.text())
    if status.startswith("dissecting") != running:
        found.append(f"Settings panel says {status!r} while a dissection {'runs' if running else 'does not run'}")
    # the table: the state's rows, the state's unit highlighted
    if set(ws.units.units()) != set(state.rows):
        found.append(f"the unit table lists {len(ws.units.units())} units, the state {len(state.rows)}")
    shown = ws.units.visible_units()
    highlighted = sorted({shown[i.row()] for i in ws.units.selectionModel().selectedRows() if i.row() < len(shown)})
    if highlighted and unit not in highlighted:
        found.append(f"the table highlights unit(s) {highlighted}, the unit on screen is {unit}")
    if unit >= 0 and unit in shown and unit not in highlighted:
        found.append(f"unit {unit} is on screen but not highlighted in the table")
    found += _unit_views(ws, d, unit)
    found += _unit_panels(ws, d, unit)
    return found


def _unit_views(ws, d, unit: int) -> list[str]:
    """The selected unit's title, images, trace, numbers and histogram: its own, never empty; all empty without one."""
    found = []
    title = plain(ws.view.title.text())
    leaves = [cells[0] for _s, _p, cells in ws.trace.leaves()]
    bars = ws.charts.iou_bars.values.tolist()
    images = ws.view.images.thumbnails.rowCount()
    histogram = ws.charts.histogram
    if d is None or unit not in d.result.units:
        for name, value in (("unit title", title), ("beam trace", leaves), ("IoU bars", bars),
                            ("unit images", images), ("unit card", ws.card.title)):
            if value:
                found.append(f"no unit on screen, the {name} still shows {str(value)[:60]!r}")
        if histogram.threshold is not None:
            found.append(f"no unit on screen, the histogram shows threshold {histogram.threshold:.3g}")
        return found
    u = d.result.units[unit]
    if not title.startswith(f"Unit {unit}: threshold {u.threshold:.3g}"):
        found.append(f"unit title {title[:60]!r} is not unit {unit} of {d.layer} (threshold {u.threshold:.3g})")
    want = [e.label for beam in u.trace for e in beam]
    if not leaves or leaves != want:
        found.append(f"beam trace shows {len(leaves)} formulas, unit {unit} of {d.layer} has {len(want)}"
                     + (" (others)" if len(leaves) == len(want) else ""))
    want_bars = [e.iou for m in r.METHODS if (e := r.explanation_of(u, m)) is not None]
    if bars != want_bars:
        found.append(f"IoU bars {bars} are not unit {unit}'s {want_bars}")
    if histogram.threshold != u.threshold:
        found.append(f"histogram threshold {histogram.threshold} is not unit {unit}'s {u.threshold}")
    elif unit in d.histograms and histogram.counts.tolist() != list(d.histograms[unit][1]):
        found.append(f"histogram counts are not unit {unit}'s")
    view = histogram.plot.getPlotItem().vb
    (x0, x1), _ = view.viewRange()
    if not any(view.autoRangeEnabled()) and not x0 <= u.threshold <= x1:
        found.append(f"histogram x axis {x0:.3g}…{x1:.3g} leaves out unit {unit}'s threshold {u.threshold:.3g}")
    grid = ws.unit_images
    if not grid.ready:
        found.append(f"unit {unit}'s images are still on their way")
    elif images == 0 or grid.unit != unit or grid.data is None or grid.data.layer != d.layer:
        found.append(f"the image grid holds {images} images of unit {grid.unit} of "
                     f"{grid.data.layer if grid.data else None}, not unit {unit} of {d.layer}")
    caption = plain(ws.view.caption.text())
    said = re.search(r"images of unit (\d+)", caption)
    if said is not None and int(said[1]) != unit:
        found.append(f"image caption {caption[:50]!r} names unit {said[1]}, not {unit}")
    return found


def _unit_panels(ws, d, unit: int) -> list[str]:
    """The Drawing, Role, Image and Unit card panels: a unit or layer they name is the one on screen."""
    found = []
    layer = d.layer if d is not None else None
    drawing = plain(ws.drawing.title.text())
    said = re.match(r"What (.+) would draw at (\S+)", drawing)
    if said is not None:
        if said[2] != layer:
            found.append(f"Drawing tab says {drawing!r}, the layer on screen is {layer}")
        if ws.drawing.mode.currentData() == "unit" and said[1] != f"unit {unit}":
            found.append(f"Drawing tab says {drawing!r}, the unit on screen is {unit}")
    elif unit >= 0 and d is not None and ws.drawing.model is not None and drawing != "What the unit would draw":
        found.append(f"Drawing tab says {drawing!r} for unit {unit}")
    role = plain(ws.role.title.text())
    for pattern in (r"Role of unit (\d+)",):
        said = re.match(pattern, role)
        if said is not None and int(said[1]) != unit:
            found.append(f"Role tab says {role[:50]!r}, the unit on screen is {unit}")
    said = re.match(r"(?:Ablating the \d+ units of (\S+?)…|(\S+): Δ accuracy)", role)
    if said is not None and (said[1] or said[2]) != layer:
        found.append(f"Role tab says {role[:50]!r}, the layer on screen is {layer}")
    said = re.search(r"through (\S+?):", plain(ws.image_view.title.text()))
    if said is not None and said[1] != layer:
        found.append(f"Image tab is of {said[1]}, the layer on screen is {layer}")
    card = ws.card.title
    if card and (d is None or card != f"Unit {unit} · {d.layer}"):
        found.append(f"unit card {card!r} is not unit {unit} of {layer}")
    return found


# -- Gallery ------------------------------------------------------------------------------------------------------
def gallery_texts(ws) -> list[str]:
    """N, the run, the button, the classifier and 'streaming' said by the score panel, the grid and the controls."""
    from probescope.core.demo.sampler import DemoSampler

    g, found = ws.gallery, []
    n, streaming, c = g.scores.n, g.streaming, ws.controls
    if streaming != runs(ws.pool, ws.task_key("stream")):
        found.append(f"the gallery's state says streaming={streaming}, the pool "
                     f"{'does not run' if streaming else 'runs'} a stream")
    source = ws.samples_source
    demo = isinstance(source, DemoSampler)
    target = c.target.value()
    length = target if demo else getattr(source, "length", None)
    if c.play.text() != g.play_label(length) or c.play.isChecked() != streaming:
        found.append(f"the play button says {c.play.text()!r} (checked {c.play.isChecked()}), the state "
                     f"{g.play_label(length)!r} with {n} of {length} scored")
    said = plain(ws.score_panel.n_label.text())
    want = f"N = {n:,} —" if n else "no images scored yet"
    if not said.startswith(want) or ("streaming…" in said) != streaming:
        found.append(f"score header {said[:60]!r}: the state has N = {n:,}, streaming={streaming}")
    if n and plain(ws.score_panel.is_label.text()) != f"IS {g.scores.live.is_:.2f}":
        found.append(f"score {ws.score_panel.is_label.text()!r} is not the live IS {g.scores.live.is_:.2f}")
    split = plain(ws.score_panel.split_label.text())
    said = re.search(r"\(N = ([\d,]+)\)|the first N=([\d,]+) of ([\d,]+) in|N=([\d,]+) in", split)
    of = None if said is None else _number(said[1] or said[3] or said[4])
    if (said is None and n) or (of is not None and of != n):
        found.append(f"split protocol {split[:70]!r}: the state has N = {n:,}")
    elif said is not None and said[2] and not (streaming or runs(ws.pool, ws.task_key("scores:split"))):
        found.append(f"split protocol {split[:70]!r} is of the first images; no split is computed for N = {n:,}")
    caption = plain(ws.caption.text())
    said = re.match(r"([\d,]+) of ([\d,]+) images", caption)
    shown = ws.grid.thumbnails.rowCount()
    if (said is None and n) or (said is not None and (_number(said[2]) != n or _number(said[1]) != shown)):
        found.append(f"grid caption {caption[:40]!r}: the grid holds {shown}, the state has N = {n:,}")
    if g.shows_samples:
        run = plain(ws.score_panel.run_label.text())
        if g.run is not None:
            want = (f"This run: demo sampler, diversity {g.run.diversity}, fidelity {g.run.fidelity:.2f}, "
                    f"N {target:,}")
            if run != want:
                found.append(f"score panel says {run!r}, the run is {want!r}")
            if streaming and g.run.n != target:
                found.append(f"the stream runs to N = {g.run.n:,}, N says {target:,}")
        classifier = plain(ws.score_panel.classifier_label.text())
        if g.classifier is not None and not classifier.startswith(f"Classifier: {g.classifier.name} "):
            found.append(f"score panel says {classifier[:50]!r}, the classifier is {g.classifier.name}")
    if ws.detail.shown >= n:
        found.append(f"the detail panel shows sample #{ws.detail.shown}, {n} are scored")
    return found


# -- Similarity ---------------------------------------------------------------------------------------------------
def similarity_texts(ws) -> list[str]:
    """The header, the embedding's status and fit, the model table and chooser, the trial and the list's count."""
    shown, found = ws.shown, []
    if shown.loaded is None:
        return found
    _simulated, header = shown.header()
    if not plain(ws.header.text()).endswith(plain(header)):
        found.append(f"similarity header {plain(ws.header.text())[:60]!r} is not of {shown.loaded.label}")
    panel = ws.embedding
    refitting = runs(ws.pool, ws._key("refit"))
    info = plain(panel.info.text())
    if info.startswith("Refitting") != refitting:
        found.append(f"embedding panel says {info[:50]!r} while a refit {'runs' if refitting else 'does not run'}")
    if panel.refit_button.isEnabled() == refitting or panel.cancel_button.isEnabled() != refitting:
        found.append(f"Refit is {'enabled' if panel.refit_button.isEnabled() else 'disabled'} and Cancel "
                     f"{'enabled' if panel.cancel_button.isEnabled() else 'disabled'} while a refit "
                     f"{'runs' if refitting else 'does not run'}")
    if info.startswith("Fitting a quick") and not runs(ws.pool, ws._key("embedding")) and shown.ensemble is not None:
        found.append("embedding panel says a quick fit runs; the embedding is fitted")
    if shown.ensemble is not None and not refitting:
        said = re.findall(r"(\d+)-D", info)
        if not said or int(said[-1 if info.startswith("Refit cancelled") else 0]) != shown.ensemble.dims:
            found.append(f"embedding panel says {info[:70]!r}, the embedding is {shown.ensemble.dims}-D")
        if f"fitted on {shown.history[-1].n_trials} trials" not in info:
            found.append(f"embedding panel says {info[:70]!r}, the last fit is on {shown.history[-1].n_trials} trials")
    found += _embedding_axes(panel.view)
    names = [s.name for s in shown.scores]
    listed = [row.name for row in ws.models.table.rows]
    if listed != names:
        found.append(f"model table lists {listed}, the state scores {names}")
    for row, s in zip(ws.models.table.rows, shown.scores, strict=False):
        if (row.l1, row.l2, row.cosine) != (s.accuracy["l1"], s.accuracy["l2"], s.accuracy["cosine"]):
            found.append(f"model table row {row.name!r} shows other accuracies than its scores")
    chooser = [ws.view.model.itemText(k) for k in range(ws.view.model.count())]
    if chooser != names:
        found.append(f"the model view offers {chooser}, the state scores {names}")
    summary = plain(ws.view.summary.text())
    if summary and not summary.startswith(f"{ws.view.model.currentText()} ("):
        found.append(f"the trial's model view {summary[:50]!r} is not of {ws.view.model.currentText()!r}")
    caption = plain(ws.view.caption.text())
    said = re.search(r"trial (\d+) of (\d+)", caption)
    if shown.trial >= 0 and shown.trial_shown and (said is None or int(said[1]) != shown.trial + 1):
        found.append(f"trial caption {caption[:50]!r} is not trial {shown.trial + 1}")
    if shown.trialset is not None:
        count = plain(ws.trials.count.text())
        said = re.match(r"(\d+) of (\d+) trials listed", count)
        listed_rows = len(ws.trials.trial_list.list_model.rows)
        if said is None or int(said[2]) != len(shown.trialset.trials) or int(said[1]) != listed_rows:
            found.append(f"trial list says {count!r}; it lists {listed_rows} of {len(shown.trialset.trials)}")
    return found


def _embedding_axes(view) -> list[str]:
    """The embedding's axes are its points' (a refit stretched them to −2…2 as it started), unless they follow
    the points by themselves (auto range)."""
    import numpy as np

    xy = view._xy
    box = view.plot.getPlotItem().vb
    if len(xy) == 0 or all(box.autoRangeEnabled()):
        return []
    found = []
    for axis, (low, high) in enumerate(box.viewRange()):
        lo, hi = float(xy[:, axis].min()), float(xy[:, axis].max())
        span = max(hi - lo, 1e-9)
        if low > lo or high < hi or (high - low) > 4 * span:
            found.append(f"embedding's {'xy'[axis]} axis {low:.3g}…{high:.3g}, its points {lo:.3g}…{hi:.3g}")
    return found if np.isfinite(xy).all() else []


# -- the window ---------------------------------------------------------------------------------------------------
def source_bar_texts(window) -> list[str]:
    """Each input's button names what is loaded (or that it loads); the layer box the state's layer."""
    from probescope.app.window.source_bar import TITLES

    bar, state, found = window.source_bar, window.state, []
    for kind, button in bar.buttons.items():
        loaded = state.get(kind)
        want = f"{TITLES[kind]}: {loaded.label if loaded is not None else 'none'}"
        if button.text() != want and not (button.text().endswith("(loading…)") and runs(window.pool, f"open:{kind}")):
            found.append(f"source bar says {button.text()!r}, the state holds {want!r}")
    if (state.layer or "") != bar.layer.currentText():
        found.append(f"source bar's layer is {bar.layer.currentText()!r}, the state's {state.layer!r}")
    gallery = window.workspaces.get("gallery")
    samples = bar.buttons["samples"].text()
    said = re.search(r"\(([\d,]+) images\)", samples)
    if gallery is not None and said is not None and gallery.gallery.run is not None \
            and _number(said[1]) != gallery.controls.target.value():
        found.append(f"source bar says {samples!r}, the Gallery's N is {gallery.controls.target.value():,}")
    return found


CHECKS: dict[str, Callable[[QWidget], list[str]]] = {
    "dissection": dissection_texts, "gallery": gallery_texts, "similarity": similarity_texts}


def stale_texts(target: QWidget, only: tuple[str, ...] | None = None) -> list[str]:
    """Every disagreement between what `target` (a main window, or one workspace) says and its state; `only`: the
    window's workspaces to read (default all)."""
    workspaces = getattr(target, "workspaces", None)
    if workspaces is None:
        return [f"{target.name}: {text}" for text in CHECKS[target.name](target)]
    found = [f"window: {text}" for text in source_bar_texts(target)]
    for name, ws in workspaces.items():
        if only is None or name in only:
            found += [f"{name}: {text}" for text in CHECKS[name](ws)]
    return found
