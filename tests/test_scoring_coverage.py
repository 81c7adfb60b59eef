"""Coverage per class: shares, the two-proportion z-score, statuses and sorting, worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from probescope.core.errors import InputError
from probescope.core.scoring.coverage import class_coverage


def test_statuses_and_shares():
    real = np.array([100, 100, 100, 100, 0, 0])
    gen = np.array([100, 10, 190, 0, 5, 0])
    cov = class_coverage(real, gen, ("a", "b", "c", "d", "e", "f"))
    np.testing.assert_allclose(cov.real_share, [0.25, 0.25, 0.25, 0.25, 0, 0])
    np.testing.assert_allclose(cov.generated_share, np.array([100, 10, 190, 0, 5, 0]) / 305)
    assert cov.status.tolist() == ["ok", "under", "over", "missing", "extra", "absent"]
    assert cov.total_variation == pytest.approx(0.5 * np.abs(cov.generated_share - cov.real_share).sum())
    # class b by hand: pooled share 110/705, se = sqrt(p (1-p) (1/305 + 1/400))
    p = 110 / 705
    z = (10 / 305 - 0.25) / math.sqrt(p * (1 - p) * (1 / 305 + 1 / 400))
    assert cov.z[1] == pytest.approx(z, rel=1e-12)
    assert cov.ratio[1] == pytest.approx((10 / 305) / 0.25) and math.isinf(cov.ratio[4]) and math.isnan(cov.ratio[5])


def test_sorting_and_rows():
    cov = class_coverage(np.array([10, 10, 10]), np.array([5, 20, 0]), ("x", "y", "z"))
    assert cov.order("ratio").tolist() == [2, 0, 1]
    assert cov.order("ratio", descending=True).tolist() == [1, 0, 2]
    assert cov.order("generated").tolist() == [2, 0, 1] and cov.order("class").tolist() == [0, 1, 2]
    rows = cov.rows("z")
    assert [r["name"] for r in rows] == ["z", "x", "y"] and rows[0]["status"] == "missing"
    with pytest.raises(InputError, match="sorts by one of"):
        cov.order("size")


def test_nan_ratios_sort_last():
    cov = class_coverage(np.array([0, 4, 4]), np.array([0, 1, 8]))
    assert cov.order("ratio").tolist() == [1, 2, 0] and cov.order("ratio", descending=True).tolist() == [2, 1, 0]


def test_mismatched_counts():
    with pytest.raises(InputError, match="differ in shape"):
        class_coverage(np.zeros(3), np.zeros(4))
    assert class_coverage(np.ones(2), np.ones(2), ("only one name",)).class_names is None
