"""Each sample against the real images in the Gallery window: the realism and nearest reference images shown are the
core function's on the very features streamed, the grid sorts by realism and filters possible copies, the copy test
says why it is not run on a small reference alone and, calibrated on the held-out images chosen, flags a sample that
is exactly a reference image as the core copy test does; the Real data panel's C_T is the data-copying test's on the
same features (and says plainly that it needs held-out images before they are chosen)."""

from __future__ import annotations

import pickle
import time

import numpy as np
import pytest
from windows import loaded_model

from probescope.app.gallery.workspace import GalleryWorkspace
from probescope.core.demo import world
from probescope.core.demo.sampler import DemoSampler
from probescope.core.scoring.classifiers import classifier_of_model
from probescope.core.scoring.copy_test import calibrate, min_held_out
from probescope.core.scoring.copying import data_copying
from probescope.core.scoring.realism import sample_neighbours
from probescope.core.scoring.settings import WINDOW
from probescope.core.scoring.sources import ArraySource
from probescope.jobs.inputs import Loaded
from probescope.jobs.protocol import Job, TaskContext
from probescope.jobs.scoring.neighbours import copying_cells, neighbours_job

WAIT_MS = 60_000
N = 40
COPY_OF, PLANTED_AT = 5, 7  # sample 7 is reference image 5, pixel for pixel


def embedded(model, images: list[np.ndarray]) -> np.ndarray:
    """Features of `images` in the stream's batches (bit-identical to the streamed ones)."""
    classifier = classifier_of_model(model)
    return np.concatenate([classifier.embed(classifier.prepare(images[a : a + WINDOW.batch_size]))[0]
                           for a in range(0, len(images), WINDOW.batch_size)])


def test_realism_neighbours_sort_and_a_planted_copy_in_the_window(qtbot, make_workspace, demo_model, real_dataset,
                                                                   tmp_path):
    sampler = DemoSampler(N)
    images = [sampler.sample(k)[0] for k in range(N)]
    images[PLANTED_AT] = real_dataset.load_image(COPY_OF)
    ws, pool, state = make_workspace(GalleryWorkspace, (1500, 950))
    state.set(Loaded("dataset", "real", "real", real_dataset))
    state.set(loaded_model(pool, demo_model))
    assert ws.realism.copying.statistic.text() == ""
    state.set(Loaded("samples", "planted", "planted", ArraySource(np.stack(images), "planted")))
    qtbot.waitUntil(lambda: ws.scores.n == N and not ws.streaming and ws.gallery.realism.done == N, timeout=WAIT_MS)

    features = embedded(demo_model, images)
    real = embedded(demo_model, [real_dataset.load_image(j) for j in range(real_dataset.n_images)])
    np.testing.assert_array_equal(ws.real.live.features, features)
    expected = sample_neighbours(features, real, 3)
    shown = ws.gallery.realism.result
    np.testing.assert_allclose(shown.realism, expected.realism, rtol=1e-9)
    np.testing.assert_array_equal(shown.nearest, expected.nearest)
    np.testing.assert_allclose(shown.distances, expected.distances, rtol=1e-9)
    assert shown.nearest[PLANTED_AT, 0] == COPY_OF
    # 30 reference images: too few to set the 99 held-out images aside that alpha 0.01 needs: no copy test, and
    # the window says why instead of claiming that nothing is copied
    needed = min_held_out(WINDOW.copy_alpha)
    assert shown.copy is None and not shown.possible_copy.any() and needed == 99
    copies = ws.realism.copying.copies.text()
    assert "<b>No copy test</b>" in copies and "needs 99 held-out real images" in copies
    assert "choose at least 99 held-out real images" in copies and "possible copies</b>" not in copies
    panel = ws.realism.neighbours
    ws.grid.select_image(PLANTED_AT)
    qtbot.waitUntil(lambda: panel.shown == PLANTED_AT, timeout=WAIT_MS)
    assert "Copy test not run" in panel.summary.text() and not panel.copy_flag.isVisibleTo(ws)
    assert not ws.grid.thumbnails.flagged(PLANTED_AT)

    # held-out images, too few for the copy test: C_T uses them, the copy test still says why it is not run
    assert "needs held-out real images" in ws.realism.copying.statistic.text()
    few = np.stack([s.image for s in world.render_batch(3, 30)])
    np.save(tmp_path / "few.npy", few)
    ws.realism.copying.held_out_chosen.emit(str(tmp_path / "few.npy"))
    qtbot.waitUntil(lambda: ws.gallery.realism.copying_result is not None, timeout=WAIT_MS)
    qtbot.waitUntil(lambda: ws.gallery.realism.done == N, timeout=WAIT_MS)
    assert ws.gallery.realism.result.copy is None and ws.gallery.realism.calibrated_on is None
    assert "(30 images) are fewer than that" in ws.realism.copying.copies.text()
    held_features = embedded(demo_model, list(few))
    ct = data_copying(real, held_features, features, copying_cells(N, len(real)))
    assert np.isfinite(ct.statistic)
    n, _, result = ws.gallery.realism.copying_result
    assert n == N and result.statistic == pytest.approx(ct.statistic, rel=1e-6)
    assert f"C_T = {ct.statistic:.2f}" in ws.realism.copying.statistic.text()
    assert "C_T is about N(0, 1)" in ws.realism.copying.reading.text()

    # 120 held-out renders: the copy test is calibrated on them, the numbers computed anew; the planted copy is
    # flagged with the smallest p-value, as the core copy test says
    held_images = np.stack([s.image for s in world.render_batch(4, 120)])
    held_path = tmp_path / "held.npy"
    np.save(held_path, held_images)
    ws.realism.copying.held_out_chosen.emit(str(held_path))
    qtbot.waitUntil(lambda: ws.gallery.realism.result is not None and ws.gallery.realism.result.copy is not None
                    and ws.gallery.realism.done == N, timeout=WAIT_MS)
    held = embedded(demo_model, list(held_images))
    expected = sample_neighbours(features, real, 3, calibration=calibrate(real, held, alpha=WINDOW.copy_alpha))
    shown = ws.gallery.realism.result
    assert ws.gallery.realism.calibrated_on is ws.gallery.realism.held_out_set() and "held.npy" in shown.copy.held_out
    np.testing.assert_allclose(shown.realism, expected.realism, rtol=1e-9)
    np.testing.assert_array_equal(shown.possible_copy, expected.possible_copy)
    np.testing.assert_allclose(shown.copy.p_value, expected.copy.p_value, rtol=1e-12)
    assert shown.copied[PLANTED_AT] == COPY_OF and shown.copy.p_value[PLANTED_AT] == 1 / 121
    assert expected.copies < N // 4  # the honest samples are not all flagged
    # the window's job travels by name (it can run in the compute kernel): pickled, it gives the same numbers
    job = pickle.loads(pickle.dumps(Job(neighbours_job, {"generated": features, "reference": ws.real.live.reference,
                                                         "k": 3, "held_out": ws.gallery.realism.calibrated_on},
                                        compute=False)))
    again = job(TaskContext())
    np.testing.assert_array_equal(again.nearest, shown.nearest)
    np.testing.assert_array_equal(again.copy.flagged, shown.copy.flagged)

    # the selected-sample panel: the planted copy's realism, its neighbours nearest first, the flag with its p-value
    ws.grid.select_image(0)
    ws.grid.select_image(PLANTED_AT)
    qtbot.waitUntil(lambda: panel.shown == PLANTED_AT and panel.images[0].pixmap() is not None
                    and not panel.images[0].pixmap().isNull(), timeout=WAIT_MS)
    assert panel.neighbours == expected.nearest[PLANTED_AT].tolist() and panel.neighbours[0] == COPY_OF
    assert f"R = <b>{expected.realism[PLANTED_AT]:.3g}</b>" in panel.summary.text()
    for caption, j, d in zip(panel.captions, expected.nearest[PLANTED_AT], expected.distances[PLANTED_AT],
                             strict=True):
        assert caption.text() == f"#{j}<br>d = {d:.3g}"
    flag = panel.copy_flag.text()
    assert panel.copy_flag.isVisibleTo(ws) and f"reference image #{COPY_OF}" in flag
    assert f"p = {1 / 121:.2g}" in flag and f"α = {WINDOW.copy_alpha:g} threshold {expected.copy.threshold:.3g}" in flag
    plain = int(np.flatnonzero(~expected.possible_copy)[0])
    ws.grid.select_image(plain)
    qtbot.waitUntil(lambda: panel.shown == plain, timeout=WAIT_MS)
    assert f"R = <b>{expected.realism[plain]:.3f}</b>" in panel.summary.text() and not panel.copy_flag.isVisibleTo(ws)
    assert f"Copy test: p = {expected.copy.p_value[plain]:.2g} &gt; α = {WINDOW.copy_alpha:g}" in panel.summary.text()

    # the grid: sorted by realism (largest first: the planted copy leads), badges R, copies tagged and filtered
    c = ws.controls
    assert not c.descending.isChecked()
    c.sort.setCurrentIndex(c.sort.findData("realism"))  # largest first, as the guide says, without being asked
    assert c.descending.isChecked()
    order = ws.grid.thumbnails.order
    np.testing.assert_array_equal(order, np.argsort(-expected.realism, kind="stable"))
    assert order[0] == PLANTED_AT and ws.grid.thumbnails.cell(0)[3] == f"R {expected.realism[PLANTED_AT]:.2f}"
    assert ws.grid.thumbnails.flagged(PLANTED_AT) and not ws.grid.thumbnails.flagged(plain)
    c.copies_only.setChecked(True)
    assert sorted(ws.grid.thumbnails.order.tolist()) == np.flatnonzero(expected.possible_copy).tolist()
    copies = ws.realism.copying.copies.text()
    assert f"<b>{expected.copies}</b> of {N} samples are <b>possible copies</b>" in copies
    assert f"about 1% expected at α = {WINDOW.copy_alpha:g} without copying" in copies
    assert f"than 99% of 120 held-out real images are to theirs (held-out images {held_path})" in copies
    assert "no sign of copying" in copies  # one copy in 40 samples: within what honest samples give

    # C_T against them on the same features; chosen again: read again (from the cache), C_T and the flags anew
    qtbot.waitUntil(lambda: ws.gallery.realism.copying_result is not None, timeout=WAIT_MS)
    ct = data_copying(real, held, features, copying_cells(N, len(real)))
    assert ws.gallery.realism.copying_result[2].statistic == pytest.approx(ct.statistic, rel=1e-6)
    first, calibrated = ws.gallery.realism.copying_result, ws.gallery.realism.calibrated_on
    ws.realism.copying.held_out_chosen.emit(str(held_path))
    assert ws.gallery.realism.result is None and ws.gallery.realism.calibrated_on is None  # never the old set's flags
    assert "copy?" not in ws.realism.copying.copies.text() and not ws.grid.thumbnails.flagged(PLANTED_AT)
    numbers = ws.gallery.realism
    qtbot.waitUntil(lambda: numbers.copying_result is not None and numbers.copying_result is not first
                    and numbers.done == N and numbers.result.copy is not None, timeout=WAIT_MS)
    assert ws.gallery.realism.copying_result[2].statistic == first[2].statistic
    assert ws.gallery.realism.calibrated_on is not calibrated
    np.testing.assert_array_equal(ws.gallery.realism.result.possible_copy, expected.possible_copy)


def test_numbers_of_another_reference_are_never_shown(qtbot, make_workspace, demo_model, real_dataset):
    """A new reference replaces the scores' LiveScores: the per-sample numbers go with it, and come back computed
    against the new one."""
    from probescope.jobs.scoring.reference import NONE, ReferenceChoice

    ws, pool, state = make_workspace(GalleryWorkspace, (1500, 950))
    state.set(Loaded("dataset", "real", "real", real_dataset))
    state.set(loaded_model(pool, demo_model))
    state.set(Loaded("samples", "demo", "demo", DemoSampler(N)))
    qtbot.waitUntil(lambda: ws.scores.n == N and not ws.streaming and ws.gallery.realism.done == N, timeout=WAIT_MS)
    ws.grid.select_image(0)
    ws.real_panel.choose(ReferenceChoice(NONE))
    qtbot.waitUntil(lambda: ws.real.live is not None and not ws.real.has_reference, timeout=WAIT_MS)
    assert ws.gallery.realism.result is None and np.isnan(ws.scores.values("realism")).all()
    assert "no reference chosen" in ws.realism.neighbours.summary.text()
    assert not ws.grid.thumbnails.flagged(0) and ws.realism.copying.statistic.text() == ""


def test_a_cancelled_computation_says_so_and_is_asked_for_again(qtbot, make_workspace, demo_model, real_dataset,
                                                                monkeypatch):
    """Cancel (the Tasks panel's button) stops the job between blocks; the panel says it was cancelled instead of
    'computing…' for ever, the cancel holds while nothing changes, and a new run asks for the numbers again."""
    import probescope.jobs.scoring.live_realism as realism_module

    started = []

    def waits_for_cancel(ctx, **_kwargs):
        started.append(True)
        while True:
            ctx.check()
            time.sleep(0.01)

    monkeypatch.setattr(realism_module, "neighbours_job", waits_for_cancel)
    ws, pool, state = make_workspace(GalleryWorkspace, (1500, 950))
    state.set(Loaded("dataset", "real", "real", real_dataset))
    state.set(loaded_model(pool, demo_model))
    state.set(Loaded("samples", "demo", "demo", DemoSampler(N)))
    qtbot.waitUntil(lambda: ws.scores.n == N and not ws.streaming and bool(started), timeout=WAIT_MS)
    ws.grid.select_image(0)
    assert "computing…" in ws.realism.neighbours.summary.text()
    key = ws.task_key("scores:realism")
    pool.cancel(key)
    qtbot.waitUntil(lambda: not pool.is_running(key), timeout=WAIT_MS)
    ws.grid.select_image(1)
    assert "cancelled" in ws.realism.neighbours.summary.text() and ws.gallery.realism.result is None
    ws.update_views()
    assert not pool.is_running(key)
    monkeypatch.undo()
    ws.run.reset(start=True)
    qtbot.waitUntil(lambda: ws.gallery.realism.done == N and not ws.streaming, timeout=WAIT_MS)
    ws.grid.select_image(1)
    assert ws.realism.neighbours.shown == 1


def test_copies_text_cautions_when_held_out_images_are_in_the_reference():
    from probescope.app.gallery.realism_panel import copies_text
    from probescope.core.scoring.copy_test import copy_test

    rng = np.random.default_rng(3)
    reference, held, generated = rng.normal(size=(80, 6)), rng.normal(size=(30, 6)), rng.normal(size=(20, 6))
    held[:4] = reference[:4]
    text = copies_text(copy_test(generated, reference, held, alpha=0.1))
    assert "4 of the 30 held-out images are also in the reference" in text
    assert "also in the reference" not in copies_text(copy_test(generated, reference, held[4:], alpha=0.1))
