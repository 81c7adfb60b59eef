"""Stimulus catalogs: which image each stimulus id stands for.

Ids are 0-based rows everywhere inside probescope (feature matrix row i = stimulus i). Three catalog layouts are read:
- psiz HDF5 `catalog.hdf5`: `stimulus_id`, `stimulus_filepath`, optional `class_id`, `class_map_class_id`,
  `class_map_label`; probescope adds optional `mirror_of` (id of the image a stimulus mirrors, -1 none) and the file
  attribute `simulated` for generated data.
- the zip release's `stimuli.txt`: lines `id|filepath|wordnet_id`, ids base-36 and 1-based.
- CSV `catalog.csv`: header `id,path` and optional `mirror_of`, `class`; ids 0..n-1.
Image paths are relative to a root folder the user gives (default: the catalog's folder).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from probescope.core.atomic import atomic_open
from probescope.core.errors import InputError
from probescope.core.files import readable_file
from probescope.core.similarity.trials import whole_ids


@dataclass(frozen=True)
class Catalog:
    """paths[i] is stimulus i's image path relative to `root`; mirror_of[i] the stimulus it mirrors (-1: none)."""

    paths: tuple[str, ...]
    mirror_of: np.ndarray
    root: Path
    classes: tuple[str, ...] = ()
    simulated: bool = False
    source: Path | None = None
    notes: tuple[str, ...] = field(default=())
    id_base: int = 0  # how the file numbered its stimuli (rows here are always 0-based)

    def __len__(self) -> int:
        return len(self.paths)

    def image_path(self, i: int) -> Path:
        return self.root / self.paths[i]


def _decode(values: np.ndarray) -> list[str]:
    return [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in values]


def read_catalog_hdf5(path: str | Path, root: str | Path | None = None) -> Catalog:
    """psiz catalog.hdf5; ids may be 0- or 1-based (rows are re-indexed from 0, and the note says which)."""
    import h5py  # (h5py: the window's process imports this module)

    path = Path(path)
    try:
        with h5py.File(path, "r") as fh:
            for name in ("stimulus_id", "stimulus_filepath"):
                if name not in fh:
                    raise InputError(f"not a psiz catalog: dataset '{name}' missing", path)
            ids = whole_ids(np.asarray(fh["stimulus_id"][()]).reshape(-1), 0, path,
                            lambda row: f"stimulus_id row {row}", "stimulus_id")
            paths = _decode(np.asarray(fh["stimulus_filepath"][()]).reshape(-1))
            mirror = None
            if "mirror_of" in fh:
                mirror = whole_ids(np.asarray(fh["mirror_of"][()]).reshape(-1), -1, path,
                                   lambda row: f"mirror_of row {row}", "mirror_of")
            classes: list[str] = []
            if {"class_id", "class_map_class_id", "class_map_label"} <= set(fh.keys()):
                labels = dict(
                    zip(np.asarray(fh["class_map_class_id"][()]).tolist(), _decode(fh["class_map_label"][()]))
                )
                classes = [labels.get(c, str(c)) for c in np.asarray(fh["class_id"][()]).tolist()]
            simulated = bool(fh.attrs.get("simulated", False))
    except OSError as exc:
        raise InputError(f"cannot read HDF5 catalog ({exc})", path) from None
    if len(ids) != len(paths):
        raise InputError(f"stimulus_id has {len(ids)} rows but stimulus_filepath {len(paths)}", path)
    base = int(ids.min()) if len(ids) else 0
    if base not in (0, 1) or not np.array_equal(np.sort(ids), np.arange(base, base + len(ids))):
        raise InputError("stimulus_id must number the stimuli 0..n-1 (or 1..n)", path)
    order = np.argsort(ids)
    paths_sorted = tuple(paths[i] for i in order)
    if mirror is None:
        mirror_sorted = np.full(len(ids), -1, dtype=np.int64)
    else:
        if len(mirror) != len(ids):
            raise InputError(f"mirror_of has {len(mirror)} rows, expected {len(ids)}", path)
        mirror_sorted = np.where(mirror[order] >= base, mirror[order] - base, -1)
    return Catalog(
        paths_sorted,
        mirror_sorted,
        Path(root) if root is not None else path.parent,
        tuple(classes[i] for i in order) if classes else (),
        simulated,
        path,
        (f"catalog ids are {base}-based",),
        base,
    )


def parse_base36(text: str, path: Path, line: int) -> int:
    if not re.fullmatch(r"[0-9A-Za-z]+", text.strip()):  # int(text, 36) would take '-5', '+5' and '1_0'
        raise InputError(f"line {line}: '{text}' is not a base-36 id", path)
    return int(text.strip(), 36)


def read_stimuli_txt(text: str, path: Path, root: str | Path | None = None) -> Catalog:
    """The zip release's stimuli.txt (`id|filepath|wordnet_id`, base-36 1-based ids) -> rows id-1."""
    entries: dict[int, tuple[str, str]] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        parts = line.split("|")
        if len(parts) < 2:
            raise InputError(f"line {number}: expected 'id|filepath|wordnet_id'", path)
        sid = parse_base36(parts[0], path, number)
        if sid < 1 or sid in entries:
            raise InputError(f"line {number}: id {parts[0]} is duplicated or below 1", path)
        entries[sid] = (parts[1].strip(), parts[2].strip() if len(parts) > 2 else "")
    if sorted(entries) != list(range(1, len(entries) + 1)):
        raise InputError("ids must number the stimuli 1..n without gaps", path)
    rows = [entries[i] for i in range(1, len(entries) + 1)]
    return Catalog(
        tuple(p for p, _ in rows),
        np.full(len(rows), -1, dtype=np.int64),
        Path(root) if root is not None else path.parent,
        tuple(c for _, c in rows),
        False,
        path,
        ("stimuli.txt ids are base-36 and 1-based",),
        1,
    )


def read_catalog_csv(path: str | Path, root: str | Path | None = None) -> Catalog:
    """CSV catalog: columns `id` (0..n-1), `path`; optional `mirror_of` (blank or -1: none) and `class`."""
    path = Path(path)
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            header = reader.fieldnames or []
            if "id" not in header or "path" not in header:
                raise InputError("a catalog CSV needs the columns 'id' and 'path'", path)
            rows = list(reader)
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"cannot read catalog ({exc})", path) from None
    n = len(rows)
    paths = [""] * n
    mirror = np.full(n, -1, dtype=np.int64)
    classes = [""] * n
    seen = np.zeros(n, dtype=bool)
    for line, row in enumerate(rows, start=2):
        try:
            sid = int(row["id"])
            m = (row.get("mirror_of") or "").strip()
            mirror_id = int(m) if m else -1
        except ValueError:
            raise InputError(f"line {line}: ids must be integers", path) from None
        if not 0 <= sid < n or seen[sid] or not -1 <= mirror_id < n:
            raise InputError(f"line {line}: ids must number the stimuli 0..{n - 1} once each", path)
        seen[sid] = True
        paths[sid] = row["path"]
        mirror[sid] = mirror_id
        classes[sid] = row.get("class") or ""
    return Catalog(
        tuple(paths),
        mirror,
        Path(root) if root is not None else path.parent,
        tuple(classes) if any(classes) else (),
        False,
        path,
    )


def read_catalog(path: str | Path, root: str | Path | None = None) -> Catalog:
    """Any supported catalog file, by suffix (.hdf5/.h5, .csv, .txt for stimuli.txt)."""
    path = readable_file(path, "catalog file not found")
    suffix = path.suffix.lower()
    if suffix in (".hdf5", ".h5"):
        return read_catalog_hdf5(path, root)
    if suffix == ".csv":
        return read_catalog_csv(path, root)
    if suffix == ".txt":
        return read_stimuli_txt(path.read_text(encoding="utf-8"), path, root)
    raise InputError("unknown catalog format (expected .hdf5, .csv or stimuli.txt)", path)


def write_catalog_hdf5(path: str | Path, catalog: Catalog, notes: str = "") -> None:
    """psiz-layout catalog.hdf5 (0-based ids) with probescope's `mirror_of` and `simulated` additions."""
    import h5py  # (h5py: the window's process imports this module)

    n = len(catalog)
    with atomic_open(path, "w+b") as raw, h5py.File(raw, "w") as fh:
        fh.create_dataset("stimulus_id", data=np.arange(n, dtype=np.int64))
        fh.create_dataset("stimulus_filepath", data=np.array(catalog.paths, dtype=h5py.string_dtype()))
        fh.create_dataset("mirror_of", data=catalog.mirror_of.astype(np.int64))
        if catalog.classes:
            names = sorted(set(catalog.classes))
            fh.create_dataset("class_id", data=np.array([names.index(c) for c in catalog.classes], dtype=np.int64))
            fh.create_dataset("class_map_class_id", data=np.arange(len(names), dtype=np.int64))
            fh.create_dataset("class_map_label", data=np.array(names, dtype=h5py.string_dtype()))
        fh.attrs["simulated"] = catalog.simulated
        if notes:
            fh.attrs["notes"] = notes
