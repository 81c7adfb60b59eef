"""Sparse, broad and dead units: the engine answers exactly what it answered before it counted broad masks through
their complement (the recorded answers in tests/data, see tests/oracles/unit_kinds.py)."""

import json

import pytest

from oracles.unit_kinds import GOLDEN, KINDS, answers, fingerprint, unit_kinds_problem


@pytest.fixture(scope="module")
def problem(tmp_path_factory):
    _, store, act, correct = unit_kinds_problem(tmp_path_factory.mktemp("kinds"))
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))
    assert fingerprint(store, act) == golden["inputs"], "the generated inputs changed: the recorded answers are of " \
        "other inputs (regenerate them with the engine they were recorded with)"
    return store, act, correct, golden


def recorded_fields(unit: dict, golden_unit: dict) -> dict:
    """A unit's answers restricted to the fields the recorded answers hold (newer fields are checked elsewhere)."""
    return {k: unit[k] for k in golden_unit}


def test_the_units_are_of_the_kinds_they_claim(problem):
    store, act, correct, golden = problem
    share = dict(zip(range(len(KINDS)), golden["mask_share"]))
    assert all(share[u] < 0.01 for u, k in enumerate(KINDS) if k == "sparse")
    assert all(0.5 < share[u] < 0.95 for u, k in enumerate(KINDS) if k == "broad")
    assert all(share[u] == 1.0 for u, k in enumerate(KINDS) if k == "dead")
    assert min(x["mask_pixels"] for x in golden["answers"]["quantile 0.6"]) > 0.5 * store.n_pixels  # all broad


def test_every_unit_answers_as_recorded(problem):
    store, act, correct, golden = problem
    found = answers(store, act, correct)
    for config, units in golden["answers"].items():
        for unit, recorded in zip(found[config], units):
            assert recorded_fields(unit, recorded) == recorded, (config, KINDS[unit["unit"]], unit["unit"])


def test_thresholds_at_a_tie_are_told(problem):
    """Each unit records the share of its activations equal to T (compared in float64): dead units and broad ones
    sit at a tie, sparse ones do not."""
    import numpy as np

    from probescope.core.dissection.engine import dissect
    from probescope.core.dissection.settings import DissectionSettings

    store, act, correct, golden = problem
    result = dissect(store, act, DissectionSettings(sweep_length=0))
    for u, kind in enumerate(KINDS):
        r = result.units[u]
        assert r.threshold_ties == np.mean(act[:, u].astype(np.float64) == r.threshold), u
        assert r.at_tie(0.005) == (kind != "sparse"), (u, kind)
