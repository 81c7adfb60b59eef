"""Reusable views: image conversion, thumbnails, the unit table, the trial grid, notifications, progress, the command
palette."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from PySide6.QtCore import QPointF, Qt
from PySide6.QtGui import QAction, QImage
from PySide6.QtWidgets import QHeaderView

from probescope.widgets.command_palette import CommandPalette, matches
from probescope.widgets.dissection.plots import GroupedBars
from probescope.widgets.dissection.table import UnitTable
from probescope.widgets.gallery.grid import GalleryGrid
from probescope.widgets.images import blend, boundaries, label_colors, to_qimage
from probescope.widgets.notification import Notification
from probescope.widgets.similarity.plots import EmbeddingView
from probescope.widgets.similarity.tables import TrialColumns, TrialList
from probescope.widgets.similarity.trial_grid import TrialGrid
from probescope.widgets.task_progress import TaskProgress
from probescope.widgets.thumbnail_grid import Thumbnail, ThumbnailGrid


def test_to_qimage_copies_pixels_exactly():
    rgb = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    image = to_qimage(rgb)
    rgb[:] = 0  # the QImage owns its pixels
    assert (image.width(), image.height(), image.format()) == (7, 5, QImage.Format.Format_RGB888)
    original = np.random.default_rng(0).integers(0, 256, (5, 7, 3), dtype=np.uint8)
    c = image.pixelColor(6, 4)
    assert (c.red(), c.green(), c.blue()) == tuple(original[4, 6])
    assert to_qimage(np.zeros((3, 4), np.uint8)).format() == QImage.Format.Format_Grayscale8
    with pytest.raises(ValueError):
        to_qimage(np.zeros((3, 4, 3), np.float32))


def test_blend_boundaries_and_label_colors_by_hand():
    image = np.full((2, 2, 3), 100, np.uint8)
    overlay = np.full((2, 2, 3), 200, np.uint8)
    mask = np.array([[True, False], [False, False]])
    out = blend(image, overlay, mask, alpha=0.25)
    assert out[0, 0, 0] == 125 and out[1, 1, 0] == 100
    labels = np.array([[0, 0, 3], [0, 0, 3]])
    assert boundaries(labels).tolist() == [[False, True, False], [False, True, False]]
    colors = label_colors(labels)
    assert (colors[labels == 0] == 0).all() and (colors[0, 2] == colors[1, 2]).all() and colors[0, 2].any()


def test_thumbnail_grid_appends_and_steps(qtbot):
    grid = ThumbnailGrid(32)
    qtbot.addWidget(grid)
    image = to_qimage(np.zeros((8, 8, 3), np.uint8))
    grid.thumbnails.set_items([Thumbnail(image, "a")])
    grid.thumbnails.append_items([Thumbnail(image, "b"), Thumbnail(image, "c")])
    assert grid.thumbnails.rowCount() == 3
    rows = []
    grid.current_changed.connect(rows.append)
    for offset in (1, 1, 5, -1):
        grid.step(offset)
    assert rows == [0, 1, 2, 1]
    assert grid.thumbnails.item(1).caption == "b"


def test_unit_table_sorts_filters_and_keeps_the_selection(qtbot):
    rng = np.random.default_rng(0)
    rows = [(u, f"c{rng.integers(5)}" if u % 7 else None, float(rng.random()) if u % 5 else None, int(rng.integers(4)))
            for u in range(300)]
    table = UnitTable()
    qtbot.addWidget(table)
    table.show()
    table.set_rows(("unit", "label", "iou", "len"), rows)
    seen = []
    table.unit_changed.connect(seen.append)
    shown = lambda c: [table.value(r, c) for r in range(table.rowCount())]  # noqa: E731
    for c, key in ((1, str.lower), (2, None), (3, None)):
        for order in (Qt.SortOrder.AscendingOrder, Qt.SortOrder.DescendingOrder):
            table.sortByColumn(c, order)
            values = shown(c)
            present = [v for v in values if v is not None]
            assert present == sorted(present, key=key, reverse=order == Qt.SortOrder.DescendingOrder)
            assert values[len(present):] == [None] * (len(values) - len(present))  # missing last, both ways
            assert sorted(shown(0)) == list(range(300))
    assert table.select_unit(42) and seen == [42]
    table.show_only({u for u in range(300) if u % 2 == 0})
    assert table.rowCount() == 150 and set(table.visible_units()) == set(range(0, 300, 2))
    assert table.value(table.currentIndex().row(), 0) == 42 and table.current_unit() == 42
    table.step(1)
    assert seen[-1] == table.visible_units()[table.visible_units().index(42) + 1]
    table.set_rows(("unit", "label", "iou", "len"), rows[:100])  # new rows: sort and filter stay
    assert table.rowCount() == 50 and table.current_unit() == seen[-1]
    assert not table.select_unit(43) and len(table.units()) == 100


def test_unit_table_takes_rows_that_arrive_without_a_reset(qtbot):
    columns = ("unit", "iou")
    rows = [(u, u / 10) for u in (5, 1, 7)]
    table = UnitTable()
    qtbot.addWidget(table)
    table.show()
    table.set_rows(columns, rows)
    table.sortByColumn(1, Qt.SortOrder.DescendingOrder)
    assert table.visible_units() == [7, 5, 1] and table.select_unit(5)
    resets, inserted = [], []
    table.model().modelReset.connect(lambda: resets.append(1))
    table.model().rowsInserted.connect(lambda _parent, first, last: inserted.append((first, last)))
    table.set_rows(columns, [*rows, (9, 0.9), (0, 0.0)], resort=False)  # a partial result: two more units
    # each at its place in the sort (issue 45: streamed rows were listed by arrival)
    assert resets == [] and inserted == [(0, 0), (4, 4)] and table.visible_units() == [9, 7, 5, 1, 0]
    assert table.current_unit() == 5 and table.value(table.currentIndex().row(), 0) == 5
    table.show_only({7, 5, 1, 9, 0})  # the same filter again: nothing moves
    table.set_rows(columns, [(5, 0.75), (1, 0.1), (7, 0.7), (9, 0.9), (0, 0.0)], resort=False)  # a row changed
    assert resets == [1] and table.visible_units() == [9, 7, 5, 1, 0]  # (it stays until the whole result)
    table.set_rows(columns, [(5, 0.75), (1, 0.1), (7, 0.7), (9, 0.9), (0, 0.0)], resort=True)  # the whole result
    assert table.visible_units() == [9, 5, 7, 1, 0] and table.current_unit() == 5


def test_unit_table_has_no_current_unit_after_a_clear(qtbot):
    """Cleared (another layer on its way), the table forgets its unit: highlighting the same unit among the next
    rows says so, and a view waiting on the signal is not left empty (layer4 -> layer4.conv -> layer4, issue 45)."""
    table = UnitTable()
    qtbot.addWidget(table)
    table.show()
    table.set_rows(("unit", "iou"), [(u, u / 10) for u in range(5)])
    seen = []
    table.unit_changed.connect(seen.append)
    assert table.select_unit(3) and seen == [3]
    table.set_rows(("unit", "iou"), [])
    assert table.current_unit() == -1 and table.selected_units() == [] and not table.currentIndex().isValid()
    table.set_rows(("unit", "iou"), [(u, u / 5) for u in range(5)])
    assert table.current_unit() == -1 and seen == [3]  # nothing highlighted until asked
    assert table.select_unit(3) and seen == [3, 3] and table.current_unit() == 3


def test_grouped_bars_stand_side_by_side_within_each_x(qtbot):
    import pyqtgraph as pg

    chart = GroupedBars("lengths", "units", "length", colors=("#111111", "#222222"))
    qtbot.addWidget(chart)
    chart.set_series({"a": ([1, 2, 3], [5, 0, 2]), "b": ([1, 2, 3], [1, 4, 0])})
    a, b = sorted((i for i in chart.plot.items() if isinstance(i, pg.BarGraphItem)), key=lambda i: i.opts["x"][0])
    assert np.allclose(a.opts["x"], [0.8, 1.8, 2.8]) and np.allclose(b.opts["x"], [1.2, 2.2, 3.2])
    assert list(a.opts["height"]) == [5, 0, 2] and a.opts["width"] == pytest.approx(0.4)
    assert [name.text for _sample, name in chart.legend.items] == ["a", "b"]
    chart.set_series({"a": ([1], [3])})  # redrawn, not added to
    assert len([i for i in chart.plot.items() if isinstance(i, pg.BarGraphItem)]) == 1


def test_trial_grid_badges_picks(qtbot):
    grid = TrialGrid(40)
    qtbot.addWidget(grid)
    image = to_qimage(np.zeros((8, 8, 3), np.uint8))
    grid.set_trial((image, "q"), [(image, f"r{k}") for k in range(8)], [5, 2])
    captions = [cell.caption.text() for cell in grid._cells]
    assert captions[8] == "query · q"
    assert captions[5] == "pick 1 · r5" and captions[2] == "pick 2 · r2" and captions[0] == "r0"
    with pytest.raises(ValueError):
        grid.set_trial((image, "q"), [(image, "r")] * 9, [])


def test_embedding_view_finds_the_point_under_the_pointer(qtbot):
    """Hover and click go to the nearest point within a few screen pixels (one vectorised search, however many
    points), and nowhere when the pointer is between points; every spot is drawn in the item's one style."""
    view = EmbeddingView()
    qtbot.addWidget(view)
    view.resize(400, 400)
    view.show()
    xy = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.5, 0.5]])
    view.set_points(xy, "five")
    qtbot.waitExposed(view)
    rects = view.points.data["sourceRect"]
    assert (rects["w"] > 0).all() and len(set(map(tuple, rects.tolist()))) == 1
    vb = view.plot.getPlotItem().vb
    hovered, clicked = [], []
    view.hovered.connect(hovered.append)
    view.clicked.connect(clicked.append)
    for x, y in ((1.0, 1.0), (0.99, 1.01), (0.75, 0.75), (0.5, 0.5)):
        view._moved(vb.mapViewToScene(QPointF(x, y)))
    assert hovered == [3, -1, 4] and len(view.hover_mark.data) == 1
    assert view.point_at(vb.mapViewToScene(QPointF(0.0, 1.0))) == 2
    assert view.point_at(QPointF(-50, -50)) == -1
    view._clicked(SimpleNamespace(scenePos=lambda: vb.mapViewToScene(QPointF(1.0, 0.0))))
    view._clicked(SimpleNamespace(scenePos=lambda: vb.mapViewToScene(QPointF(0.3, 0.6))))
    assert clicked == [1]


def test_trial_list_sorts_by_query_name_and_measures_only_rows_on_screen(qtbot):
    """Sorting by query orders by the name (equal names tie, broken by trial number) as a sort of the names would;
    the columns are sized from the rows on screen, not from a thousand more at every reset."""
    from probescope.jobs.similarity.trials import caption_ranks

    query = np.array([3, 1, 3, 2, 1, 4, 2])
    name_of = {1: "b", 2: "a", 3: "b", 4: "c"}  # stimuli 1 and 3 share a name
    names = [name_of[q] for q in query]
    captions, rank = caption_ranks(query, name_of.__getitem__)
    assert captions == names
    columns = TrialColumns(np.zeros(7), np.full(7, np.nan), np.full(7, np.nan), query, names, np.ones(7, bool), rank)
    view = TrialList()
    qtbot.addWidget(view)
    view.list_model.set_trials(columns)
    assert view.horizontalHeader().resizeContentsPrecision() == 0
    view.sortByColumn(6, Qt.SortOrder.AscendingOrder)
    want = np.lexsort((np.arange(7), np.unique(np.array(names, dtype=object), return_inverse=True)[1]))
    assert view.list_model.rows.tolist() == want.tolist() == [3, 6, 0, 1, 2, 4, 5]
    view.sortByColumn(6, Qt.SortOrder.DescendingOrder)
    assert [names[t] for t in view.list_model.rows] == ["c", "b", "b", "b", "b", "a", "a"]
    # hidden (another workspace on screen), the columns are not measured: Qt would measure every row
    calls = []
    original = view.list_model.data
    view.list_model.data = lambda index, role=Qt.ItemDataRole.DisplayRole: calls.append(1) or original(index, role)
    mode = view.horizontalHeader().sectionResizeMode
    assert mode(0) == QHeaderView.ResizeMode.Interactive
    view.select_trial(4)
    assert not calls
    view.show()
    # every column, the query's too, takes its contents' width: never what a narrow pane leaves it (issue 45 §3)
    assert mode(0) == QHeaderView.ResizeMode.ResizeToContents and not view.horizontalHeader().stretchLastSection()
    view.select_trial(2)
    assert calls  # (the count above sees the view's reads)


def test_trial_list_filters_and_sorts_as_a_stable_sort_of_the_rows_listed(qtbot):
    """Every column, both orders, masks changing and agreement coming after the sort: the rows listed are those of
    the mask, ordered as a stable sort of them in trial order (the list keeps one order of all trials per sort)."""
    from probescope.widgets.similarity.tables import AGREE, TRIAL_COLUMNS

    rng = np.random.default_rng(3)
    m = 400
    grade = np.where(rng.random(m) < 0.2, np.nan, rng.integers(0, 3, m) / 2)
    catch = np.where(rng.random(m) < 0.7, np.nan, rng.integers(0, 3, m) / 2)
    query = rng.integers(0, 30, m)
    columns = TrialColumns(rng.integers(-1, 5, m), grade, catch, query, [str(q) for q in query], rng.random(m) < 0.8,
                           query.copy())
    view = TrialList()
    qtbot.addWidget(view)
    model = view.list_model
    model.set_trials(columns)

    def expected(mask, column, order):
        rows = np.nonzero(mask)[0]
        key = model.sort_key(column)[rows]
        return rows[np.argsort(-key if order == Qt.SortOrder.DescendingOrder else key, kind="stable")]

    for column in range(len(TRIAL_COLUMNS)):
        for order in (Qt.SortOrder.AscendingOrder, Qt.SortOrder.DescendingOrder):
            mask = rng.random(m) < 0.6
            model.show_rows(mask)
            model.sort(column, order)
            assert model.rows.tolist() == expected(mask, column, order).tolist()
            mask = rng.random(m) < 0.3
            model.show_rows(mask)
            assert model.rows.tolist() == expected(mask, column, order).tolist()
    model.sort(AGREE, Qt.SortOrder.DescendingOrder)  # sorted by agreement, then the scores come and change
    model.set_agreement(rng.integers(0, 5, m), np.full(m, 4))
    model.show_rows(mask)
    assert model.rows.tolist() == expected(mask, AGREE, Qt.SortOrder.DescendingOrder).tolist()
    model.set_agreement(rng.integers(0, 5, m), np.full(m, 4))
    model.show_rows(mask)
    assert model.rows.tolist() == expected(mask, AGREE, Qt.SortOrder.DescendingOrder).tolist()


def test_gallery_grid_lays_a_new_order_out_in_batches(qtbot):
    """A new order of many samples is laid out a batch of cells per event-loop turn (no single long turn), and a
    cell far down is still selected and scrolled to."""
    from PySide6.QtWidgets import QListView

    n = 12_000
    grid = GalleryGrid(48)
    qtbot.addWidget(grid)
    grid.resize(400, 300)
    grid.show()
    top = np.zeros((n, 3), np.int64)
    grid.thumbnails.set_items(np.arange(n), top, np.full((n, 3), 1 / 3), ["a"])
    grid.thumbnails.set_items(np.arange(n)[::-1].copy(), top, np.full((n, 3), 1 / 3), ["a"])
    assert grid.layoutMode() == QListView.LayoutMode.Batched and grid.batchSize() < n
    assert grid.select_image(0)
    qtbot.waitUntil(lambda: grid.visualRect(grid.currentIndex()).intersects(grid.viewport().rect()), timeout=5000)
    assert grid.current_image() == 0 and grid.visible_rows().stop == n


def test_notification_and_progress(qtbot):
    note = Notification()
    qtbot.addWidget(note)
    note.show_message("bad.pt: not a model", "Traceback ...")
    assert note.isVisible() and not note.details.isVisible() and not note.details_button.isHidden()
    note.details_button.click()
    assert note.details.isVisible() and note.details.toPlainText() == "Traceback ..."
    note.show_message("plain message")
    assert note.details_button.isHidden()
    with qtbot.waitSignal(note.dismissed):
        note.close_button.click()
    assert not note.isVisible()

    progress = TaskProgress()
    qtbot.addWidget(progress)
    progress.show_progress("reading", 0.25)
    assert progress.bar.value() == 250
    progress.show_progress("busy", None)
    assert progress.bar.maximum() == 0
    with qtbot.waitSignal(progress.cancel_requested):
        progress.cancel_button.click()


def test_command_palette_filters_and_runs(qtbot):
    assert matches("exp fig", "Export Figure…") and not matches("open gallery", "Open Model")
    ran = []
    actions = [QAction("&Open Model…"), QAction("&Export Figure…"), QAction("Gallery Workspace")]
    actions[1].triggered.connect(lambda: ran.append("export"))
    palette = CommandPalette(actions)
    qtbot.addWidget(palette)
    assert palette.visible_commands() == ["&Open Model…", "&Export Figure…", "Gallery Workspace"]
    palette.search.setText("fig")
    assert palette.visible_commands() == ["&Export Figure…"]
    palette.run_current()
    assert ran == ["export"]


def test_task_panel_lists_the_first_tasks_and_counts_the_rest(qtbot):
    """Hundreds of queued image tasks make a short table (each redraw rebuilt a row of widgets per task)."""
    from probescope.widgets.task_panel import MAX_ROWS, TaskPanel

    panel = TaskPanel()
    qtbot.addWidget(panel)
    rows = [(k, f"task {k}", f"stage {k}", None, "", "", "") for k in range(MAX_ROWS + 60)]
    panel.show_rows(rows)
    assert panel.table.rowCount() == MAX_ROWS + 1 and panel.table.item(MAX_ROWS, 0).text() == "… and 60 more"
    assert panel.stages() == [f"stage {k}" for k in range(MAX_ROWS)]
    panel.show_rows(rows[:2])
    assert panel.table.rowCount() == 2 and panel.stages() == ["stage 0", "stage 1"]


def test_formulas_are_never_cut_in_the_unit_table_and_the_trace(qtbot):
    """Identifiers readable (issue 45 §3): in a narrow pane the unit table's formula column and the beam trace's
    formula column are as wide as their longest formula (the view scrolls sideways); numbers stay compact."""
    from probescope.widgets.dissection.table import MAX_COLUMN_WIDTH
    from probescope.widgets.dissection.trace import TraceEntry, TraceStep, TraceTree

    long = "((lake-s AND NOT blue-c) AND NOT (sky OR water-s)) OR harbor-s"
    table = UnitTable()
    qtbot.addWidget(table)
    table.resize(300, 200)
    table.set_rows(("unit", "compositional", "comp IoU"), [(1, long, 0.123456789), (2, "sky", 0.5)])
    text = table.fontMetrics().horizontalAdvance(long)
    assert table.columnWidth(1) >= text and table.columnWidth(2) <= MAX_COLUMN_WIDTH
    tree = TraceTree()
    qtbot.addWidget(tree)
    tree.resize(300, 200)
    tree.show()
    tree.set_steps([TraceStep("length ≤ 3", (TraceEntry(long, 0.12, 0.5), TraceEntry("sky", 0.1, 0.4)))])
    qtbot.waitUntil(lambda: tree.columnWidth(0) >= tree.fontMetrics().horizontalAdvance(long), timeout=5000)


def test_model_names_in_the_similarity_table_are_never_cut(qtbot):
    """'demo · layer4' and 'demo · layer4.conv' must read differently however narrow the pane (issue 45 §3: both
    showed as 'demo…'): the name column takes its width and the table scrolls."""
    from probescope.widgets.similarity.tables import ModelRow, ModelTable

    table = ModelTable()
    qtbot.addWidget(table)
    table.resize(160, 200)
    table.show()
    names = ["demo · layer4", "demo · layer4.conv"]
    table.set_rows([ModelRow(n, 0.5, 0.5, 0.5, None, None) for n in names])
    widest = max(table.fontMetrics().horizontalAdvance(n) for n in names)
    qtbot.waitUntil(lambda: table.columnWidth(0) >= widest, timeout=5000)


def test_the_histogram_never_keeps_another_units_axes(qtbot):
    """A layer switch (clear) or a unit whose counts are still computed (its threshold alone) shows none of the
    previous unit's axis range (issue 45 §2: layer4.conv's range stayed until a row was clicked)."""
    from probescope.widgets.dissection.plots import ActivationHistogram

    chart = ActivationHistogram()
    qtbot.addWidget(chart)
    chart.resize(300, 200)
    chart.set_histogram(np.linspace(0, 100, 51), np.arange(50), 80.0)
    assert chart.plot.viewRange()[0][1] >= 100
    chart.show_threshold(3.0)
    low, high = chart.plot.viewRange()[0]
    assert low <= 3.0 <= high < 10
    chart.set_histogram(np.linspace(0, 100, 51), np.arange(50), 80.0)
    chart.clear()
    assert chart.plot.viewRange()[0][1] < 10
