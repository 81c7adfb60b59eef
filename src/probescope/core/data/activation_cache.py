"""The activation cache: where a layer's activations over a set of images are kept, and whether what is there may be
read (probescope.core.data.activations extracts them).

<cache_dir>/activations/<key>.npy with a <key>.json sidecar. The key hashes the model file's identity, the layer,
the dataset's identity and the preprocessing. The array is written to a temporary file and renamed when complete, and
the sidecar is written last, so an interrupted run never leaves a cache that looks valid.
- Space: the file's full size is checked against the free space and reserved before anything is written (a disk
  that fills under a memory map kills the process with SIGBUS, with no message).
- Content: the sidecar holds a CRC-32 of every block of rows (computed from the batches as they are written), and a
  cache is read only after every block matches and holds finite values; a damaged cache is named and rebuilt.
  Extraction refuses non-finite activations, so a finite cache is the only kind written.
- Leftovers: a writer holds a lock on its temporary file; temporaries nobody holds (a killed run's) are removed
  when the next extraction starts.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
import zlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from probescope.core.errors import InputError, Note
from probescope.core.locks import try_lock
from probescope.core.models.loading import LoadedModel

CACHE_VERSION = 2  # 2: layers read through their layouts (version 1 read every 4-d output as channels first)
CACHE_SUBDIR = "activations"
CHECK_BLOCK_BYTES = 16 << 20  # rows per checksum block: about this many bytes
STALE_TEMP_SECONDS = 60.0  # an unlocked temporary this old belongs to no running writer


class ImageDataset(Protocol):
    """What extraction needs from a dataset (probescope.core.data.broden.BrodenDataset has it)."""

    root: Path
    index_path: Path

    @property
    def n_images(self) -> int: ...

    def load_image(self, i: int) -> np.ndarray: ...

    def image_path(self, i: int) -> Path: ...


Images = ImageDataset | np.ndarray | Sequence[np.ndarray]


@dataclass(frozen=True)
class Source:
    n: int
    load: Callable[[int], np.ndarray]
    describe: Callable[[int], str]  # how an image is named in error messages
    identity: dict[str, Any]


def source_of(images: Images) -> Source:
    if hasattr(images, "load_image") and hasattr(images, "n_images"):
        ds: Any = images
        index = Path(ds.index_path)
        try:
            st = index.stat()
        except OSError as exc:
            raise InputError(f"cannot read the dataset index ({exc.strerror or exc})", index) from None
        paths = hashlib.sha256("\n".join(str(ds.image_path(i)) for i in range(ds.n_images)).encode()).hexdigest()
        identity = {
            "kind": "dataset",
            "root": str(Path(ds.root).resolve()),
            "index": str(index.resolve()),
            "index_size": st.st_size,
            "index_mtime_ns": st.st_mtime_ns,
            "images": paths,
        }
        return Source(ds.n_images, ds.load_image, lambda i: str(ds.image_path(i)), identity)
    seq: Any = images
    digest = hashlib.sha256()
    for i in range(len(seq)):
        im = np.ascontiguousarray(seq[i])
        digest.update(f"{im.dtype}{im.shape};".encode())
        digest.update(im.data)
    return Source(len(seq), lambda i: seq[i], lambda i: f"image {i}", {"kind": "arrays", "sha256": digest.hexdigest()})


def cache_fields(model: LoadedModel, layer: str, source: Source, pool: str | None = None) -> dict[str, Any]:
    """Everything the cached array depends on (hashed into the cache key, stored in the sidecar). A layout the model
    decides follows from the model and the preprocessing, which are in the key (and reading a cache needs no pass to
    decide it); a layout the user gave is in the key."""
    fields: dict[str, Any] = {
        "version": CACHE_VERSION,
        "model": model.source_key,
        "layer": layer,
        "dataset": source.identity,
        "preprocess": model.preprocess.key(),
        "dtype": "float32",
    }
    if pool is not None:
        fields["pool"] = pool
    if layer in model.layouts:
        fields["layout"] = str(model.layouts[layer])
    return fields


def cache_key(fields: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]


def cache_path(model: LoadedModel, layer: str, images: Images, cache_dir: str | Path, pool: str | None = None) -> Path:
    """Where the activations of `layer` over `images` are (or would be) cached."""
    return Path(cache_dir) / CACHE_SUBDIR / f"{cache_key(cache_fields(model, layer, source_of(images), pool))}.npy"


class BlockChecksums:
    """CRC-32 of each block of `rows` rows of an array, fed with its rows in order as they are written."""

    def __init__(self, row_bytes: int, rows: int | None = None):
        self.rows = rows or max(1, CHECK_BLOCK_BYTES // max(1, row_bytes))
        self.crcs: list[int] = []

    def add(self, start: int, rows: np.ndarray) -> None:
        flat = rows.reshape(len(rows), -1)
        i = 0
        while i < len(flat):
            block, offset = divmod(start + i, self.rows)
            take = min(len(flat) - i, self.rows - offset)
            if block == len(self.crcs):
                self.crcs.append(0)
            self.crcs[block] = zlib.crc32(flat[i:i + take], self.crcs[block])
            i += take

    def to_json(self) -> dict[str, Any]:
        return {"rows": self.rows, "crc32": self.crcs}


def damage(array: np.ndarray, checksums: Any) -> str:
    """Why the cached array cannot be used ('' when every block matches its checksum and is finite). Blocks are
    checked in parallel threads (zlib and NumPy release the GIL); the first damaged block in file order is named."""
    if not isinstance(checksums, dict) or not isinstance(checksums.get("rows"), int) or checksums["rows"] < 1:
        return "checksums unreadable"
    rows, want = checksums["rows"], checksums.get("crc32")
    if not isinstance(want, list) or len(want) != -(-len(array) // rows):
        return "checksums do not cover the file"

    def check(k: int) -> str:
        block = np.ascontiguousarray(array[k * rows:(k + 1) * rows])
        where = f"images {k * rows}-{k * rows + len(block) - 1}"
        if zlib.crc32(block) != want[k]:
            return f"checksum mismatch in {where}"
        return "" if np.isfinite(block).all() else f"non-finite values in {where}"

    with ThreadPoolExecutor(max_workers=min(len(want), os.cpu_count() or 1)) as pool:
        return next((problem for problem in pool.map(check, range(len(want))) if problem), "")


def load_cached(path: Path, fields: dict[str, Any], n_images: int) -> np.ndarray | None:
    """The cached array if the sidecar matches `fields` and the file is whole and undamaged, else None (a damaged
    one is named in a Note)."""
    sidecar = path.with_suffix(".json")
    try:
        meta = json.loads(sidecar.read_text(encoding="utf-8"))
        array = np.load(path, mmap_mode="r")
    except (OSError, ValueError, json.JSONDecodeError, UnicodeDecodeError):
        return None
    if (
        not isinstance(meta, dict)
        or meta.get("fields") != fields
        or list(array.shape) != meta.get("shape")
        or array.dtype != np.float32
        or array.shape[0] != n_images
        or "checksums" not in meta  # written by a version without checksums: rebuilt quietly
    ):
        return None
    problem = damage(array, meta.get("checksums"))
    if problem:
        warnings.warn(Note(f"{path}: damaged activation cache ({problem}); rebuilding it"), stacklevel=2)
        return None
    return array

def temp_file(folder: Path, name: str) -> tuple[Path, int]:
    """A new temporary file in `folder`, locked (open descriptor returned) so no cleaner takes it while it fills;
    unlocked temporaries left by killed runs are removed first."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(folder)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise InputError(f"cache folder is not writable ({exc.strerror or exc})", folder) from None
    try_lock(fd)
    return Path(tmp), fd


def remove_stale_temporaries(folder: Path) -> None:
    """Delete `.*.tmp` files that no process holds and that are older than a fresh writer's lock-up window."""
    now = time.time()
    for path in folder.glob(".*.tmp"):
        try:
            if now - path.stat().st_mtime < STALE_TEMP_SECONDS:
                continue
            fd = os.open(path, os.O_RDWR)
        except OSError:
            continue  # gone already, or not ours to open
        try:
            if try_lock(fd):
                path.unlink(missing_ok=True)
        finally:
            os.close(fd)


def allocate(path: Path | None, shape: tuple[int, ...]) -> np.ndarray:
    """The output array: in memory, or a memory map of `path` whose whole size is on disk already."""
    if path is None:
        return np.empty(shape, dtype=np.float32)
    need = int(np.prod(shape)) * 4 + 4096  # data and a generous .npy header
    try:
        free = shutil.disk_usage(path.parent).free
    except OSError:
        free = need  # cannot tell: the reservation below still checks
    if free < need:
        raise InputError(f"not enough free space for the activation cache: it needs {_size(need)}, {_size(free)} "
                         "free; free some space, or set PROBESCOPE_CACHE to a folder on another disk", path.parent)
    try:
        array = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=shape)
        reserve(path)
    except OSError as exc:
        raise InputError(f"could not write the activation cache ({exc.strerror or exc}); set PROBESCOPE_CACHE to a "
                         "folder on another disk", path.parent) from None
    return array


def reserve(path: Path) -> None:
    """Give the (sparse) file all its blocks now, so a full disk is an error here, not a SIGBUS later."""
    if not hasattr(os, "posix_fallocate"):
        return
    fd = os.open(path, os.O_RDWR)
    try:
        os.posix_fallocate(fd, 0, os.fstat(fd).st_size)
    except OSError as exc:
        if exc.errno not in (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS):  # file systems that cannot: checked above
            raise
    finally:
        os.close(fd)


def _size(n: int) -> str:
    if n < 2**20:
        return f"{n / 2**10:,.1f} KiB"
    return f"{n / 2**20:,.1f} MiB" if n < 2**30 else f"{n / 2**30:,.2f} GiB"
