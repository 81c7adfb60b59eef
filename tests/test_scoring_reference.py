"""Reference sets: folders, arrays, Broden datasets and mu/sigma files; the cache per (classifier, content)."""

from __future__ import annotations

import dataclasses
import shutil

import numpy as np
import pytest
from PIL import Image

from probescope.core.errors import InputError
from probescope.core.scoring.classifiers import load_classifier
from probescope.core.scoring.frechet import gaussian_stats
from probescope.core.scoring.pipeline import embed_source
from probescope.core.scoring.reference import BrodenImageSource, content_hash, load_reference
from probescope.core.scoring.sources import ArraySource, open_source


@pytest.fixture
def counting(small_world):
    """The small demo-architecture classifier, counting the batches it embeds."""
    classifier = load_classifier(small_world["model"])
    calls = []

    def embedder(x):
        calls.append(len(x))
        return classifier.embedder(x)

    return dataclasses.replace(classifier, embedder=embedder), calls


def write_folder(folder, images):
    folder.mkdir()
    for k, im in enumerate(images):
        Image.fromarray(im).save(folder / f"{k:03d}.png")


def images(seed: int, n: int = 9) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (n, 40, 40, 3), dtype=np.uint8)


def test_folder_reference_is_built_once_and_found_by_content(tmp_path, counting, isolated_cache):
    classifier, calls = counting
    write_folder(tmp_path / "real", images(0))
    ref = load_reference(tmp_path / "real", classifier, batch_size=4)
    features, logits = embed_source(open_source(tmp_path / "real"), classifier, 4)
    np.testing.assert_array_equal(ref.features, features)
    np.testing.assert_allclose(ref.stats.sigma, gaussian_stats(features).sigma, rtol=1e-12, atol=1e-15)
    assert ref.class_counts.tolist() == np.bincount(logits.argmax(1), minlength=logits.shape[1]).tolist()
    assert ref.n == 9 and ref.cache_path.is_file()
    calls.clear()
    shutil.copytree(tmp_path / "real", tmp_path / "renamed")
    again = load_reference(tmp_path / "renamed", classifier)  # same content elsewhere: from the cache
    assert calls == [] and again.n == 9
    np.testing.assert_array_equal(again.features, ref.features)
    Image.fromarray(images(1, 1)[0]).save(tmp_path / "renamed" / "000.png")  # one image changed: rebuilt
    load_reference(tmp_path / "renamed", classifier)
    assert sum(calls) == 9


def test_radii_are_cached_beside_the_reference(tmp_path, counting, isolated_cache):
    classifier, _ = counting
    np.savez(tmp_path / "real.npz", images=images(2))
    ref = load_reference(tmp_path / "real.npz", classifier)
    radii = ref.radii(3)
    assert ref.cache_path.with_name(f"{ref.cache_path.stem}-k3.npy").is_file()
    np.testing.assert_array_equal(load_reference(tmp_path / "real.npz", classifier).radii(3), radii)


def test_content_hash_follows_order_and_bytes():
    a = images(3)
    assert content_hash(ArraySource(a)) == content_hash(ArraySource(a.copy()))
    assert content_hash(ArraySource(a[::-1])) != content_hash(ArraySource(a))  # KID subsets are drawn by index


def test_statistics_file_reference(tmp_path, counting):
    classifier, calls = counting
    stats = gaussian_stats(np.random.default_rng(4).normal(size=(20, 8)))
    stats.save(tmp_path / "fid_stats.npz")
    ref = load_reference(tmp_path / "fid_stats.npz", classifier)
    assert calls == [] and ref.features is None and ref.n is None
    assert ref.frechet.distance(stats) == pytest.approx(0.0, abs=1e-9)
    with pytest.raises(InputError, match="KID needs the reference images' features"):
        ref.require_features("KID")


def test_broden_dataset_reference(small_world, counting, isolated_cache):
    classifier, _ = counting
    source = BrodenImageSource(small_world["dataset"])
    assert source.length == 12 and len(source.files) == 12
    ref = load_reference(small_world["dataset"], classifier)
    assert ref.n == 12 and "Broden" in ref.name
    first = next(source.batches(3))
    assert first[0].dtype == np.uint8 and first[0].shape[-1] == 3


def test_classifier_without_identity_is_not_cached(tmp_path, counting, isolated_cache):
    classifier, calls = counting
    anonymous = dataclasses.replace(classifier, key="")
    np.savez(tmp_path / "r.npz", images=images(5))
    assert load_reference(tmp_path / "r.npz", anonymous).cache_path is None
    load_reference(tmp_path / "r.npz", anonymous)
    assert sum(calls) == 18


def test_bad_references(tmp_path, counting):
    classifier, _ = counting
    with pytest.raises(InputError, match="no such folder or file"):
        load_reference(tmp_path / "missing", classifier)
    np.savez(tmp_path / "one.npz", images=images(6, 1))
    with pytest.raises(InputError, match="at least 2 images"):
        load_reference(tmp_path / "one.npz", classifier)
    np.savez(tmp_path / "r.npz", images=images(6))
    with pytest.raises(InputError, match="a classifier is needed"):
        load_reference(tmp_path / "r.npz", None)
