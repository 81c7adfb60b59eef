"""Layer activations of a model over a set of images, through forward hooks, cached on disk as .npy memmaps.

Images go in at their native size unless the model's Preprocess says otherwise (the dissection protocol feeds
them uncropped). Decoding runs in a small thread pool a couple of batches ahead of inference. The result is
float32 (N, units, h, w); a layer with flat output (N, F) is stored as (N, F, 1, 1).

Cache: <cache_dir>/activations/<key>.npy with a <key>.json sidecar. The key hashes the model file's identity,
the layer, the dataset's identity and the preprocessing. The array is written to a temporary file and renamed
when complete, and the sidecar is written last, so an interrupted run never leaves a cache that looks valid.
- Space: the file's full size is checked against the free space and reserved before anything is written (a disk
  that fills under a memory map kills the process with SIGBUS, with no message).
- Content: the sidecar holds a CRC-32 of every block of rows (computed from the batches as they are written), and a
  cache is read only after every block matches and holds finite values; a damaged cache is named and rebuilt.
  Extraction refuses non-finite activations, so a finite cache is the only kind written.
- Leftovers: a writer holds a lock on its temporary file; temporaries nobody holds (a killed run's) are removed
  when the next extraction starts.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import shutil
import tempfile
import time
import warnings
import zlib
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import torch
from torch import nn

from probescope.core.atomic import write_json
from probescope.core.errors import InputError, Note
from probescope.core.locks import try_lock
from probescope.core.models.loading import TORCHSCRIPT_OUTPUT, LoadedModel
from probescope.core.tasks import CancelCheck, ProgressCallback, check_cancel, report

CACHE_VERSION = 1
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
class _Source:
    n: int
    load: Callable[[int], np.ndarray]
    describe: Callable[[int], str]  # how an image is named in error messages
    identity: dict[str, Any]


def _source(images: Images) -> _Source:
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
        return _Source(ds.n_images, ds.load_image, lambda i: str(ds.image_path(i)), identity)
    seq: Any = images
    digest = hashlib.sha256()
    for i in range(len(seq)):
        im = np.ascontiguousarray(seq[i])
        digest.update(f"{im.dtype}{im.shape};".encode())
        digest.update(im.data)
    return _Source(len(seq), lambda i: seq[i], lambda i: f"image {i}", {"kind": "arrays", "sha256": digest.hexdigest()})


def _fields(model: LoadedModel, layer: str, source: _Source) -> dict[str, Any]:
    """Everything the cached array depends on (hashed into the cache key, stored in the sidecar)."""
    return {
        "version": CACHE_VERSION,
        "model": model.source_key,
        "layer": layer,
        "dataset": source.identity,
        "preprocess": model.preprocess.key(),
        "dtype": "float32",
    }


def _key(fields: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()[:32]


def cache_path(model: LoadedModel, layer: str, images: Images, cache_dir: str | Path) -> Path:
    """Where the activations of `layer` over `images` are (or would be) cached."""
    return Path(cache_dir) / CACHE_SUBDIR / f"{_key(_fields(model, layer, _source(images)))}.npy"


class _BlockChecksums:
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


def _damage(array: np.ndarray, checksums: Any) -> str:
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


def _load_cached(path: Path, fields: dict[str, Any], n_images: int) -> np.ndarray | None:
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
    damage = _damage(array, meta.get("checksums"))
    if damage:
        warnings.warn(Note(f"{path}: damaged activation cache ({damage}); rebuilding it"), stacklevel=2)
        return None
    return array


def extract_activations(
    model: LoadedModel,
    layer: str,
    images: Images,
    cache_dir: str | Path | None,
    *,
    batch_size: int = 32,
    device: str | torch.device | None = None,
    progress: ProgressCallback | None = None,
    cancel: CancelCheck | None = None,
    workers: int = 2,
) -> np.ndarray:
    """float32 (N, units, h, w) activations of `layer`: a read-only memmap of the cache, rebuilt if missing or
    stale; an in-memory array when cache_dir is None. Moves the model to `device` when one is given. Raises
    Cancelled (leaving no cache) when cancel() returns True; one hooked pass per model at a time (model.lock)."""
    source = _source(images)
    if source.n == 0:
        raise InputError("no images to extract activations from")
    _check_layer(model, layer)
    if device is not None:
        model.to(device)
    if cache_dir is None:
        return _run(model, layer, source, None, batch_size, progress, cancel, workers)
    fields = _fields(model, layer, source)
    folder = Path(cache_dir) / CACHE_SUBDIR
    path = folder / f"{_key(fields)}.npy"
    report(progress, 0.0, f"{layer}: checking the activation cache")
    cached = _load_cached(path, fields, source.n)
    if cached is not None:
        report(progress, 1.0, f"{layer}: read cached activations")
        return cached
    tmp, fd = _temp_file(folder, path.name)
    try:
        path.with_suffix(".json").unlink(missing_ok=True)
        checksums: list[_BlockChecksums] = []
        array = _run(model, layer, source, tmp, batch_size, progress, cancel, workers, checksums)
        shape = list(array.shape)
        array.flush()
        del array
    except BaseException:
        os.close(fd)
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    os.close(fd)  # the lock goes before the rename (Windows renames no open file); a cleaner spares fresh files
    try:
        os.replace(tmp, path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise InputError(f"could not write the activation cache ({exc.strerror or exc})", path) from None
    write_json(path.with_suffix(".json"), {"fields": fields, "shape": shape, "model_name": model.name,
                                           "checksums": checksums[0].to_json()})
    return np.load(path, mmap_mode="r")


def _temp_file(folder: Path, name: str) -> tuple[Path, int]:
    """A new temporary file in `folder`, locked (open descriptor returned) so no cleaner takes it while it fills;
    unlocked temporaries left by killed runs are removed first."""
    try:
        folder.mkdir(parents=True, exist_ok=True)
        _remove_stale_temporaries(folder)
        fd, tmp = tempfile.mkstemp(prefix=f".{name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise InputError(f"cache folder is not writable ({exc.strerror or exc})", folder) from None
    try_lock(fd)
    return Path(tmp), fd


def _remove_stale_temporaries(folder: Path) -> None:
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


def _check_layer(model: LoadedModel, layer: str) -> None:
    if not model.hookable:
        if layer != TORCHSCRIPT_OUTPUT:
            raise InputError(
                f"{model.name}: TorchScript models run no forward hooks, so only layer "
                f"{TORCHSCRIPT_OUTPUT!r} (the model output) can be read, not {layer!r}"
            )
        return
    names = [name for name, _ in model.module.named_modules() if name]
    if layer not in names:
        hint = ", ".join(names[-6:])
        raise InputError(f"{model.name} has no layer {layer!r} (last layers: {hint}; `probescope info` lists all)")


class _StopForward(Exception):
    """Raised from a hook to skip the rest of the network once the wanted layer has run."""


class _Capture:
    """A forward hook keeping a copy of the layer's last output (copied at once: later in-place ops change it)."""

    def __init__(self) -> None:
        self.output: torch.Tensor | None = None
        self.calls = 0
        self.stop_early = False

    def __call__(self, _mod: nn.Module, _inp: object, out: object) -> None:
        if not isinstance(out, torch.Tensor):
            raise InputError(f"layer output is a {type(out).__name__}, not a tensor")
        self.output = out.detach().float().clone()
        self.calls += 1
        if self.stop_early:
            raise _StopForward


def _forward(model: LoadedModel, layer: str, x: torch.Tensor, capture: _Capture) -> torch.Tensor:
    if not model.hookable:
        out = model.module(x)
        if not isinstance(out, torch.Tensor):
            raise InputError(f"{model.name}: output is a {type(out).__name__}, not a tensor")
        return out.float()
    capture.output, capture.calls = None, 0
    with contextlib.suppress(_StopForward):
        model.module(x)
    if capture.output is None:
        raise InputError(f"{model.name}: layer {layer!r} did not run in the forward pass")
    return capture.output


def _as_units(t: torch.Tensor, layer: str) -> np.ndarray:
    if t.ndim == 2:
        t = t[:, :, None, None]
    if t.ndim != 4:
        raise InputError(f"layer {layer!r} outputs shape {tuple(t.shape)}; need (N, C, H, W) or (N, F)")
    return t.cpu().numpy()


def _batches(source: _Source, batch_size: int, pool: ThreadPoolExecutor, ahead: int = 2):
    """Yield (start, images) per batch while the next `ahead` batches decode in the pool."""
    starts = list(range(0, source.n, batch_size))
    pending: deque[tuple[int, list[Future]]] = deque()

    def submit(start: int) -> None:
        pending.append((start, [pool.submit(source.load, i) for i in range(start, min(start + batch_size, source.n))]))

    try:
        for start in starts[:ahead]:
            submit(start)
        for k in range(len(starts)):
            start, futures = pending.popleft()
            if k + ahead < len(starts):
                submit(starts[k + ahead])
            yield start, [f.result() for f in futures]
    finally:
        for _, futures in pending:
            for f in futures:
                f.cancel()


def _allocate(path: Path | None, shape: tuple[int, ...]) -> np.ndarray:
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
        _reserve(path)
    except OSError as exc:
        raise InputError(f"could not write the activation cache ({exc.strerror or exc}); set PROBESCOPE_CACHE to a "
                         "folder on another disk", path.parent) from None
    return array


def _reserve(path: Path) -> None:
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


@contextlib.contextmanager
def _hooked(model: LoadedModel, layer: str, capture: _Capture) -> Iterator[None]:
    """Hold the model's lock with `capture` hooked on `layer` (TorchScript: no hook, its output is the layer)."""
    with model.lock:
        handle = dict(model.module.named_modules())[layer].register_forward_hook(capture) if model.hookable else None
        try:
            yield
        finally:
            if handle is not None:
                handle.remove()


def _run(
    model: LoadedModel,
    layer: str,
    source: _Source,
    out_path: Path | None,
    batch_size: int,
    progress: ProgressCallback | None,
    cancel: CancelCheck | None,
    workers: int,
    checksums: list[_BlockChecksums] | None = None,
) -> np.ndarray:
    """The activations of every image; with `checksums` (an empty list), the CRC-32 blocks of what was written."""
    capture = _Capture()
    device = model.device
    out: np.ndarray | None = None
    pool = ThreadPoolExecutor(max_workers=max(1, workers))
    batches = contextlib.closing(_batches(source, max(1, batch_size), pool))  # closed first: cancels pending decodes
    with _hooked(model, layer, capture), pool, torch.inference_mode(), batches as loaded:
        for start, imgs in loaded:
            check_cancel(cancel)
            try:
                x = model.preprocess(imgs, device=device)
            except InputError as exc:
                raise InputError(f"{exc} (batch starting at {source.describe(start)})") from None
            acts = _as_units(_forward(model, layer, x, capture), layer)
            capture.stop_early = capture.calls == 1  # later calls would overwrite it: run to the end then
            if not np.isfinite(acts).all():
                bad = int(np.argmin(np.isfinite(acts).reshape(len(acts), -1).all(axis=1)))
                raise InputError(f"{model.name}: layer {layer!r} gives non-finite values (NaN or Inf) for "
                                 f"{source.describe(start + bad)}")
            if out is None:
                out = _allocate(out_path, (source.n, *acts.shape[1:]))
                if checksums is not None:
                    checksums.append(_BlockChecksums(acts[0].nbytes))
            elif acts.shape[1:] != out.shape[1:]:
                raise InputError(
                    f"layer {layer!r} gives {acts.shape[1:]} for {source.describe(start)} but "
                    f"{out.shape[1:]} for the first image: images differ in size; resize them (a preprocessing "
                    "such as imagenet:stretch=N or imagenet:crop=N)"
                )
            out[start : start + len(acts)] = acts
            if checksums is not None:
                checksums[0].add(start, out[start : start + len(acts)])
            done = start + len(acts)
            report(progress, done / source.n, f"{layer}: {done}/{source.n} images")
    assert out is not None
    return out
