"""Gallery scores against real data: what the Real data panel and the Score panel's headline show is the engine's
FID, KID, precision/recall, infinite-N fits and coverage of the very features streamed (checked against brute-force
formulas), and a reference changed mid-run rescores the kept samples without classifying any image again."""

from __future__ import annotations

import numpy as np
import pytest
from windows import loaded_model

from probescope.app.gallery.workspace import GalleryWorkspace
from probescope.core.demo.sampler import DemoSampler
from probescope.core.scoring.classifiers import classifier_of_model
from probescope.core.scoring.coverage import class_coverage
from probescope.core.scoring.extrapolate import fid_infinity
from probescope.core.scoring.frechet import FrechetReference, frechet_distance, gaussian_stats
from probescope.core.scoring.kid import mmd2_unbiased
from probescope.core.scoring.precision_recall import precision_recall
from probescope.core.scoring.settings import WINDOW
from probescope.jobs.inputs import Loaded
from probescope.jobs.scoring.reference import NONE, ReferenceChoice

WAIT_MS = 60_000
N = 40


def streamed_features(model, n: int):
    """Features and logits of the demo sampler's first n images, in the stream's batches (bit-identical)."""
    classifier = classifier_of_model(model)
    sampler = DemoSampler(n)
    images = [sampler.sample(k)[0] for k in range(n)]
    batch = WINDOW.batch_size
    pairs = [classifier.embed(classifier.prepare(images[a : a + batch])) for a in range(0, n, batch)]
    return np.concatenate([f for f, _ in pairs]), np.concatenate([lg for _, lg in pairs])


def reference_features(model, dataset):
    classifier = classifier_of_model(model)
    images = [dataset.load_image(i) for i in range(dataset.n_images)]
    return classifier.embed(classifier.prepare(images))


def wait_for_final_readout(qtbot, ws, n: int) -> None:
    qtbot.waitUntil(lambda: ws.scores.n == n and not ws.streaming and ws.real.fast is not None
                    and ws.real.fast.n == n and ws.real.slow is not None and ws.real.slow.n == n, timeout=WAIT_MS)


def test_real_data_scores_are_the_engines_on_the_streamed_features(qtbot, make_workspace, demo_model,
                                                                   real_dataset):
    ws, pool, state = make_workspace(GalleryWorkspace, (1500, 950))
    state.set(Loaded("dataset", "real", "real", real_dataset))
    state.set(loaded_model(pool, demo_model))
    state.set(Loaded("samples", "demo", "demo", DemoSampler(N)))
    wait_for_final_readout(qtbot, ws, N)

    features, logits = streamed_features(demo_model, N)
    real_features, real_logits = reference_features(demo_model, real_dataset)
    np.testing.assert_array_equal(ws.real.live.features, features)
    values = ws.real.fast.values
    expected_fid = frechet_distance(gaussian_stats(features), gaussian_stats(real_features))
    assert values["FID"] == pytest.approx(expected_fid, rel=1e-6)
    assert values["KID"] == pytest.approx(mmd2_unbiased(features, real_features), rel=1e-6, abs=1e-9)
    prc = precision_recall(features, real_features, 3)
    slow = ws.real.slow
    assert (slow.values["precision"], slow.values["recall"]) == pytest.approx((prc.precision, prc.recall))
    fit = fid_infinity(features, FrechetReference(gaussian_stats(real_features)))
    np.testing.assert_allclose(slow.fid_inf.values, fit.values, rtol=1e-6)
    assert slow.fid_inf.intercept == pytest.approx(fit.intercept, rel=1e-6)
    coverage = class_coverage(np.bincount(real_logits.argmax(1), minlength=14),
                              np.bincount(logits.argmax(1), minlength=14))
    np.testing.assert_array_equal(slow.coverage.generated_counts, coverage.generated_counts)
    np.testing.assert_array_equal(slow.coverage.real_counts, coverage.real_counts)

    # what is on screen: the table, the headline beside IS, the fits drawn, one coverage row per class
    table = ws.real_panel.metrics.text()
    assert f"N = {N}" in table and f"{expected_fid:.4g}" in table and f"{fit.intercept:.4g}" in table
    headline = ws.score_panel.distances_label.text()
    assert ws.score_panel.distances_label.isVisibleTo(ws) and f"FID <b>{expected_fid:.4g}</b>" in headline
    assert f"P <b>{prc.precision:.3f}</b>" in headline
    x, y = ws.real_panel.fid_plot.fit_data()
    np.testing.assert_allclose(1.0 / x, fit.sizes)
    np.testing.assert_allclose(y, fit.values, rtol=1e-6)
    assert ws.real_panel.coverage.rowCount() == 14
    assert "30 images" in ws.real_panel.status.text()


def test_a_new_reference_rescores_the_kept_samples(qtbot, make_workspace, demo_model, real_dataset):
    ws, pool, state = make_workspace(GalleryWorkspace, (1500, 950))
    state.set(Loaded("dataset", "real", "real", real_dataset))
    state.set(loaded_model(pool, demo_model))
    state.set(Loaded("samples", "demo", "demo", DemoSampler(N)))
    wait_for_final_readout(qtbot, ws, N)
    fid = ws.real.fast.values["FID"]
    submitted = []
    original_submit = ws.pool.submit

    def counting_submit(task, **kwargs):
        submitted.append(kwargs["name"])
        return original_submit(task, **kwargs)

    ws.pool.submit = counting_submit
    ws.real_panel.choose(ReferenceChoice(NONE))
    qtbot.waitUntil(lambda: ws.real.fast is not None and ws.real.fast.n == N and not ws.real.has_reference,
                    timeout=WAIT_MS)
    assert "FID" not in ws.real.fast.values and "no reference chosen" in ws.real_panel.metrics.text()
    assert not ws.score_panel.distances_label.isVisibleTo(ws)
    ws.real_panel.reference_box.setCurrentIndex(0)
    ws.real_panel.reference_box.activated.emit(0)
    qtbot.waitUntil(lambda: ws.real.fast is not None and "FID" in ws.real.fast.values, timeout=WAIT_MS)
    assert ws.real.fast.values["FID"] == pytest.approx(fid, rel=1e-9)
    assert ws.scores.n == N and "score samples" not in submitted  # no image classified again


def test_a_dataset_opened_while_streaming_becomes_the_reference_of_every_sample(qtbot, make_workspace, demo_model,
                                                                               real_dataset):
    """The demo world opens its inputs in parallel: the dataset may arrive after the stream began."""
    ws, pool, state = make_workspace(GalleryWorkspace, (1500, 950))
    state.set(loaded_model(pool, demo_model))
    state.set(Loaded("samples", "demo", "demo", DemoSampler(N)))
    # (the loaded model's classifier is made by a job in the compute thread, where the model is held)
    qtbot.waitUntil(lambda: "Waiting for a probing dataset" in ws.real_panel.status.text(), timeout=WAIT_MS)
    qtbot.waitUntil(lambda: ws.scores.n >= 8, timeout=WAIT_MS)
    state.set(Loaded("dataset", "real", "real", real_dataset))
    wait_for_final_readout(qtbot, ws, N)
    assert ws.real.live.n == N and ws.real.has_reference
    features, _ = streamed_features(demo_model, N)
    real_features, _ = reference_features(demo_model, real_dataset)
    expected = frechet_distance(gaussian_stats(features), gaussian_stats(real_features))
    assert ws.real.fast.values["FID"] == pytest.approx(expected, rel=1e-6)
