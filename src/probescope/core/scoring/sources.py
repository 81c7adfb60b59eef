"""Where the images to score come from: a folder, a uint8 array file, a TorchScript generator, the demo sampler.

Every source hands out its images as a sequence of batch *tasks*: zero-argument callables that decode or generate
one batch and return a list of uint8 (H, W, 3) arrays. The pipeline runs tasks in prefetch threads while the
classifier works, and the GUI can simply call them in order (`batches`). `length` is None when unknown.
"""

from __future__ import annotations

import errno
import os
import stat
import struct
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

import numpy as np

from probescope.core.data.images import read_rgb
from probescope.core.errors import InputError
from probescope.core.files import (
    NUMPY_FILE_ERRORS,
    entry_mode,
    file_problem,
    folder_entries,
    folder_problem,
    readable_file,
    stat_problem,
    zip_problem,
)
from probescope.core.trust import NO_TRUST, Trust

BatchTask = Callable[[], list[np.ndarray]]

# torch-fidelity's `samples_find_ext` and `samples_ext_lossy`: the same folder gives the same N as the reference.
DEFAULT_EXTENSIONS = ("png", "jpg", "jpeg")
LOSSY_EXTENSIONS = ("jpg", "jpeg")


class SampleSource:
    """Base of all sources: `name`, `length` (int or None), `lossy` (JPEG-compressed inputs present)."""

    name: str = ""
    length: int | None = None
    lossy: bool = False

    def batch_tasks(self, batch_size: int) -> Iterator[BatchTask]:
        raise NotImplementedError

    def batches(self, batch_size: int) -> Iterator[list[np.ndarray]]:
        """The batches in order, decoded in the calling thread."""
        for task in self.batch_tasks(batch_size):
            yield task()

    def describe(self) -> str:
        size = f"{self.length} images" if self.length is not None else "unknown number of images"
        return f"{self.name} ({size}{', JPEG-compressed inputs: scores may shift' if self.lossy else ''})"


def _check_batch_size(batch_size: int) -> None:
    if batch_size < 1:
        raise InputError(f"batch size must be at least 1, got {batch_size}")


def parse_extensions(text: str) -> tuple[str, ...]:
    """'png,JPG, .webp' -> ('png', 'jpg', 'webp'): lower case, without dots; InputError when none is left."""
    extensions = tuple(dict.fromkeys(part.strip().lstrip(".").lower() for part in text.split(",") if part.strip()))
    if not all(extensions) or not extensions:
        raise InputError(f"no file extensions in {text!r} (expected a comma-separated list such as png,jpg,jpeg)")
    return extensions


def list_image_files(root: str | Path, extensions: Sequence[str] = DEFAULT_EXTENSIONS) -> list[Path]:
    """The files directly inside `root` whose name ends in one of `extensions`, as torch-fidelity lists them.

    torch-fidelity's rule: the extension is read from the entry's own name (case-insensitive), not recursive,
    each entry replaced by its resolved path (symbolic links followed), sorted by that resolved path. A link to a
    folder is not a file; a link that cannot be resolved (a loop, a missing target, no permission), an unreadable
    file or a special file (FIFO, device) is an error naming the entry (probescope.core.files) rather than a crash
    or a hang when it is read.
    """
    wanted = {e.lower().lstrip(".") for e in extensions}
    files = []
    for entry in folder_entries(root):
        if os.path.splitext(entry.name)[1].lower().lstrip(".") not in wanted:
            continue
        mode = entry_mode(entry)
        if stat.S_ISDIR(mode):
            continue
        problem = file_problem(entry.path, mode)
        if problem is not None:
            raise InputError(problem, entry.path)
        files.append(os.path.realpath(entry.path))
    return [Path(p) for p in sorted(files)]


class ImageFolderSource(SampleSource):
    """The image files directly inside a folder, listed and ordered as torch-fidelity does (`list_image_files`)."""

    def __init__(self, root: str | Path, extensions: Sequence[str] = DEFAULT_EXTENSIONS):
        self.root = Path(root)
        problem = folder_problem(self.root)
        if problem is not None:
            raise InputError(problem, self.root)
        self.extensions = tuple(extensions)
        self.files = list_image_files(self.root, self.extensions)
        if not self.files:
            raise InputError(f"no image files with extensions {','.join(self.extensions)} in the folder", self.root)
        self.name = str(self.root)
        self.length = len(self.files)
        self.lossy = any(p.suffix.lower().lstrip(".") in LOSSY_EXTENSIONS for p in self.files)

    def batch_tasks(self, batch_size: int) -> Iterator[BatchTask]:
        _check_batch_size(batch_size)
        for start in range(0, len(self.files), batch_size):
            chunk = self.files[start : start + batch_size]
            yield lambda chunk=chunk: [read_rgb(p) for p in chunk]


def read_image_array(path: str | Path, key: str | None = None) -> np.ndarray:
    """A uint8 (N, H, W, 3) array from .npy (memory-mapped) or .npz (the array `key`, 'images', or the only one)."""
    path = readable_file(path)
    try:
        if path.suffix.lower() == ".npz":
            problem = zip_problem(path)
            if problem:
                raise InputError(f"cannot read as a NumPy array file ({problem})", path)
            with np.load(path) as archive:
                names = list(archive.files)
                if key is None:
                    key = "images" if "images" in names else (names[0] if len(names) == 1 else None)
                if key is None or key not in names:
                    raise InputError(f"choose the images array: the archive holds {names}, none named 'images'", path)
                stored = _stored_member(path, key)
                array = stored if stored is not None else archive[key]
        else:
            array = np.load(path, mmap_mode="r", allow_pickle=False)
    except NUMPY_FILE_ERRORS as exc:
        raise InputError(f"cannot read as a NumPy array file ({exc})", path) from None
    if array.dtype != np.uint8 or array.ndim != 4 or array.shape[-1] != 3 or array.shape[0] == 0:
        hint = " (channels first? transpose to (N, H, W, 3))" if array.ndim == 4 and array.shape[1] == 3 else ""
        raise InputError(f"expected uint8 images (N, H, W, 3), got {array.dtype} {array.shape}{hint}", path)
    return array


def _stored_member(path: Path, key: str) -> np.ndarray | None:
    """A read-only memmap of the .npz member `key` when it is stored uncompressed (as np.savez writes it), so 50,000
    samples (2.4 GB at 128x128) are read as they are needed instead of all at once; None when it is compressed."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(f"{key}.npy")
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    with open(path, "rb") as fh:
        fh.seek(info.header_offset)
        local = fh.read(30)  # the member's local header: its name and extra field come before the data
        if len(local) < 30 or local[:4] != b"PK\x03\x04":
            return None
        name_length, extra_length = struct.unpack("<HH", local[26:30])
        fh.seek(info.header_offset + 30 + name_length + extra_length)
        version = np.lib.format.read_magic(fh)
        read_header = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran, dtype = read_header(fh)
        offset = fh.tell()
    if fortran or dtype.hasobject or offset + dtype.itemsize * int(np.prod(shape)) > path.stat().st_size:
        return None
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)


class ArraySource(SampleSource):
    """Images held in a uint8 (N, H, W, 3) array (in memory or memory-mapped from a .npy/.npz file)."""

    def __init__(self, images: np.ndarray, name: str = "array"):
        self.images = images
        self.name = name
        self.length = int(images.shape[0])

    @classmethod
    def open(cls, path: str | Path, key: str | None = None) -> ArraySource:
        return cls(read_image_array(path, key), name=str(path))

    def batch_tasks(self, batch_size: int) -> Iterator[BatchTask]:
        _check_batch_size(batch_size)
        for start in range(0, self.length, batch_size):
            yield lambda s=start: list(np.ascontiguousarray(self.images[s : s + batch_size]))


def quantize_to_uint8(x: np.ndarray, low: float, high: float) -> np.ndarray:
    """Map [low, high] to 0..255 with round-half-up: floor((x - low) / (high - low) * 255 + 0.5), clamped."""
    scaled = (np.asarray(x, dtype=np.float64) - low) * (255.0 / (high - low))
    return np.clip(np.floor(scaled + 0.5), 0, 255).astype(np.uint8)


class TorchScriptGeneratorSource(SampleSource):
    """Samples of a TorchScript generator G(z[, class]) -> (m, 3, H, W) images (or a torch.export program of one,
    exported with a dynamic batch dimension).

    Noise is drawn as torch-fidelity draws it (np.random.RandomState(seed).randn per batch, then class labels with
    randint when the generator is class-conditional), so the same file and seed give the same samples. Float
    outputs are declared to lie in `output_range` and quantised by `quantize_to_uint8`; uint8 outputs are used as
    they are. A generator is code: it loads only when `trust` allows its content.

    A generator that does not fit the settings is refused in one line naming its file before any sampling: a
    torch.export program from its input signature (noise size against `z_dim`, its number of inputs against
    `num_classes`, an image classifier), then any generator from one run on two zero noise vectors (TorchScript has
    no shape signature). Float samples that are not finite (NaN, infinity) are refused, counted, not quantised.
    """

    def __init__(
        self,
        path: str | Path,
        z_dim: int,
        n: int,
        *,
        num_classes: int = 0,
        output_range: tuple[float, float] = (-1.0, 1.0),
        seed: int = 2020,
        device: str = "cpu",
        trust: Trust = NO_TRUST,
    ):
        self.path = Path(path)
        if not self.path.is_file():
            raise InputError("generator file not found", self.path)
        if z_dim < 1 or n < 1 or num_classes < 0 or not output_range[0] < output_range[1]:
            raise InputError(
                f"generator settings: need z_dim >= 1, n >= 1, classes >= 0 and low < high of the output range "
                f"(got z_dim={z_dim}, n={n}, classes={num_classes}, range={output_range})"
            )
        import torch  # (torch: the window and `probescope --help` import this module, never torch)

        self.z_dim, self.num_classes, self.output_range = z_dim, num_classes, output_range
        self.seed, self.device = seed, device
        self.module = self._load(trust, device)
        self._probe()
        low, high = output_range
        rule = f"output [{low:g}, {high:g}] -> uint8 rounded half up"
        kind = "TorchScript" if isinstance(self.module, torch.jit.ScriptModule) else "torch.export"
        self.name = f"{self.path} ({kind} generator, z_dim={z_dim}, {rule})"
        self.length = n

    def batch_tasks(self, batch_size: int) -> Iterator[BatchTask]:
        _check_batch_size(batch_size)
        rng = np.random.RandomState(self.seed)
        for start in range(0, self.length, batch_size):
            m = min(batch_size, self.length - start)
            z = rng.randn(m, self.z_dim).astype(np.float32)
            labels = rng.randint(0, self.num_classes, size=m) if self.num_classes > 0 else None
            yield lambda z=z, labels=labels, start=start: self._generate(z, labels, start)

    def _load(self, trust: Trust, device: str):
        """The generator as a module on `device`; a torch.export program is first checked against the settings by
        its own input signature (`_check_signature`), before anything runs."""
        # (torch: the window and `probescope --help` import this module, never torch)
        from probescope.core.models.exported import load_runnable

        return load_runnable(self.path, trust, device, "generator", check=self._check_signature).eval()

    def _check_signature(self, program) -> None:
        """InputError naming the file and the option when the program's inputs cannot be (noise (N, z_dim)[, class
        labels (N,)]): another noise size than --z-dim, an image classifier given as a generator, a class input
        without --gen-classes or the reverse."""
        # (torch: the window and `probescope --help` import this module, never torch)
        from probescope.core.models.exported import input_shape

        shape = input_shape(program)
        shown = "(" + ", ".join("N" if d is None else str(d) for d in (None, *shape[1:])) + ")" if shape else "()"
        if len(shape) != 2:
            raise InputError(f"not a generator G(z[, class]) for --generator: it takes {shown} inputs, not (N, z_dim) "
                             "noise vectors (an image classifier?)", self.path)
        if shape[1] is not None and shape[1] != self.z_dim:
            raise InputError(f"this generator takes {shape[1]}-d noise {shown}, not --z-dim {self.z_dim}: give "
                             f"--z-dim {shape[1]}", self.path)
        inputs = len(program.graph_signature.user_inputs)
        if inputs != (2 if self.num_classes else 1):
            told = f"--gen-classes {self.num_classes}" if self.num_classes else "no --gen-classes"
            wants = {1: "noise alone", 2: "noise and class labels"}.get(inputs, f"{inputs} inputs")
            raise InputError(f"this generator takes {wants}, but {told} was given (a conditional generator takes "
                             "(z, class) with --gen-classes K, an unconditional one z alone)", self.path)

    def _probe(self) -> None:
        """Run the generator once on two zero noise vectors (and class 0), before any sampling: a program that does
        not take --z-dim noise (a TorchScript file has no shape signature) is refused in one line naming the file."""
        z = np.zeros((2, self.z_dim), np.float32)
        labels = np.zeros(2, np.int64) if self.num_classes > 0 else None
        try:
            self._run(z, labels)
        except InputError:
            raise
        except Exception as exc:  # noqa: BLE001  (a program fails on wrong inputs with any exception type)
            given = f"--z-dim {self.z_dim}" + (f" and --gen-classes {self.num_classes}" if self.num_classes else "")
            raise InputError(f"the generator fails on {given} inputs (wrong noise size, or not a generator G(z[, "
                             f"class]) -> (N, 3, H, W)?): {_last_line(exc)}", self.path) from None

    def _run(self, z: np.ndarray, labels: np.ndarray | None):
        """The generator's (m, 3, H, W) output tensor for noise `z` (and `labels`), checked for shape."""
        import torch  # (torch: the window and `probescope --help` import this module, never torch)

        args = [torch.from_numpy(z).to(self.device)]
        if labels is not None:
            args.append(torch.from_numpy(labels).to(self.device))
        with torch.inference_mode():
            out = self.module(*args)
        if not isinstance(out, torch.Tensor) or out.dim() != 4 or out.shape[1] != 3 or out.shape[0] != len(z):
            shape = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise InputError(f"generator returned {shape}, expected ({len(z)}, 3, H, W) images", self.path)
        return out

    def _generate(self, z: np.ndarray, labels: np.ndarray | None, start: int = 0) -> list[np.ndarray]:
        import torch  # (torch: the window and `probescope --help` import this module, never torch)

        out = self._run(z, labels)
        if out.is_floating_point() or out.is_complex():
            finite = torch.isfinite(out).flatten(1).all(dim=1)
            bad = len(z) - int(finite.sum())
            if bad:
                first = start + int((~finite).nonzero()[0, 0])
                raise InputError(f"the generator's output holds NaN or infinity in {bad} of the {len(z)} samples "
                                 f"{start}-{start + len(z) - 1} (first: sample {first}); non-finite samples have no "
                                 "image to score", self.path)
        images = out.permute(0, 2, 3, 1).cpu().numpy()
        if images.dtype != np.uint8:
            images = quantize_to_uint8(images, *self.output_range)
        return list(images)


def _last_line(exc: BaseException) -> str:
    """The exception's last non-empty line (a TorchScript error ends with the original error after its traceback)."""
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    text = lines[-1][:200] if lines else ""
    return text if text.split(":", 1)[0].endswith(("Error", "Exception")) else f"{type(exc).__name__}: {text}"


def open_source(spec: str | Path, extensions: Sequence[str] = DEFAULT_EXTENSIONS) -> SampleSource:
    """A folder (its files with `extensions`) or a .npy/.npz file. (The demo sampler and generators take settings:
    build them directly.)"""
    path = Path(spec)
    array = path.suffix.lower() in (".npy", ".npz")
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        missing = exc.errno == errno.ENOENT and not path.is_symlink()
        raise InputError(("file not found" if array else "no such folder or file") if missing
                         else stat_problem(exc, path), path) from None
    if stat.S_ISDIR(mode):
        return ImageFolderSource(path, extensions)
    if array:
        return ArraySource.open(path)
    raise InputError("expected a folder of images or a .npy/.npz array of uint8 (N, H, W, 3) images", path)

