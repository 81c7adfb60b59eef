"""Opening inputs: what the user asked to open (`OpenRequest`), the worker task that loads it, and what a dropped
file or folder is.

Loading runs in the worker pool: models in the compute thread (which owns torch), everything else in the I/O pool.
Each task returns a `Loaded` for `AppState`; bad input raises `InputError`, which the window shows as it is.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from probescope.core.errors import InputError
from probescope.jobs.kernel.pickling import cross_by_name
from probescope.jobs.protocol import COMPUTE, IO, Job, Partial, Progress, TaskContext
from probescope.jobs.scoring.held import hold_generator
from probescope.jobs.session import Session

KINDS = ("model", "dataset", "samples", "judgments")
DEMO = "demo"
MODEL_SUFFIXES = (".pt", ".pth", ".tar", ".ckpt", ".jit", ".ts", ".bin", ".pt2")
JUDGMENT_SUFFIXES = (".hdf5", ".h5", ".zip")
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".webp", ".tif", ".tiff")
DEMO_SAMPLES = 1000  # the demo sampler's length: enough for a 10-split Inception Score
DEMO_DATASET_IMAGES: int | None = None  # the demo probing dataset's size; None: core's default (tests use fewer)
DEMO_FIRST_BATCH: int | None = None  # its first stage on a fresh install; None: core's default


@dataclass(frozen=True)
class Loaded:
    """One loaded input: `spec` is what was opened (a path, 'demo' or a model spec), `value` the loaded object.

    For a model, `value` is its `ModelInfo` (the model stays where it was loaded) and `layers` holds its
    `LayerInfo` list, computed in the worker when it was loaded. `first_of` > 0
    marks the first part of an input of that many items, shown while the rest loads (the demo dataset's first
    images on a fresh install); the whole input replaces it.
    """

    kind: str
    spec: str
    label: str
    value: Any
    layers: tuple = ()
    first_of: int = 0


@dataclass(frozen=True)
class OpenRequest:
    """What to open. `spec` is 'demo', a path, or (for models) a spec like 'places365:resnet18:ckpt.pth.tar'.

    Judgments may name their catalog, the image root its paths are relative to and (psiz files) how they number
    stimuli; a TorchScript generator needs its noise size, how many samples to draw and its class count. Requests
    round-trip through JSON, so recent items reopen exactly what was opened. A request never carries trust: a file
    that runs code loads when its current SHA-256 is trusted (the window asks, and the settings remember).
    """

    kind: str
    spec: str
    catalog: str = ""
    image_root: str = ""
    generator: tuple[int, ...] = ()  # TorchScript generator samples: (z_dim, n, num_classes)
    index_base: int | None = None  # judgments: 0 or 1 when a psiz file cannot tell; None to detect
    layouts: tuple[tuple[str, str], ...] = ()  # a model: (layer, layout) the user gave where the model does not say

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown kind {self.kind!r}")

    @property
    def label(self) -> str:
        if self.spec == DEMO:
            return "demo"
        tail = self.spec.rsplit(":", 1)[-1] if self.kind == "model" else self.spec
        return Path(tail).name or tail

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @staticmethod
    def from_json(text: str) -> OpenRequest:
        """The request saved as `text`; keys of older versions (a stored trust_pickle flag) are dropped."""
        saved = json.loads(text)
        known = {f.name for f in fields(OpenRequest)}
        values = {k: v for k, v in saved.items() if k in known}
        values["generator"] = tuple(values.get("generator", ()))
        values["layouts"] = tuple(tuple(pair) for pair in values.get("layouts", ()))
        return OpenRequest(**values)


@dataclass(frozen=True)
class ModelInfo:
    """A loaded model as the window knows it: what opened it, on which device, and what it has. The model itself
    stays in the process that loaded it (the compute kernel); a job gets it with `model_of(ctx, info)`."""

    request: OpenRequest
    device: str
    name: str
    class_names: tuple[str, ...] | None
    default_layer: str | None
    hookable: bool
    source_key: str

    @property
    def spec(self) -> str:
        return self.request.spec


def model_of(ctx: TaskContext, info: ModelInfo):
    """The LoadedModel `info` describes, from the session of the process running the job (loaded again there when
    it is not held, e.g. after a restart: with the trust the job was given)."""
    return ctx.session.get("model", (info.request, info.device), lambda: _loaded_model(info.request, ctx, info.device))


def executor_for(request: OpenRequest) -> str:
    """Models and generators load in the compute thread (it owns torch and the GPU), and so do the demo judgments
    until they are first simulated (with torch); files in the I/O pool."""
    if request.kind == "judgments" and request.spec == DEMO:
        from probescope.core.demo.judgments import demo_judgments_written

        return IO if demo_judgments_written() else COMPUTE
    return COMPUTE if request.kind == "model" or request.generator else IO


def open_task(request: OpenRequest, device: str = "cpu") -> Job:
    """The worker task that loads `request` and returns a `Loaded`. A model's or a generator's is a compute Job: it
    loads where the jobs that use it run (the compute kernel, which then holds it, and the window gets a plain
    description: `ModelInfo`, `HeldGenerator`); the other inputs load in the window's process."""
    return Job(open_input, {"request": request, "device": device}, compute=executor_for(request) == COMPUTE)


def open_input(ctx: TaskContext, request: OpenRequest, device: str) -> Iterator[Progress | Partial]:
    """Load `request` (the body of `open_task`)."""
    loaders = {"model": _load_model, "dataset": _load_dataset, "samples": _load_samples,
               "judgments": _load_judgments}
    yield Progress(None, f"opening {request.kind} {request.label}")
    return (yield from loaders[request.kind](request, ctx, device))


def _loaded_model(request: OpenRequest, ctx: TaskContext, device: str):
    from probescope.core.models.layout import Layout
    from probescope.core.models.loading import UnknownArchitecture, load_model

    try:
        model = load_model(request.spec, trust=ctx.trust, device=device,
                           layouts={layer: Layout.parse(text) for layer, text in request.layouts})
    except UnknownArchitecture as exc:  # said in the dialog's words, not the command line's
        raise InputError("cannot tell the architecture of this state dict: open it with File > Open Model, Kind "
                         "'torchvision state dict' or 'Places365 checkpoint', and choose its Architecture",
                         exc.path) from None
    model.module.eval()
    return model


def _load_model(request: OpenRequest, ctx: TaskContext, device: str) -> Iterator[Progress]:
    from probescope.core.models.layers import list_layers

    model = _loaded_model(request, ctx, device)  # opened again: the file is read again (it may have changed)
    yield Progress(0.7, f"listing the layers of {model.name}")
    layers = tuple(list_layers(model))
    return Loaded("model", request.spec, model.name, hold_model(ctx.session, request, device, model), layers)


def hold_model(session: Session, request: OpenRequest, device: str, model) -> ModelInfo:
    """`model` (a LoadedModel opened by `request` on `device`) held in `session`, and the ModelInfo that finds it."""
    session.hold("model", (request, device), model)
    return ModelInfo(request, device, model.name, None if model.class_names is None else tuple(model.class_names),
                     model.default_layer, model.hookable, model.source_key)


def _load_dataset(request: OpenRequest, ctx: TaskContext, device: str) -> Iterator[Progress]:
    from probescope.core.data.broden import BrodenDataset

    if request.spec == DEMO:
        root, index = yield from _demo_dataset(ctx)
        label = "demo"
    else:
        root, index = dataset_root(request.spec)
        label = root.name if index == "index.csv" else f"{root.name}/{index}"
    yield Progress(0.9, f"reading {index} of {root}")
    dataset = BrodenDataset.open(root, index)
    return Loaded("dataset", request.spec, f"{label} ({dataset.n_images} images)", dataset)


def _demo_dataset(ctx: TaskContext) -> Iterator[Progress | Partial]:
    """(folder, index file) of the demo dataset; while it is generated, its first images come first (a Partial)."""
    from probescope.core.data.broden import BrodenDataset
    from probescope.core.demo.dataset import DEFAULT_N, FIRST_BATCH, demo_dataset_stages

    n = DEMO_DATASET_IMAGES or DEFAULT_N
    for index in demo_dataset_stages(n_images=n, progress=ctx.progress, cancel=ctx.cancelled,
                                     first_batch=DEMO_FIRST_BATCH or FIRST_BATCH, in_child=True):
        ctx.check()
        if index.name != "index.csv":
            first = BrodenDataset.open(index.parent, index.name)
            yield Partial(Loaded("dataset", DEMO, f"demo (first {first.n_images:,} of {n:,} images)", first,
                                 first_of=n))
    return index.parent, index.name


def dataset_root(spec: str) -> tuple[Path, str]:
    """(folder, index file name) of a dataset spec: a Broden folder (its index.csv), or one of its index files, such
    as the full Broden's index_ade20k.csv (the ADE20K rows the compositional-explanation papers use)."""
    path = Path(spec)
    if path.suffix.lower() == ".csv":
        return path.parent, path.name
    return path, "index.csv"


def _load_samples(request: OpenRequest, ctx: TaskContext, device: str) -> Iterator[Progress]:
    from probescope.core.scoring.sources import open_source

    if request.spec == DEMO:
        from probescope.core.demo.sampler import DemoSampler

        source = DemoSampler(DEMO_SAMPLES)
        label = "demo sampler (N set in the Gallery)"  # its length is the Gallery's N, which the user changes
    elif request.generator:
        source = hold_generator(ctx, request, device)
        label = f"{request.label} (generator, {source.length} samples)"
    else:
        source = open_source(request.spec)
        label = f"{request.label} ({source.length} images)"
    yield Progress(1.0, f"samples {request.label} ready")
    return Loaded("samples", request.spec, label, source)


def _load_judgments(request: OpenRequest, ctx: TaskContext, device: str) -> Iterator[Progress]:
    judgments = ctx.session.hold("judgments", judgments_key(request), _read_judgments(request))
    yield Progress(1.0, f"{len(judgments.trials)} trials read")
    label = f"{request.label} ({len(judgments.trials)} trials)"
    return Loaded("judgments", request.spec, label, judgments)


def _read_judgments(request: OpenRequest):
    from probescope.core.similarity.sources import open_judgments

    return open_judgments(request.spec, request.catalog or None, request.image_root or None,
                          index_base=request.index_base).judgments


def judgments_key(request: OpenRequest) -> tuple:
    """What a session holds the judgments of `request` under: the request and the size and time of its files, so
    that a file changed and opened again is read again in every process (the compute kernel's too)."""
    files = [] if request.spec == DEMO else [Path(request.spec), *([Path(request.catalog)] if request.catalog else [])]
    return request, tuple(_size_and_time(p) for p in files)


def _size_and_time(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_size, found.st_mtime_ns


def held_judgments(session: Session, key: tuple):
    """The judgments held in `session` under `key` (a `judgments_key`), read from their files when none are."""
    return session.get("judgments", key, lambda: _read_judgments(key[0]))


cross_by_name("probescope.core.similarity.judgments.Judgments", held_judgments)  # (by the session's name)


def batch_folder(path: str | Path) -> Path | None:
    """The `probescope batch` output folder that `path` is (or whose status.json it is), else None."""
    from probescope.jobs.batch.reader import is_batch_folder
    from probescope.jobs.batch.status import STATUS_FILE

    path = Path(path)
    folder = path.parent if path.name == STATUS_FILE else path
    return folder if is_batch_folder(folder) else None


def classify_path(path: str | Path) -> OpenRequest:
    """What a dropped file or folder opens as; InputError when it is none of the known kinds."""
    from probescope.core.files import NOT_FOUND, folder_entries, folder_problem

    path = Path(path)
    problem = folder_problem(path)
    if problem == NOT_FOUND:
        raise InputError("no such file or folder", path)
    if problem is None:  # what is in the folder decides; its reader then names any entry it cannot read
        names = {entry.name for entry in folder_entries(path)}
        if "index.csv" in names:
            return OpenRequest("dataset", str(path))
        if "stimuli.txt" in names or "train_seqs" in names:
            return OpenRequest("judgments", str(path))
        if any(Path(name).suffix.lower() in IMAGE_SUFFIXES for name in names):
            return OpenRequest("samples", str(path))
        raise InputError("folder is not a probing dataset (no index.csv), a judgments release or a folder of "
                         "images", path)
    if problem != "not a folder":
        raise InputError(problem, path)  # a broken link, no permission
    name = path.name.lower()
    if name == "index.csv":
        return OpenRequest("dataset", str(path.parent))
    suffix = path.suffix.lower()
    if suffix == ".csv" and name.startswith("index") and (path.parent / "label.csv").is_file():
        return OpenRequest("dataset", str(path))  # another index of a Broden folder (index_ade20k.csv)
    if suffix in (".npz", ".npy"):
        return OpenRequest("samples", str(path))
    if suffix in JUDGMENT_SUFFIXES:
        if name.startswith("catalog"):
            raise InputError("a catalog opens together with its judgments: use File > Open judgments", path)
        return OpenRequest("judgments", str(path))
    if suffix in MODEL_SUFFIXES:
        return OpenRequest("model", str(path))
    raise InputError("unknown file type (expected a model .pt/.pth/.pth.tar, samples .npz/.npy, judgments "
                     ".hdf5/.zip, or a folder)", path)
