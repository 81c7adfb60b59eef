"""Results files, resume after cancel, input checks, and the accuracy-correlation experiment."""

import csv
import io

import numpy as np
import pytest

from oracles.synthetic_broden import SyntheticBroden, SyntheticSpec, planted_formulas, synthetic_activations
from probescope.core.dissection.correlation import (
    accuracy_correlation,
    correct_predictions,
    scene_truth,
    write_correlation_csv,
)
from probescope.core.dissection.engine import add_units, dissect, layer_result
from probescope.core.dissection.formula import parse_formula
from probescope.core.dissection.labels import LabelStore
from probescope.core.dissection.results import DissectionResult
from probescope.core.dissection.settings import DissectionSettings
from probescope.core.errors import InputError
from probescope.core.tasks import Cancelled

MODES = ("iou", "da-select", "da-stop")


@pytest.fixture(scope="module")
def problem():
    ds = SyntheticBroden(SyntheticSpec(n_images=30, seg_size=16, feat_size=4, n_objects=15, n_parts=5, n_scenes=4))
    act = synthetic_activations(ds, planted_formulas(ds, 6), noise=0.2)
    return ds, LabelStore.build(ds), act


def test_results_round_trip_and_tally(problem, tmp_path):
    ds, store, act = problem
    settings = DissectionSettings(quantile=0.05, searches=MODES, sweep_length=4, min_samples=2)
    result = dissect(store, act, settings, dataset_info={"name": "syn"}, model_info={"layer": "x"})
    path = tmp_path / "dissection.json"
    result.save(path)
    back = DissectionResult.load(path)
    assert back.to_json() == result.to_json() and back.complete
    names = {v: k for k, v in back.names.items()}
    for r in back.units.values():
        for e in [r.netdissect, *r.explanations.values(), *r.sweep, *(x for beam in r.trace for x in beam)]:
            assert parse_formula(e.label, names) == e.formula
    rows = list(csv.DictReader(io.StringIO(result.tally_csv(settings.searches))))
    assert list(rows[0]) == ["unit", "threshold", "netdissect_label", "netdissect_category", "netdissect_iou",
                             "netdissect_da", "comp_label", "comp_length", "comp_iou", "comp_da", "daselect_label",
                             "daselect_length", "daselect_iou", "daselect_da", "dastop_label", "dastop_length",
                             "dastop_iou", "dastop_da"]
    assert [int(r["unit"]) for r in rows] == list(range(6))
    assert float(rows[2]["threshold"]) == result.units[2].threshold
    assert rows[0]["netdissect_category"] == store.categories[result.units[0].netdissect.formula.atoms[0]]


def test_optimal_search_in_results_and_tally(problem, tmp_path):
    ds, store, act = problem
    settings = DissectionSettings(quantile=0.05, min_samples=2, searches=("iou", "optimal"))
    result = dissect(store, act, settings)
    for r in result.units.values():
        assert r.optimality_gap == r.explanations["optimal"].iou - r.explanations["iou"].iou >= 0
        assert r.optimal_evaluated > 0
    rows = list(csv.DictReader(io.StringIO(result.tally_csv(settings.searches))))
    assert list(rows[0])[-5:] == ["optimal_label", "optimal_length", "optimal_iou", "optimal_da", "optimality_gap"]
    assert float(rows[1]["optimality_gap"]) == result.units[1].optimality_gap
    result.save(tmp_path / "d.json")
    assert DissectionResult.load(tmp_path / "d.json").to_json() == result.to_json()
    # a file written before these fields existed still loads (no gap, nothing evaluated)
    doc = dissect(store, act, DissectionSettings(quantile=0.05, min_samples=2)).to_json()
    for u in doc["units"]:
        del u["optimality_gap"], u["optimal_evaluated"]
    old = DissectionResult.from_json(doc)
    assert all(r.optimality_gap is None and r.optimal_evaluated is None for r in old.units.values())
    # its settings say how the engine of its time searched: duplicates kept, IoU over the whole dataset
    del doc["settings"]["beam_dedupe"], doc["settings"]["iou_scope"]
    settings = DissectionSettings.from_mapping(DissectionResult.from_json(doc).settings)
    assert (settings.beam_dedupe, settings.iou_scope) == ("none", "dataset")


def test_every_unit_is_reported_and_resume_skips_finished_units(problem):
    ds, store, act = problem
    settings = DissectionSettings(quantile=0.05, sweep_length=0)
    saved = []
    calls = iter(range(100))
    result, todo = layer_result(store, act, settings, None, None, None, None, None)
    with pytest.raises(Cancelled):
        for unit in add_units(result, todo, store, act, settings, cancel=lambda: next(calls) >= 3):
            saved.append((unit, result.to_json()))
    assert [u for u, _ in saved] == [0, 1, 2]
    partial = DissectionResult.from_json(saved[-1][1])
    assert sorted(partial.units) == [0, 1, 2] and not partial.complete
    progress = []
    full = dissect(store, act, settings, previous=partial, progress=lambda f, m: progress.append(m))
    assert full.complete and sorted(full.units) == list(range(6))
    assert sum(m.startswith("unit ") for m in progress) == 3
    assert full.to_json() == dissect(store, act, settings).to_json()
    # other settings: nothing is reused
    other = dissect(store, act, DissectionSettings(quantile=0.05, sweep_length=0, beam_size=2), units=[0],
                    previous=partial)
    assert len(other.units[0].trace[0]) == 2 and len(partial.units[0].trace[0]) == 5


def test_bad_input_is_reported(problem):
    ds, store, act = problem
    with pytest.raises(InputError, match="30 rows"):
        dissect(store, act[:-1], DissectionSettings(quantile=0.05))
    with pytest.raises(InputError, match="out of range"):
        dissect(store, act, DissectionSettings(quantile=0.05), units=[6])
    bad = act.copy()
    bad[3, 4, 0, 0] = np.nan
    with pytest.raises(InputError, match="unit 4 has non-finite"):
        dissect(store, bad, DissectionSettings(quantile=0.05, sweep_length=0), units=[4])
    with pytest.raises(InputError, match="unknown search"):
        DissectionSettings(searches=("best",))


def test_accuracy_sets_and_correlation(problem, tmp_path):
    ds, store, act = problem
    classes = [f"scene{k}" for k in range(4)]
    truth = scene_truth(store, classes)
    expected = np.array([int(ds.image_labels(i)[0][1]) - ds.first["scene"] if ds.image_labels(i) else -1
                         for i in range(ds.n_images)])
    assert (truth == expected).all()
    predictions = np.where(np.arange(ds.n_images) % 3 == 0, 0, truth)
    correct = correct_predictions(predictions, truth)
    assert correct[truth < 0].tolist() == [-1] * int((truth < 0).sum())
    result = dissect(store, act, DissectionSettings(quantile=0.05, searches=MODES, sweep_length=3), correct=correct)
    for _u, r in result.units.items():
        acc, n = r.accuracy["netdissect"]["fired"]
        known = [i for i in range(ds.n_images) if correct[i] >= 0]
        assert n <= len(known) and (acc is None or 0 <= acc <= 1)
        assert set(r.accuracy) == {"netdissect", *MODES, "length-1", "length-2", "length-3"}
    rows = accuracy_correlation(result)
    assert {(r["method"], r["set"]) for r in rows} >= {("netdissect", "fired"), ("da-stop", "intersection")}
    for row in rows:
        m, s = row["method"], row["set"]
        es = [u.netdissect if m == "netdissect" else (u.sweep[int(m[7:]) - 1] if m.startswith("length-")
              else u.explanations[m]) for u in result.units.values()]
        acc = [u.accuracy[m][s][0] for u in result.units.values()]
        keep = [k for k, a in enumerate(acc) if a is not None]
        x, y = np.array([es[k].da for k in keep]), np.array([acc[k] for k in keep])
        if row["pearson_da"] is not None:
            assert row["pearson_da"] == pytest.approx(np.corrcoef(x, y)[0, 1])
    write_correlation_csv(tmp_path / "c.csv", rows)
    assert (tmp_path / "c.csv").read_text().startswith("method,set,pearson_iou,pearson_da,units,mean_accuracy")


def test_accuracy_sets_by_brute_force(problem):
    ds, store, act = problem
    from oracles.mask_reference import MaskReference

    correct = (np.arange(ds.n_images) % 2).astype(np.int8)
    correct[::7] = -1
    result = dissect(store, act, DissectionSettings(quantile=0.05, sweep_length=0), units=[1, 2], correct=correct)
    ref = MaskReference(ds, min_samples=5)
    img = np.concatenate([np.full(256, i) for i in range(ds.n_images)])
    for u in (1, 2):
        r = result.units[u]
        _, mask = ref.unit_mask(act[:, u], 0.05)
        g = ref.formula_mask(r.explanations["iou"].formula)
        fired, present = set(img[mask]), set(img[g])
        for name, images in [("fired", fired), ("explanation", present), ("union", fired | present),
                             ("intersection", fired & present)]:
            c = [correct[i] for i in sorted(images) if correct[i] >= 0]
            assert r.accuracy["iou"][name] == [float(np.mean(c)) if c else None, len(c)]


def test_unit_blocks_read_from_a_memory_mapped_layer(tmp_path):
    """File reads from a memmap give what indexing gives: consecutive units, others, views of the memmap, float64."""
    from probescope.core.dissection.blocks import read_units, release_pages

    act = np.random.default_rng(0).standard_normal((7, 6, 2, 3))
    for dtype in (np.float32, np.float64):
        np.save(tmp_path / "a.npy", act.astype(dtype))
        mapped = np.load(tmp_path / "a.npy", mmap_mode="r")
        for view, units in ((mapped, [2, 3, 4]), (mapped, [0, 5]), (mapped[2:], [1, 2]), (mapped, [5])):
            block = read_units(view, units)
            assert block.dtype == np.float32 and (block == np.asarray(view)[:, units].astype(np.float32)).all()
        release_pages(mapped[1:])
        assert (read_units(mapped, range(6)) == act.astype(dtype).astype(np.float32)).all()
