"""Gallery workspace: the live Inception Score streamed from the demo sampler agrees with the engine's batch
numbers (also across a pause), the diversity knob moves IS, sorting and filtering, the detail of one image, an
.npz opened from disk, the seed's worked example A-D, and every export."""

from __future__ import annotations

import csv
import dataclasses
import math

import numpy as np
import pytest
from PySide6.QtCore import Qt
from PySide6.QtGui import QImage
from windows import held_after, loaded_model

from probescope.app.figures.export import export_widget
from probescope.app.gallery.workspace import GalleryWorkspace
from probescope.core.demo.sampler import DemoSampler
from probescope.core.scoring.distributions import ClassScores
from probescope.core.scoring.report import score_report
from probescope.jobs.inputs import Loaded

WAIT_MS = 60_000


@pytest.fixture
def gallery(make_workspace):
    ws, _pool, _state = make_workspace(GalleryWorkspace, (1500, 950))
    yield ws
    ws.run.stop()


def open_samples(qtbot, ws, model, source, label="samples") -> None:
    """Put the model and `source` into the state and wait until the first stream has finished."""
    if ws.state.model is None or ws.state.model.name != model.name:
        ws.state.set(loaded_model(ws.pool, model))
    ws._initial_done = False
    ws.state.set(Loaded("samples", label, label, source))
    qtbot.waitUntil(lambda: ws.is_initial_work_done and not ws.streaming, timeout=WAIT_MS)


def engine_report(images: list[np.ndarray], model, splits: int = 10):
    """The engine's batch numbers for `images`: logits of the same classifier (in the stream's batch size, so the
    float32 logits are bit-identical), then score_report."""
    from probescope.core.scoring.classifiers import classifier_of_model
    from probescope.core.scoring.settings import WINDOW

    classifier = classifier_of_model(model)
    logits = np.concatenate([classifier.classify(images[a : a + WINDOW.batch_size])
                             for a in range(0, len(images), WINDOW.batch_size)])
    return score_report(ClassScores(logits, "logits"), splits=splits)


def demo_images(n: int, diversity: int = 14, fidelity: float = 1.0) -> list[np.ndarray]:
    sampler = DemoSampler(n, diversity, fidelity)
    return [sampler.sample(k)[0] for k in range(n)]


def test_streamed_scores_agree_with_the_engine_across_a_pause(qtbot, gallery, demo_model):
    ws = gallery
    ws.state.set(loaded_model(ws.pool, demo_model))
    ws.state.set(Loaded("samples", "demo", "demo", DemoSampler(48)))
    qtbot.waitUntil(lambda: ws.scores.n >= 16, timeout=WAIT_MS)
    ws.controls.play.click()  # pause
    assert not ws.streaming and ws.controls.play.text() == "Resume"
    qtbot.waitUntil(lambda: not ws.pool.is_running(ws.task_key("stream")), timeout=WAIT_MS)
    n = ws.scores.n
    partial = engine_report(demo_images(48)[:n], demo_model, splits=2)
    assert ws.scores.live.is_ == pytest.approx(partial.is_all, rel=1e-9)
    ws.controls.play.click()  # resume at image n
    qtbot.waitUntil(lambda: ws.scores.n == 48 and not ws.streaming, timeout=WAIT_MS)

    report = engine_report(demo_images(48), demo_model)
    d = ws.scores.decomposition()
    assert d.is_ == pytest.approx(report.is_all, rel=1e-9)
    assert d.marginal_entropy == pytest.approx(report.marginal_entropy, abs=1e-9)
    assert d.conditional_entropy == pytest.approx(report.conditional_entropy, abs=1e-9)
    assert d.mutual_information == pytest.approx(math.log(report.is_all), abs=1e-9)
    np.testing.assert_allclose(ws.scores.kl(), report.contributions, atol=1e-9)
    np.testing.assert_allclose(ws.score_panel.marginal.values, report.marginal, atol=1e-12)
    # what the panel shows is these numbers
    assert ws.score_panel.is_label.text() == f"IS {report.is_all:.2f}"
    assert "N = 48" in ws.score_panel.n_label.text()
    text = ws.score_panel.decomposition_label.text()
    for value in (report.marginal_entropy, report.conditional_entropy, report.mutual_information):
        assert f"{value:.3f}" in text
    x, y = ws.score_panel.curve.curve_data()
    assert x[-1] == 48 and y[-1] == pytest.approx(report.is_all)
    # the split protocol, labelled with its protocol and classifier
    qtbot.waitUntil(lambda: ws.split is not None and ws.split.n == 48, timeout=WAIT_MS)
    assert ws.split.mean == pytest.approx(report.split.mean, rel=1e-9)
    assert ws.split.std == pytest.approx(report.split.std, rel=1e-9)
    label = ws.score_panel.split_label.text()
    assert f"{report.split.mean:.2f} ± {report.split.std:.2f}" in label
    assert "10 splits" in label and "seed 2020" in label and "demo" in label
    assert "demo" in ws.score_panel.classifier_label.text()
    assert ws.grid.thumbnails.rowCount() == 48


def test_turning_diversity_down_makes_is_fall(qtbot, gallery, demo_model):
    ws = gallery
    open_samples(qtbot, ws, demo_model, DemoSampler(40))
    diverse = ws.scores.live.is_
    ws.controls.diversity.setValue(1)  # total mode collapse from now on
    ws.run.reset(start=True)
    qtbot.waitUntil(lambda: ws.scores.n == 40 and not ws.streaming, timeout=WAIT_MS)
    collapsed = ws.scores.live.is_
    assert collapsed < 0.5 * diverse
    assert all(len(s.scenes) == 1 for _start, s in ws.images.segments)
    # mid-stream: a run keeps the knobs it started with (its images stay comparable); the score panel says that the
    # new knobs wait for the next run, and its button starts one
    ws.controls.diversity.setValue(14)
    ws.controls.target.setValue(160)
    ws.run.reset(start=True)
    qtbot.waitUntil(lambda: ws.scores.n >= 24, timeout=WAIT_MS)
    ws.controls.diversity.setValue(1)
    assert not ws.score_panel.notice.isHidden() and "apply to the next run" in ws.score_panel.notice.text()
    qtbot.waitUntil(lambda: ws.scores.n == 160 and not ws.streaming, timeout=WAIT_MS)
    assert all(len(s.scenes) == 14 for _start, s in ws.images.segments)
    assert "diversity 14, fidelity 1.00" in ws.score_panel.run_label.text()
    diverse = ws.scores.live.is_
    qtbot.mouseClick(ws.score_panel.notice_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: ws.scores.n == 160 and not ws.streaming, timeout=WAIT_MS)
    assert all(len(s.scenes) == 1 for _start, s in ws.images.segments)
    assert ws.scores.live.is_ < 0.5 * diverse and ws.score_panel.notice.isHidden()
    assert "diversity 1, fidelity 1.00" in ws.score_panel.run_label.text()
    # N changed after the run: the line says the N that Resume scores to (issue 45: it kept the run's N)
    ws.controls.target.setValue(200)
    assert ws.score_panel.run_label.text().endswith("N 200") and ws.controls.play.text() == "Resume"


def test_sort_filter_select_and_arrow_keys(qtbot, gallery, demo_model):
    ws = gallery
    open_samples(qtbot, ws, demo_model, DemoSampler(40))
    scores = ws.scores
    ws.controls.sort.setCurrentIndex(ws.controls.sort.findData("kl"))
    ws.controls.descending.setChecked(True)
    expected = np.argsort(-scores.kl(), kind="stable")
    np.testing.assert_array_equal(ws.grid.thumbnails.order, expected)
    # select the image with the largest KL contribution and read its detail
    top = int(expected[0])
    assert ws.grid.select_image(top) and ws.grid.current_row() == 0
    p = scores.probabilities(top)
    bars = ws.detail.bars.values
    np.testing.assert_allclose(bars, np.sort(p)[::-1][: len(bars)])
    assert ws.detail.bars.names[0] == ws.class_names[int(p.argmax())]
    assert f"{scores.kl()[top]:.3f}" in ws.detail.numbers.text()
    assert f"{scores.entropy[top]:.3f}" in ws.detail.numbers.text()
    share = scores.kl()[top] / scores.kl().sum()
    assert f"{share:.2%}" in ws.detail.numbers.text()
    qtbot.waitUntil(lambda: ws.detail.image.pixmap() is not None and not ws.detail.image.pixmap().isNull(),
                    timeout=WAIT_MS)
    # arrow keys move through the samples in the shown order
    ws.grid.setFocus()
    qtbot.keyClick(ws.grid, Qt.Key.Key_Right)
    assert ws.grid.current_image() == int(expected[1])
    # filters: one predicted class, then confidence in a range
    c = int(scores.predicted[top])
    ws.controls.class_filter.setCurrentIndex(ws.controls.class_filter.findData(c))
    order = ws.grid.thumbnails.order
    assert len(order) == int((scores.predicted == c).sum()) and (scores.predicted[order] == c).all()
    ws.controls.class_filter.setCurrentIndex(0)
    ws.controls.filter_key.setCurrentIndex(ws.controls.filter_key.findData("confidence"))
    ws.controls.filter_low.setValue(0.9)
    ws.controls.filter_high.setValue(1.0)
    order = ws.grid.thumbnails.order
    assert len(order) == int((scores.confidence >= 0.9).sum()) and (scores.confidence[order] >= 0.9).all()
    ws.controls.sort.setCurrentIndex(ws.controls.sort.findData("entropy"))
    ws.controls.descending.setChecked(False)
    assert (np.diff(scores.entropy[ws.grid.thumbnails.order]) >= 0).all()
    # visible thumbnails are rendered in the pool
    qtbot.waitUntil(lambda: ws.grid.thumbnails.pixmap(int(ws.grid.thumbnails.order[0])) is not None,
                    timeout=WAIT_MS)


def test_npz_samples_from_disk(qtbot, gallery, demo_model, tmp_path):
    from probescope.core.scoring.sources import open_source

    images = np.stack(demo_images(12, fidelity=0.6))
    np.savez(tmp_path / "samples.npz", images=images)
    ws = gallery
    open_samples(qtbot, ws, demo_model, open_source(tmp_path / "samples.npz"), "samples.npz")
    report = engine_report(list(images), demo_model)
    assert ws.scores.n == 12 and ws.scores.live.is_ == pytest.approx(report.is_all, rel=1e-9)
    assert not ws.controls.diversity.isEnabled()  # the knobs belong to the demo sampler
    qtbot.waitUntil(lambda: ws.split is not None and ws.split.n == 12, timeout=WAIT_MS)
    assert ws.split.mean == pytest.approx(report.split.mean, rel=1e-9)
    qtbot.waitUntil(lambda: ws.grid.thumbnails.pixmap(0) is not None, timeout=WAIT_MS)
    # another classifier the engine supports: loaded in the compute thread, then everything is scored again
    ws._initial_done = False
    ws.set_classifier_spec("demo")
    qtbot.waitUntil(lambda: ws.is_initial_work_done and not ws.streaming and ws.scores.n == 12, timeout=WAIT_MS)
    assert ws.classifier is not None and "not comparable" in ws.score_panel.classifier_label.text()
    assert ws.scores.live.is_ == pytest.approx(report.is_all, rel=1e-6)  # the same demo weights


@pytest.mark.parametrize("generator, expected", [("A", "2.02"), ("B", "1.00"), ("C", "1.00"), ("D", "1.52")])
def test_worked_example_preset(qtbot, gallery, demo_model, generator, expected):
    ws = gallery
    if generator == "D":  # the preset is shown instead of what was streamed; going back shows the samples again
        open_samples(qtbot, ws, demo_model, DemoSampler(12))
    ws.controls.source.setCurrentIndex(ws.controls.source.findData(generator))
    assert ws.score_panel.is_label.text() == f"IS {expected}"
    assert ws.scores.n == 3 and ws.grid.thumbnails.rowCount() == 3
    text = ws.score_panel.decomposition_label.text()
    if generator == "A":
        assert "1.099" in text and "0.394" in text and "0.704" in text
    assert "needs N ≥ 10" in ws.score_panel.split_label.text()
    assert ws.detail.bars.names[0] in ("beagle", "corgi", "husky")
    if generator == "B":  # mode collapse: corgi and husky are never predicted
        assert "never predicted (2 of 3: corgi, husky)" in ws.score_panel.marginal.legend
    if generator == "D":
        assert ws.controls.class_filter.itemText(1) == "beagle"
        ws.controls.source.setCurrentIndex(0)
        qtbot.waitUntil(lambda: ws.scores.n == 12 and not ws.streaming, timeout=WAIT_MS)
        assert ws.controls.class_filter.itemText(1) == "harbor-s" and "demo" in ws.score_panel.classifier_label.text()


def test_exports(qtbot, gallery, demo_model, tmp_path):
    from PySide6.QtSvg import QSvgRenderer

    ws = gallery
    open_samples(qtbot, ws, demo_model, DemoSampler(24))
    path = ws.export_csv(tmp_path / "scores.csv")
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 24 and rows[0]["predicted_name"] in ws.class_names
    kl = np.array([float(r["kl_nats"]) for r in rows])
    assert kl.mean() == pytest.approx(math.log(ws.scores.live.is_), abs=1e-5)
    assert sum(float(r["share_of_log_is"]) for r in rows) == pytest.approx(1.0, abs=1e-4)
    assert [p.name for p in tmp_path.iterdir()] == ["scores.csv"]  # no temporary file left behind

    names = [t.name for t in ws.export_targets()]
    assert names == ["Gallery", "Contact sheet", "Detail panel", "Score panel", "Real data panel"]
    ws.controls.sheet_count.setValue(10)
    qtbot.waitUntil(lambda: all(ws.grid.thumbnails.pixmap(i) is not None for i in range(10)), timeout=WAIT_MS)
    for target in ws.export_targets()[1:]:
        stem = target.name.replace(" ", "_")
        png = export_widget(target.widget, tmp_path / f"{stem}.png", scale=2)
        image = QImage(str(png))
        assert image.width() == 2 * target.widget.width()
        assert QSvgRenderer(str(export_widget(target.widget, tmp_path / f"{stem}.svg"))).isValid()
        assert export_widget(target.widget, tmp_path / f"{stem}.pdf").read_bytes().startswith(b"%PDF")
    sheet = QImage(str(tmp_path / "Contact_sheet.png"))
    assert sheet.width() > 8 * 100  # 8 cells in a row
    # the sheet is not blank: its thumbnails carry colour
    pixels = {sheet.pixel(x, y) for x in range(0, sheet.width(), 17) for y in range(0, sheet.height(), 17)}
    assert len(pixels) > 50


def test_gallery_scores_against_brute_force():
    from probescope.jobs.scoring.samples import GalleryScores

    rng = np.random.default_rng(3)
    logits = rng.normal(size=(300, 6)) * 3
    scores = GalleryScores()
    for a in range(0, 300, 7):  # uneven batches
        scores.add_logits(logits[a : a + 7])
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    q = p.mean(0)
    kl = (p * (np.log(p) - np.log(q))).sum(1)
    entropy = -(p * np.log(p)).sum(1)
    assert scores.kl_of(7) == pytest.approx(kl[7], abs=1e-12)  # one image, before every KL is computed
    np.testing.assert_allclose(scores.kl(), kl, atol=1e-12)
    np.testing.assert_allclose(scores.entropy, entropy, atol=1e-12)
    np.testing.assert_array_equal(scores.top_classes, np.argsort(-p, axis=1, kind="stable")[:, :3])
    assert math.exp(kl.mean()) == pytest.approx(scores.live.is_, rel=1e-12)
    order = scores.order("confidence", True, class_filter=2, value_filter=("entropy", 0.1, 1.2))
    keep = [i for i in range(300) if p[i].argmax() == 2 and 0.1 <= entropy[i] <= 1.2]
    assert sorted(order) == keep and list(order) == sorted(keep, key=lambda i: -p[i].max())
    assert scores.share_of_log_is(5) == pytest.approx(kl[5] / kl.sum())
    two = GalleryScores()  # fewer classes than bars: padded with class -1
    two.add_probabilities(np.array([[0.3, 0.7]]))
    assert two.top_classes.tolist() == [[1, 0, -1]] and two.top_probs[0, 2] == 0
    flat = GalleryScores()  # IS = 1: shares of log IS are undefined, not a division by zero
    flat.add_probabilities(np.full((4, 3), 1 / 3))
    assert math.isnan(flat.share_of_log_is(0))


def test_worked_examples_keep_the_scored_set_and_a_new_model_is_offered_not_imposed(qtbot, gallery, demo_model):
    ws = gallery
    open_samples(qtbot, ws, demo_model, DemoSampler(40))
    scores, value = ws.scores, ws.scores.live.is_
    ws.controls.source.setCurrentIndex(ws.controls.source.findData("A"))  # a worked example...
    assert ws.scores is not scores and ws.scores.n == 3
    ws.controls.source.setCurrentIndex(ws.controls.source.findData("samples"))  # ...and back: nothing rescored
    assert ws.scores is scores and ws.scores.n == 40 and ws.scores.live.is_ == value and not ws.streaming
    # a newly opened model does not replace the classifier of a scored set: the panel offers it
    other = dataclasses.replace(demo_model, name="demo again")
    ws.state.set(loaded_model(ws.pool, other, "demo again"))
    assert ws.scores is scores and ws.scores.n == 40 and not ws.streaming
    assert "The loaded model is now demo again" in ws.score_panel.notice.text()
    qtbot.mouseClick(ws.score_panel.notice_button, Qt.MouseButton.LeftButton)  # accepted: scored again with it
    qtbot.waitUntil(lambda: ws.scores.n == 40 and not ws.streaming and ws.classifier.name == "demo again",
                    timeout=WAIT_MS)
    assert ws.score_panel.notice.isHidden()


def test_out_of_sight_the_views_wait_and_are_drawn_when_shown_or_exported(qtbot, gallery, demo_model, tmp_path):
    """Another workspace on screen: the Gallery takes every batch but draws nothing (its redraws and readings took
    the GUI thread and a core from the workspace shown); shown, or exported from out of sight, its views are those
    of every image scored."""
    ws = gallery
    ws.hide()
    open_samples(qtbot, ws, demo_model, DemoSampler(24))
    drawn = ws.score_updates
    assert ws.scores.n == 24 and ws.grid.thumbnails.rowCount() < 24 and "N = 24" not in ws.score_panel.n_label.text()
    targets = {t.name: t for t in ws.export_targets()}  # an export from out of sight: drawn first
    assert ws.score_updates == drawn + 1 and "N = 24" in ws.score_panel.n_label.text()
    export_widget(targets["Score panel"].widget, tmp_path / "score.png", width=600)
    ws.run.reset(start=True)
    qtbot.waitUntil(lambda: ws.scores.n == 24 and not ws.streaming, timeout=WAIT_MS)
    assert ws.score_updates == drawn + 1  # the new stream was taken, nothing drawn
    ws.show()
    assert ws.score_updates == drawn + 2 and ws.grid.thumbnails.rowCount() == 24
    assert ws.score_panel.is_label.text() == f"IS {ws.scores.live.is_:.2f}"


def test_pause_says_at_once_that_it_no_longer_streams(qtbot, gallery, demo_model, monkeypatch):
    """Pause with no batch left to come: the numbers stop saying 'streaming' (they waited for a batch's redraw,
    which a paused stream never sends). The stream is held at image 32, so that it still streams when looked at."""
    ws = gallery
    ws.state.set(loaded_model(ws.pool, demo_model))
    with held_after(monkeypatch, 32):
        ws.state.set(Loaded("samples", "demo", "demo", DemoSampler(400)))
        qtbot.waitUntil(lambda: ws.scores.n >= 16, timeout=WAIT_MS)
        ws.run._take_all()  # every batch that came is in and drawn: no redraw is due
        ws.run._update_timer.stop()
        ws.update_views()
        assert "streaming" in ws.score_panel.n_label.text()
        ws.controls.play.click()
        assert "streaming" not in ws.score_panel.n_label.text()
        assert f"N = {ws.scores.n:,}" in ws.score_panel.n_label.text() and ws.controls.play.text() == "Resume"


def test_a_stream_cancelled_from_outside_the_gallery_is_paused(qtbot, gallery, demo_model, monkeypatch):
    """Cancel in the status bar or the Tasks panel stops the stream as Pause does: the button offers Resume, the
    numbers no longer say 'streaming', the grid holds every image scored. (The Gallery went on saying it streamed,
    its button on Pause, since a cancelled task's callbacks never run.) The stream is held at image 32 until
    cancelled, so that there is a stream to cancel."""
    ws = gallery
    ws.state.set(loaded_model(ws.pool, demo_model))
    with held_after(monkeypatch, 32) as release:
        ws.state.set(Loaded("samples", "demo", "demo", DemoSampler(400)))
        qtbot.waitUntil(lambda: ws.scores.n >= 16, timeout=WAIT_MS)
        stream = next(h for h in ws.pool.active() if h.key == ws.task_key("stream"))
        stream.cancel()  # as the status bar's Cancel does
        release()
    qtbot.waitUntil(lambda: not ws.streaming, timeout=WAIT_MS)
    assert ws.controls.play.text() == "Resume" and not ws.controls.play.isChecked()
    assert "streaming" not in ws.score_panel.n_label.text() and f"N = {ws.scores.n:,}" in ws.score_panel.n_label.text()
    assert ws.grid.thumbnails.rowCount() == ws.scores.n < 400 and ws.is_initial_work_done
    ws.controls.play.click()  # Resume goes on from there
    qtbot.waitUntil(lambda: ws.scores.n == 400 and not ws.streaming, timeout=WAIT_MS)
