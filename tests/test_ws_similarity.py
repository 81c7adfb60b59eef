"""The Similarity workspace on the demo world's SIMULATED judgments: the grid shows the right images in the right
places with the right picks, the model's view matches the engine's triplet agreement, a layer of the demo model adds
a row with the engine's numbers, the filters change the counts, keyboard and clicks move through the trials, the
quick embedding is cached, proposals are made and saved, refits run and cancel, and every view exports."""

from __future__ import annotations

import numpy as np
import pytest
from PySide6.QtCore import Qt

from probescope.app.figures.export import export_widget
from probescope.app.similarity.workspace import SimilarityWorkspace
from probescope.core.similarity.agreement import triplet_agreement
from probescope.core.similarity.correlation import embedding_correlation
from probescope.core.similarity.embedding import FitOptions
from probescope.core.similarity.quality import apply_quality_control
from probescope.core.similarity.sources import model_features
from probescope.jobs.inputs import OpenRequest
from probescope.jobs.similarity import embedding as fits
from probescope.jobs.similarity import scores as scoring
from probescope.jobs.similarity import trials as data
from probescope.widgets.similarity.tables import AGREE

pytestmark = pytest.mark.usefixtures("isolated_cache")
WAIT_MS = 90_000


@pytest.fixture
def env(qtbot, make_workspace, open_input):
    ws, pool, state = make_workspace(SimilarityWorkspace)
    open_input(pool, state, OpenRequest("judgments", "demo"))
    qtbot.waitUntil(lambda: ws.is_initial_work_done and not pool.active(), timeout=WAIT_MS)
    return ws, pool, state


def idle(qtbot, ws, pool) -> None:
    qtbot.waitUntil(lambda: not pool.active(), timeout=WAIT_MS)


def test_grid_shows_the_trial_as_the_participant_saw_it(qtbot, env):
    ws, pool, state = env
    judgments = state.judgments
    assert judgments.simulated and "SIMULATED" in ws.header.text() and "SIMULATED" in ws.view.caption.text()
    ws.trials.trial_list.select_trial(7)
    idle(qtbot, ws, pool)
    t = ws.shown.trial
    assert t == 7
    trials = judgments.trials
    refs = [int(r) for r in trials.references[t]]
    picks = [int(c) for c in trials.choices[t]]
    captions = ws.view.grid.captions()
    assert captions[8] == f"query · {data.stimulus_name(judgments, int(trials.query[t]))}"
    for position, stimulus in enumerate(refs):
        name = data.stimulus_name(judgments, stimulus)
        expected = f"pick {picks.index(position) + 1} · {name}" if position in picks else name
        assert captions[position] == expected
    # the pictures are those stimuli's images: mean colour of each cell against the file
    from PIL import Image

    for position, stimulus in enumerate([*refs, int(trials.query[t])]):
        cell = ws.view.grid._cells[position if position < 8 else 8]
        shown = cell.picture.pixmap().toImage().convertToFormat(cell.picture.pixmap().toImage().Format.Format_RGB888)
        arr = np.frombuffer(shown.constBits(), np.uint8).reshape(shown.height(), shown.bytesPerLine())
        arr = arr[:, : shown.width() * 3].reshape(shown.height(), shown.width(), 3)
        source = np.asarray(Image.open(judgments.catalog.image_path(stimulus)).convert("RGB"), dtype=np.float64)
        assert np.abs(arr.mean((0, 1)) - source.mean((0, 1))).max() < 6


def test_model_view_matches_the_engine_and_the_demo_layer_adds_a_row(qtbot, env, open_input):
    ws, pool, state = env
    assert [s.kind for s in ws.shown.scores] == ["embedding"] and ws.models.table.rowCount() == 1
    open_input(pool, state, OpenRequest("model", "demo"))
    qtbot.waitUntil(lambda: len(ws.shown.scores) == 2, timeout=WAIT_MS)
    idle(qtbot, ws, pool)
    name = "demo · layer4"
    assert ws.models.table.rowCount() == 2 and ws.models.table.item(1, 0).text() == name
    assert ws.view.model.currentText() == name  # the new row is the model on show

    judgments = state.judgments
    features = model_features(judgments.catalog, "demo", "layer4")  # the command line's path to the features
    kept, _ = apply_quality_control(judgments.trials, judgments.catalog.mirror_of, judgments.session_grade)
    row = ws.models.table.rows[1]
    for metric, shown in (("l1", row.l1), ("l2", row.l2), ("cosine", row.cosine)):
        assert shown == pytest.approx(triplet_agreement(kept, features, metric).accuracy, abs=1e-9)
    stimuli = np.nonzero(judgments.catalog.mirror_of < 0)[0]
    for kind, shown in (("dot", row.spearman_dot), ("cosine", row.spearman_cosine)):
        assert shown == pytest.approx(embedding_correlation(ws.shown.ensemble, features, kind, stimuli=stimuli).value,
                                      abs=1e-9)
    assert ws.models.table.item(1, 3).text() == f"{row.cosine:.4f}"

    # the grid: k of 13 as the engine counts it, and the wrong triplets checked one by one
    for metric in ("cosine", "l1"):
        ws.view.distance.setCurrentText(metric)
        per_trial = triplet_agreement(judgments.trials, features, metric)
        for t in (3, 11):
            ws.trials.trial_list.select_trial(t)
            idle(qtbot, ws, pool)
            correct, total = int(per_trial.per_trial_correct[t]), int(per_trial.per_trial_total[t])
            assert f"{correct} of {total}" in ws.view.grid.model_captions()[8] and total == 13
            assert f"{correct} of {total}" in ws.view.summary.text()
            refs = judgments.trials.references[t]
            first, second = judgments.trials.choices[t]
            dist = [triplet_distance(features, judgments.trials.query[t], r, metric) for r in refs]
            wrong = {(a, b) for a in (first, second) for b in range(8)  # pick 1 beats 7, pick 2 the other 6
                     if b not in (first, a) and not dist[a] < dist[b]}
            assert wrong == {tuple(p) for p in data.wrong_triplets(judgments.trials, t, np.array(dist))}
            assert len(wrong) == total - correct
            assert ws.view.grid.wrong_positions() == {p for pair in wrong for p in pair}
    # the list's agreement column and filter follow the selected model
    ws.trials.agree_max.setValue(5)
    shown = ws.trials.trial_list.list_model.rows
    assert len(shown) and (ws.current_agreement().per_trial_correct[shown] <= 5).all()


def triplet_distance(features: np.ndarray, q: int, r: int, metric: str) -> float:
    a, b = features[q].astype(np.float64), features[r].astype(np.float64)
    if metric == "l1":
        return float(np.abs(a - b).sum())
    if metric == "l2":
        return float(np.sqrt(((a - b) ** 2).sum()))
    return 1.0 - float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def test_filters_change_the_counts(qtbot, env):
    ws, pool, state = env
    judgments = state.judgments
    report = ws.shown.trialset.report
    assert report.kept == len(ws.shown.trialset.kept) and ws.quality.catch_plot.values[0] > 0
    assert sum(ws.quality.grades_plot.values) == sum(report.sessions.values())
    before = ws.models.table.rows[0]
    ws.quality.catch.setChecked(False)
    qtbot.waitUntil(lambda: ws.shown.trialset.filters.catch is False, timeout=WAIT_MS)
    idle(qtbot, ws, pool)
    _, expected = apply_quality_control(judgments.trials, judgments.catalog.mirror_of, judgments.session_grade,
                                        catch=False)
    assert ws.shown.trialset.report.kept == expected.kept > report.kept
    assert f"{expected.kept} of {len(judgments.trials)} trials kept" in ws.quality.counts.text()
    assert ws.models.table.rows[0].cosine != before.cosine  # the table is recomputed on the new trial set
    # the list's own filters
    ws.trials.catch_filter.setCurrentText("catch trials")
    assert ws.trials.trial_list.list_model.rowCount() == report.catch_trials
    ws.trials.kept_only.setChecked(True)
    kept_catch = int((ws.shown.trialset.kept_mask & (ws.shown.trialset.catch_position >= 0)).sum())
    assert ws.trials.trial_list.list_model.rowCount() == kept_catch
    assert f"{kept_catch} of {len(judgments.trials)} trials listed" == ws.trials.count.text()


def test_keys_sorting_and_clicking_a_reference(qtbot, env):
    ws, pool, state = env
    trials = state.judgments.trials
    ws.trials.trial_list.select_row(0)
    idle(qtbot, ws, pool)
    first = ws.shown.trial
    ws.trials.trial_list.setFocus()
    qtbot.keyClick(ws.trials.trial_list, Qt.Key.Key_Down)
    idle(qtbot, ws, pool)
    assert ws.shown.trial == int(ws.trials.trial_list.list_model.rows[1]) != first
    ws.step(1)
    idle(qtbot, ws, pool)
    assert ws.shown.trial == int(ws.trials.trial_list.list_model.rows[2])
    ws.trials.trial_list.sortByColumn(AGREE, Qt.SortOrder.DescendingOrder)
    correct = ws.current_agreement().per_trial_correct[ws.trials.trial_list.list_model.rows]
    assert (np.diff(correct) <= 0).all()

    # clicking a reference lists the trials where it is the query
    reference = int(trials.references[ws.shown.trial, 0])
    qtbot.mouseClick(ws.view.grid._cells[0], Qt.MouseButton.LeftButton)
    idle(qtbot, ws, pool)
    rows = ws.trials.trial_list.list_model.rows
    assert ws.shown.query_filter == reference and (trials.query[rows] == reference).all()
    assert len(rows) == int((trials.query == reference).sum())
    if len(rows):
        assert trials.query[ws.shown.trial] == reference
    ws.trials.query_button.click()
    assert ws.trials.trial_list.list_model.rowCount() == len(trials)


def test_quick_embedding_is_cached_and_shown(qtbot, env):
    ws, pool, state = env
    assert ws.shown.ensemble.dims == fits.QUICK_DIMS and ws.shown.ensemble.n_members == fits.QUICK_MEMBERS
    assert ws.embedding.view.highlighted() == 9  # the shown trial's query and eight references
    assert "within-ensemble correlation" in ws.embedding.info.text()
    assert "coarse-grained loss" in ws.embedding.info.text()
    # a second workspace on the same judgments reads the fit from the cache
    other = SimilarityWorkspace(pool)
    qtbot.addWidget(other)
    other.load_state(state)
    other.refresh()
    qtbot.waitUntil(lambda: other.is_initial_work_done and not pool.active(), timeout=WAIT_MS)
    assert "read from the cache" in other.embedding.info.text()
    np.testing.assert_array_equal(other.shown.ensemble.loc, ws.shown.ensemble.loc)
    # hovering a point brings its thumbnail
    ws.embedding.view._hover = 5
    ws._hovered(5)
    qtbot.waitUntil(lambda: not ws.embedding.view.thumbnail.isHidden(), timeout=WAIT_MS)


def test_refit_runs_and_cancels(qtbot, env, monkeypatch):
    ws, pool, state = env
    monkeypatch.setattr(fits, "FitOptions", lambda: FitOptions(max_epochs=10, eval_every=5))
    ws.embedding.dims_min.setValue(2)
    ws.embedding.dims_max.setValue(3)
    ws.embedding.members.setValue(2)
    ws.embedding.refit_button.click()
    assert not ws.embedding.refit_button.isEnabled() and ws.embedding.cancel_button.isEnabled()
    qtbot.waitUntil(lambda: len(ws.shown.history) == 2, timeout=WAIT_MS)
    idle(qtbot, ws, pool)
    assert ws.shown.ensemble.dims in (2, 3) and ws.shown.ensemble.n_members == 2
    assert sorted(ws.shown.history[-1].dims_loss) == [2, 3] and ws.shown.history[-1].consecutive is not None
    assert ws.embedding.refit_button.isEnabled()
    monkeypatch.setattr(fits, "FitOptions", lambda: FitOptions(max_epochs=100_000, patience=10**9))
    ws.embedding.refit_button.click()
    qtbot.waitUntil(lambda: pool.is_running(ws.task_key("judgments:refit")), timeout=WAIT_MS)
    ws.embedding.cancel_button.click()
    idle(qtbot, ws, pool)
    assert len(ws.shown.history) == 2 and ws.embedding.refit_button.isEnabled()
    assert ws.embedding.info.text().startswith("Refit cancelled; the embedding shown is the previous one: refit: ")
    # cancelled from elsewhere (the Tasks panel, the status bar): the panel stops saying it refits all the same
    ws.embedding.refit_button.click()
    qtbot.waitUntil(lambda: pool.is_running(ws.task_key("judgments:refit")), timeout=WAIT_MS)
    assert "Refitting" in ws.embedding.info.text()
    pool.cancel(ws.task_key("judgments:refit"))
    idle(qtbot, ws, pool)
    assert "Refitting" not in ws.embedding.info.text() and "Refit cancelled" in ws.embedding.info.text()
    assert ws.embedding.refit_button.isEnabled() and not ws.embedding.cancel_button.isEnabled()


def test_propose_shows_candidates_and_saves(qtbot, env, tmp_path):
    ws, pool, state = env
    ws.active.queries.setValue(4)
    ws.active.n_candidates.setValue(30)
    ws.active.propose_button.click()
    qtbot.waitUntil(lambda: ws.active.proposal is not None, timeout=WAIT_MS)
    idle(qtbot, ws, pool)
    gains = ws.active.proposal.info_gain
    assert ws.active.candidates.count() == len(gains)
    assert ws.active.candidates.item(0).text().startswith(f"{gains.max():.4f} nats")
    ws.active.candidates.setCurrentRow(0)
    idle(qtbot, ws, pool)
    assert "information gain" in ws.view.caption.text() and not any("pick" in c for c in ws.view.grid.captions())
    path = ws.active.save(tmp_path / "next.csv")
    from probescope.core.similarity.readers import read_trials_csv

    assert len(read_trials_csv(path).trials) == len(gains)


def test_every_view_exports(qtbot, env, tmp_path):
    ws, pool, state = env
    for k, target in enumerate(ws.export_targets()):
        for suffix in ("png", "svg", "pdf"):
            out = export_widget(target.widget, tmp_path / f"{k}.{suffix}", width=600 if suffix == "png" else None)
            assert out.stat().st_size > 500, (target.name, suffix)
    text = ws.models.save(tmp_path / "models.csv").read_text()
    assert text.splitlines()[1].startswith(scoring.EMBEDDING_ROW)


def test_trial_sheet_shows_the_listed_trials(qtbot, env):
    ws, pool, state = env
    ws.trials.trial_list.select_row(2)
    idle(qtbot, ws, pool)
    ws.area.raise_panel("sheet")
    qtbot.waitUntil(lambda: ws.sheet.shown == ws.sheet.capacity, timeout=WAIT_MS)
    rows = ws.trials.trial_list.list_model.rows[2 : 2 + ws.sheet.capacity]
    titles = [slot[0].text() for slot in ws.sheet._slots]
    assert [t.split(" · ")[0] for t in titles] == [f"trial {t + 1}" for t in rows]
    judgments = state.judgments
    first = ws.sheet._slots[0][1].captions()
    assert first[8] == f"query · {data.stimulus_name(judgments, int(judgments.trials.query[rows[0]]))}"


def test_list_filter_by_grade_class_against_the_session_grades(qtbot, env):
    ws, pool, state = env
    ts = ws.shown.trialset
    for name, inside in (("premium", lambda g: g > 0.875), ("satisfactory", lambda g: 0.5 <= g <= 0.875),
                         ("unsatisfactory", lambda g: g < 0.5)):
        ws.trials.grade_filter.setCurrentText(name)
        expected = [t for t in range(len(ts.trials)) if not np.isnan(ts.session_grade[t])
                    and inside(ts.session_grade[t])]
        assert sorted(ws.trials.trial_list.list_model.rows.tolist()) == expected
    ws.trials.grade_filter.setCurrentText("all")
    cls = ts.query_class[0]
    ws.trials.class_filter.setCurrentText(cls)
    assert all(ts.query_class[t] == cls for t in ws.trials.trial_list.list_model.rows)


def test_stimulus_captions_are_made_once_per_judgments():
    """Captions of every stimulus are made once (the list needs one per trial: 312,500 at ImageNet-HSJ scale) and
    forgotten with their judgments."""
    import gc
    from pathlib import Path

    from probescope.core.similarity.catalog import Catalog
    from probescope.core.similarity.readers import Judgments
    from probescope.core.similarity.trials import Trials

    catalog = Catalog(("a.png", "b.png", "c.png"), np.array([-1, -1, 0]), Path("."), ("cat", "", "cat"))
    trials = Trials.make(np.array([0, 1]), np.array([[1, 2], [0, 2]]), np.array([[0], [1]]))
    judgments = Judgments(trials, catalog, Path("x.csv"), "csv")
    names = data.stimulus_names(judgments)
    assert names == ["cat #0", "#1", "cat #2 (mirror of #0)"] and data.stimulus_names(judgments) is names
    assert [data.stimulus_name(judgments, s) for s in (2, 0)] == [names[2], names[0]]
    key = id(judgments)
    del judgments
    gc.collect()
    assert key not in data._NAMES
