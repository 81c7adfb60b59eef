"""The label store kept on disk between runs.

Reading a dataset's label maps is the slow part of opening it: about 6 s for 2,221 ADE20K-size images on 2 cores,
a minute for all 22,210, at every launch of the app and every `probescope dissect`. The packed store (see `labels`)
reads back in well under a second, its largest array memory-mapped. It is keyed like a dissection result, by the
dataset's identity (folder, index file with its size and time, row filter), and checked by a CRC-32 per array: a
damaged or stale copy is rebuilt, never used.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from probescope.core.data.broden import BrodenDataset
from probescope.core.dissection.inputs import dataset_identity
from probescope.core.dissection.labels import LabelStore
from probescope.core.tasks import CancelCheck, ProgressCallback, report

FORMAT = "probescope-label-store/1"
SUBDIR = "label_stores"
_ARRAYS = ("seg_shapes", "pixel_region", "image_regions", "region_labels", "region_pixels", "image_labels_data",
           "image_labels_indices", "image_labels_indptr")


def label_store(dataset: BrodenDataset, cache: Path | None, progress: ProgressCallback | None = None,
                cancel: CancelCheck | None = None) -> LabelStore:
    """The dataset's LabelStore: from `cache` (a cache folder; None: never cached) when a copy of this dataset's is
    there and whole, else built from the label maps and kept there for the next run."""
    if cache is None:
        return LabelStore.build(dataset, progress=progress, cancel=cancel)
    table = sorted((int(k), v.name, v.category) for k, v in dataset.labels.items())
    identity = {"format": FORMAT, "dataset": dataset_identity(dataset),
                "labels": hashlib.sha256(json.dumps(table).encode()).hexdigest()}
    folder = Path(cache) / SUBDIR / hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:32]
    store = _load(folder, identity)
    if store is not None:
        report(progress, 1.0, "label maps read from the cache")
        return store
    store = LabelStore.build(dataset, progress=progress, cancel=cancel)
    with contextlib.suppress(OSError):  # a cache that cannot be written costs the next run the same read, no more
        write_store(store, folder, identity)
    return store


def _arrays(store: LabelStore) -> dict[str, np.ndarray]:
    labels = store.image_labels.tocsr()
    return {"seg_shapes": store.seg_shapes, "pixel_region": store.pixel_region, "image_regions": store.image_regions,
            "region_labels": store.region_labels, "region_pixels": store.region_pixels,
            "image_labels_data": labels.data, "image_labels_indices": labels.indices,
            "image_labels_indptr": labels.indptr}


def _crc(array: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(array).view(np.uint8).reshape(-1))


def write_store(store: LabelStore, folder: Path, identity: dict[str, Any] | None = None) -> None:
    """Write the store as .npy files and a sidecar (written last) into a temporary folder renamed into place; the
    store's arrays are in `folder` from then on (`store.files`)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", dir=folder.parent))
    try:
        arrays = _arrays(store)
        for name, array in arrays.items():
            np.save(tmp / f"{name}.npy", np.ascontiguousarray(array), allow_pickle=False)
        meta = {**(identity or {}), "n_labels": store.n_labels, "names": {str(k): v for k, v in store.names.items()},
                "categories": {str(k): v for k, v in store.categories.items()},
                "crc32": {name: _crc(array) for name, array in arrays.items()}}
        (tmp / "store.json").write_text(json.dumps(meta), encoding="utf-8")
        shutil.rmtree(folder, ignore_errors=True)
        os.replace(tmp, folder)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    store.files = folder


def _load(folder: Path, identity: dict[str, Any]) -> LabelStore | None:
    """The stored copy when its sidecar names this identity and every array is whole, else None."""
    try:
        meta = json.loads((folder / "store.json").read_text(encoding="utf-8"))
        if {k: meta.get(k) for k in identity} != identity:
            return None
        arrays = {name: np.load(folder / f"{name}.npy", mmap_mode="r" if name == "pixel_region" else None,
                                allow_pickle=False) for name in _ARRAYS}
        if any(_crc(arrays[name]) != meta["crc32"][name] for name in _ARRAYS):
            return None
        return _store(folder, arrays, meta)
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def open_store(folder: Path) -> LabelStore:
    """A store `write_store` wrote (and its writer checked), every array memory-mapped: what worker processes open,
    so they share the store's pages instead of holding copies."""
    meta = json.loads((Path(folder) / "store.json").read_text(encoding="utf-8"))
    return _store(Path(folder), {name: np.load(Path(folder) / f"{name}.npy", mmap_mode="r", allow_pickle=False)
                                 for name in _ARRAYS}, meta)


def _store(folder: Path, arrays: dict[str, np.ndarray], meta: dict[str, Any]) -> LabelStore:
    import scipy.sparse as sp  # (scipy.sparse: the window's process imports this module; see labels.py)

    n_images, n_labels = len(arrays["seg_shapes"]), int(meta["n_labels"])
    image_labels = sp.csr_matrix((arrays["image_labels_data"], arrays["image_labels_indices"],
                                  arrays["image_labels_indptr"]), shape=(n_images, n_labels))
    store = LabelStore(arrays["seg_shapes"], arrays["pixel_region"], arrays["image_regions"], arrays["region_labels"],
                       arrays["region_pixels"], image_labels, {int(k): v for k, v in meta["names"].items()},
                       {int(k): v for k, v in meta["categories"].items()})
    store.files = folder
    return store
