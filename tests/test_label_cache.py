"""The label store kept between runs: read back equal to a fresh build, never used when stale or damaged."""

from __future__ import annotations

import numpy as np
import pytest

from oracles.synthetic_broden import SyntheticBroden, SyntheticSpec, write_synthetic_broden
from probescope.core.data.broden import BrodenDataset
from probescope.core.dissection import label_cache
from probescope.core.dissection.labels import LabelStore


@pytest.fixture
def dataset(tmp_path):
    spec = SyntheticSpec(n_images=12, seg_size=10, feat_size=2, n_objects=8, n_parts=3, n_scenes=3)
    return BrodenDataset.open(write_synthetic_broden(tmp_path / "broden", SyntheticBroden(spec)))


def same(a: LabelStore, b: LabelStore) -> bool:
    return (all(np.array_equal(getattr(a, k), getattr(b, k)) for k in
                ("seg_shapes", "pixel_region", "image_regions", "region_labels", "region_pixels", "label_totals",
                 "label_images"))
            and (a.image_labels != b.image_labels).nnz == 0 and a.names == b.names and a.categories == b.categories)


def test_second_open_reads_the_cache_and_equals_a_build(dataset, tmp_path, monkeypatch):
    built = label_cache.label_store(dataset, tmp_path / "cache")
    assert same(built, LabelStore.build(dataset))
    monkeypatch.setattr(LabelStore, "build", classmethod(lambda *a, **k: pytest.fail("label maps read again")))
    messages = []
    again = label_cache.label_store(dataset, tmp_path / "cache", progress=lambda f, m: messages.append(m))
    assert same(again, built) and messages == ["label maps read from the cache"]
    assert isinstance(again.pixel_region, np.memmap)  # the largest array stays on disk


def test_a_damaged_or_stale_copy_is_rebuilt(dataset, tmp_path):
    cache = tmp_path / "cache"
    built = label_cache.label_store(dataset, cache)
    [folder] = (cache / label_cache.SUBDIR).iterdir()
    path = folder / "region_pixels.npy"
    data = bytearray(path.read_bytes())
    data[-1] ^= 0xFF  # one byte of the last region's pixel count
    path.write_bytes(bytes(data))
    assert label_cache._load(folder, {"format": label_cache.FORMAT}) is None
    rebuilt = label_cache.label_store(dataset, cache)
    assert same(rebuilt, built)
    # another index file (rows changed): another identity, another copy
    index = dataset.index_path
    index.write_text(index.read_text() + "\n", encoding="utf-8")
    label_cache.label_store(BrodenDataset.open(dataset.root), cache)
    assert len(list((cache / label_cache.SUBDIR).iterdir())) == 2


def test_an_unwritable_cache_costs_nothing_but_the_read(dataset, tmp_path):
    blocked = tmp_path / "file"
    blocked.write_text("not a folder")
    assert same(label_cache.label_store(dataset, blocked), LabelStore.build(dataset))
